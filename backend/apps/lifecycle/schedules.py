"""Lifecycle schedules: one table (``models.Schedule``: target, kind, interval, next due) derived from the
effective policies, and one beat task that ticks it.

:func:`derive_schedules` computes what the policies call for — per namespace the kinds that are not swept
(compaction, backlog quota), per node its sweeps over every namespace it hosts, file cleaning, the disk
check and, with deadline-driven sweeps on, the poll of its due times — and reconciles the table with it:
rows missing are added, intervals follow the policy, rows no longer wanted go. Whatever changes what a
schedule follows (``core.signals.schedules_changed``) calls it; nothing else writes the table but the tick.

:func:`tick_schedules` (the task ``tick_schedules``, started by beat every ``TICK_S`` seconds through one
static periodic task) starts every row whose ``next_due`` has passed — the same task and arguments the
per-target periodic tasks of before started — and moves ``next_due`` one interval from now: after downtime
each overdue row fires once, not once per missed interval. Rows are claimed with ``SELECT … FOR UPDATE
SKIP LOCKED`` (PostgreSQL) and a compare-and-set on ``next_due`` (every database), so two ticks at once
never start a row twice.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from backend.apps.core.services import upsert_interval_task
from backend.apps.lifecycle.models import Schedule
from backend.apps.namespaces.models import Namespace
from backend.apps.namespaces.selectors import hosting_nodes
from backend.apps.nodes.models import StorageNode
from backend.apps.policies.selectors import cluster_policy, effective_namespace_policy, effective_node_policy
from backend.apps.runs.models import Kind

SCHEDULED_TASK = "backend.apps.lifecycle.tasks.scheduled_run"
NAMESPACE_SCHEDULES = {  # kind → the policy field that sets its interval
    Kind.EXPIRY_SCAN: "scan_interval_ms",
    Kind.RETENTION: "scan_interval_ms",
    Kind.RECLAIM: "compaction_check_interval_ms",
    Kind.COMPACTION: "compaction_check_interval_ms",
    Kind.SUBSCRIPTION_TTL: "ttl_check_interval_ms",
    Kind.BACKLOG_QUOTA: "ttl_check_interval_ms",
    Kind.OFFLOAD: "scan_interval_ms",  # tiered storage: sealed segments go to the object store soon after sealing
}
# Kinds scheduled once per node as a sweep over every namespace it hosts, at the shortest
# interval any of them asks for: one run and one node call per interval instead of one per
# namespace (200 namespaces every 5 s would be 40 runs/s of scans alone), and one pass over
# the node's TTL index instead of one per namespace. Manual actions still target a namespace.
SWEPT_KINDS = (Kind.EXPIRY_SCAN, Kind.RETENTION, Kind.RECLAIM, Kind.SUBSCRIPTION_TTL, Kind.OFFLOAD)
NODE_SCHEDULES = {Kind.FILE_CLEAN: "clean_interval_ms"}
DISK_CHECK_INTERVAL_S = 30

# Deadline-driven sweeps (issue 15, ``services.schedule_due_sweeps``): the kinds swept at the node's due
# times, the poll of those times (a schedule of kind ``DUE_POLL``), and the interval sweeps of those kinds
# kept as a safety net of at least ``DUE_SAFETY_NET_S``.
DUE_KINDS = {Kind.EXPIRY_SCAN: "expire-scan", Kind.RECLAIM: "reclaim", Kind.RETENTION: "retention"}
DUE_POLL = "due_poll"
DUE_POLL_TASK = "backend.apps.lifecycle.tasks.poll_due_sweeps"
DUE_POLL_S = 2
DUE_SAFETY_NET_S = 60

# The one static periodic task (django-celery-beat, created after every migrate): shorter than DUE_POLL_S,
# so that a 2 s row fires every 2 s whatever the jitter. A tick message older than
# ``core.services.MIN_EXPIRE_S`` (the workers were down or behind) is dropped: the next tick does its work.
TICK_SCHEDULE = "platform: tick lifecycle schedules"
TICK_TASK = "backend.apps.lifecycle.tasks.tick_schedules"
TICK_S = 1
TICK_LIMIT = 1000  # rows started per tick at most; the rest are still due at the next tick


def deadlines_enabled() -> bool:
    """Deadline-driven sweeps are on unless ``LIFECYCLE_DEADLINES`` (setting or environment) turns them off."""
    value = getattr(settings, "LIFECYCLE_DEADLINES", None)
    if value is None:
        value = os.environ.get("LIFECYCLE_DEADLINES", "1").strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


def _short(name: str, keep: int = 120) -> str:
    """A name that fits a run's ``schedule`` (200 characters), still unique and readable."""
    if len(name) <= keep:
        return name
    return f"{name[: keep - 10]}…{hashlib.sha1(name.encode()).hexdigest()[:8]}"


def schedule_name(kind: str, namespace: Namespace | None = None, node: StorageNode | None = None) -> str:
    """The label a scheduled run carries (``TaskRun.schedule``)."""
    if namespace is not None:
        return f"lifecycle: {kind} of namespace {_short(namespace.name)}"
    if node is None:
        raise ValueError("a schedule names a namespace or a node")
    return f"lifecycle: {kind} of node {_short(node.name)}"


# -- what the policies call for ---------------------------------------------------------------------------


def scheduled_kinds(policy: Any) -> list[str]:
    """What a namespace's policy calls for: scans, reclamation and message TTL always, retention when it
    deletes, compaction when it compacts, quota enforcement when a quota is set, offloading when remote storage
    is enabled (swept per node: a node with such a namespace offloads every one of them in one step)."""
    kinds = [Kind.EXPIRY_SCAN, Kind.RECLAIM, Kind.SUBSCRIPTION_TTL]
    if policy.deletes:
        kinds.append(Kind.RETENTION)
    if policy.compacts:
        kinds.append(Kind.COMPACTION)
    if policy.backlog_quota_bytes is not None or policy.backlog_quota_seconds is not None:
        kinds.append(Kind.BACKLOG_QUOTA)
    if policy.remote_storage_enabled:
        kinds.append(Kind.OFFLOAD)
    return kinds


def _seconds(interval_ms: int) -> int:
    return max(1, interval_ms // 1000)


def sweep_intervals(node: StorageNode, *, beat: bool = False, cluster: Any = None) -> dict[str, int]:
    """Swept kind → seconds between sweeps of ``node``: the shortest interval any namespace it hosts asks
    for (kinds no hosted namespace calls for are absent). With ``beat``, what the schedule uses: for kinds
    swept at the node's due times (``DUE_KINDS``) it is a safety net, at least ``DUE_SAFETY_NET_S``."""
    cluster = cluster or cluster_policy()
    hosted = Namespace.objects.filter(placements__node=node).distinct().only("policy_overrides")
    intervals: dict[str, int] = {}
    for namespace in hosted:
        policy = effective_namespace_policy(namespace, cluster)
        for kind in scheduled_kinds(policy):
            if kind in SWEPT_KINDS:
                seconds = _seconds(getattr(policy, NAMESPACE_SCHEDULES[kind]))
                intervals[kind] = min(intervals.get(kind, seconds), seconds)
    if beat and deadlines_enabled():
        for kind in DUE_KINDS:
            if kind in intervals:
                intervals[kind] = max(intervals[kind], DUE_SAFETY_NET_S)
    return intervals


def namespace_schedules(namespace: Namespace, cluster: Any = None) -> dict[str, int]:
    """Kind → interval (s) of the namespace's own schedules: what its policy calls for and no sweep covers."""
    policy = effective_namespace_policy(namespace, cluster)
    return {
        str(kind): _seconds(getattr(policy, NAMESPACE_SCHEDULES[kind]))
        for kind in scheduled_kinds(policy)
        if kind not in SWEPT_KINDS
    }


def node_schedules(node: StorageNode, cluster: Any = None) -> dict[str, int]:
    """Kind → interval (s) of the node's schedules: its sweeps (``SWEPT_KINDS``), file cleaning, the disk
    check, and the poll of its due times when deadline-driven sweeps are on and it has a kind to sweep."""
    policy = effective_node_policy(node)
    sweeps = sweep_intervals(node, beat=True, cluster=cluster)
    wanted = {str(kind): seconds for kind, seconds in sweeps.items()}
    wanted.update({str(kind): _seconds(getattr(policy, field)) for kind, field in NODE_SCHEDULES.items()})
    wanted[str(Kind.DISK_CHECK)] = DISK_CHECK_INTERVAL_S
    if deadlines_enabled() and any(kind in DUE_KINDS for kind in sweeps):
        wanted[DUE_POLL] = DUE_POLL_S
    return wanted


# -- the table ----------------------------------------------------------------------------------------------


def derive_schedules(
    *, namespace: Namespace | None = None, node: StorageNode | None = None, now: datetime | None = None
) -> int:
    """Reconcile the schedule table with the policies: of ``namespace`` (and of the nodes hosting it, whose
    sweeps follow it), of ``node``, or, with neither, of every namespace and node. Returns how many
    schedules the targets have now."""
    now = now or timezone.now()
    cluster = cluster_policy()
    if namespace is not None:
        targets: list[tuple[dict[str, Any], dict[str, int]]] = [
            ({"namespace": namespace}, namespace_schedules(namespace, cluster))
        ]
        nodes = [hosted for hosted, _shards in hosting_nodes(namespace)]
    elif node is not None:
        targets, nodes = [], [node]
    else:
        targets = [({"namespace": ns}, namespace_schedules(ns, cluster)) for ns in Namespace.objects.all()]
        nodes = list(StorageNode.objects.all())
    targets += [({"node": each}, node_schedules(each, cluster)) for each in nodes]
    with transaction.atomic():
        return sum(_reconcile(target, wanted, now) for target, wanted in targets)


def _reconcile(target: dict[str, Any], wanted: dict[str, int], now: datetime) -> int:
    """Make the target's rows the ``wanted`` kinds at their intervals. A new row is first due one interval
    from now; a row whose interval shrinks is due no later than one new interval from now; ``enabled`` and
    ``last_started`` stay. The rows are locked meanwhile, so a tick cannot advance one underneath."""
    rows = {row.kind: row for row in Schedule.objects.select_for_update().filter(**target).order_by("pk")}
    unwanted = [row.pk for kind, row in rows.items() if kind not in wanted]
    if unwanted:
        Schedule.objects.filter(pk__in=unwanted).delete()
    missing = []
    for kind, seconds in wanted.items():
        row = rows.get(kind)
        if row is None:
            missing.append(Schedule(**target, kind=kind, interval_s=seconds, next_due=now + timedelta(seconds=seconds)))
        elif row.interval_s != seconds:
            row.interval_s = seconds
            row.next_due = min(row.next_due, now + timedelta(seconds=seconds))
            row.save(update_fields=["interval_s", "next_due"])
    # A concurrent reconcile may have added the same row meanwhile: it derived the same interval.
    Schedule.objects.bulk_create(missing, ignore_conflicts=True)
    return len(wanted)


def set_schedules_enabled(enabled: bool) -> int:
    """Pause (or resume) every lifecycle schedule, as the lifecycle bench does for its first phase."""
    return Schedule.objects.exclude(enabled=enabled).update(enabled=enabled)


# -- the tick -----------------------------------------------------------------------------------------------


def task_of(row: Schedule) -> tuple[str, dict[str, Any]]:
    """The Celery task a schedule starts and its keyword arguments (those of the periodic tasks before)."""
    if row.kind == DUE_POLL:
        return DUE_POLL_TASK, {"node_id": row.node_id}
    if row.namespace_id is not None:
        return SCHEDULED_TASK, {"kind": row.kind, "namespace_id": row.namespace_id}
    return SCHEDULED_TASK, {"kind": row.kind, "node_id": row.node_id}


def send_task(task: str, kwargs: dict[str, Any]) -> None:
    """Queue ``task`` as beat would: through the registered task (its routing), else by name."""
    registered = current_app.tasks.get(task)
    if registered is not None:
        registered.apply_async(kwargs=kwargs)
    else:
        current_app.send_task(task, kwargs=kwargs)


def tick_schedules(
    *,
    now: datetime | None = None,
    send: Callable[[str, dict[str, Any]], None] = send_task,
    limit: int = TICK_LIMIT,
) -> int:
    """Start the task of every enabled schedule due at ``now`` and move it one interval from ``now``.
    Returns how many were started. The tasks are queued once the claim is committed."""
    now = now or timezone.now()
    started = 0
    with transaction.atomic():
        due = (
            Schedule.objects.select_for_update(skip_locked=True)  # another tick's rows: not ours (PostgreSQL)
            .filter(enabled=True, next_due__lte=now)
            .order_by("next_due", "pk")[:limit]
        )
        for row in due:
            claimed = Schedule.objects.filter(pk=row.pk, next_due=row.next_due).update(
                next_due=now + timedelta(seconds=row.interval_s), last_started=now
            )
            if not claimed:  # advanced meanwhile (a database without row locks): another tick started it
                continue
            task, kwargs = task_of(row)
            transaction.on_commit(lambda task=task, kwargs=kwargs: send(task, kwargs))
            started += 1
    return started


def ensure_tick_schedule(**_: Any) -> None:
    """Idempotent: the static periodic task that ticks the table exists (runs after every migrate)."""
    upsert_interval_task(TICK_SCHEDULE, TICK_TASK, TICK_S)
