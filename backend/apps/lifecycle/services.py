"""Lifecycle orchestration: task runs that drive bounded steps on the nodes.

A run (``runs.TaskRun``) is created by a schedule or an operator, then
:func:`run_step` does one bounded step on the node per Celery task: it takes
the shard leases (at most one lifecycle job per shard), calls the node,
records the counts on the run, and says whether to call again (the node
reports ``more``). The Celery task re-queues itself until done. Cancellation
is checked between steps; a node that cannot be reached is retried by Celery
with backoff; a worker that dies leaves the run resumable (the message is
redelivered, and the lease expires if it is not).

A dry run is one step per target (DESIGN §3 "Dry runs"): the node answers the whole would-be
effect at once, so the run never repeats a step on the same target, even if a node answered
``more`` (it would count the same work again at every repetition): it logs that and moves on.
"""

from __future__ import annotations

import enum
import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from backend.apps.audit import services as audit
from backend.apps.catalog import services as catalog
from backend.apps.lifecycle import enqueue as enqueue_task
from backend.apps.lifecycle import leases
from backend.apps.lifecycle.actions import ACTIONS, actions_for, skip_reason
from backend.apps.lifecycle.models import DueSweep, Lease
from backend.apps.lifecycle.schedules import DUE_KINDS, deadlines_enabled, schedule_name
from backend.apps.lifecycle.selectors import scheduled_kinds_of_node
from backend.apps.namespaces.models import Namespace
from backend.apps.namespaces.selectors import hosting_nodes, node_for_shard
from backend.apps.nodes import gateway
from backend.apps.nodes.gateway import client_for
from backend.apps.nodes.models import StorageNode
from backend.apps.nodes.selectors import queue_for
from backend.apps.runs import services as runs
from backend.apps.runs.models import FINISHED, Kind, State, TaskRun
from storage_engine.api import (
    LIFECYCLE_COUNTS,
    OFFLOAD_COUNTS,
    RECALL_COUNTS,
    SUBSCRIPTION_COUNTS,
    CompactionEstimate,
    DiskStatus,
    LifecycleResult,
)
from storage_engine.errors import InvalidArgumentError, NodeUnavailableError, StorageError

log = logging.getLogger(__name__)
LEASE_TTL_S = settings.CELERY_TASK_TIME_LIMIT + 60


COUNTED = tuple(k for k in LIFECYCLE_COUNTS if k != "bytes_reclaimed")  # bytes go in their own column
# The further counts a run of a kind records (an offload's uploads and dropped local copies, a recall's
# downloads, in bytes too; the cursors message TTL and backlog eviction moved and the messages they acknowledged).
COUNTED_BY_KIND: dict[str, tuple[str, ...]] = {
    Kind.OFFLOAD: OFFLOAD_COUNTS,
    Kind.RECALL: RECALL_COUNTS,
    Kind.SUBSCRIPTION_TTL: SUBSCRIPTION_COUNTS,
    Kind.BACKLOG_QUOTA: SUBSCRIPTION_COUNTS,
}


class StepOutcome(enum.StrEnum):
    DONE = "done"  # finished (succeeded, failed or cancelled)
    MORE = "more"  # call again
    BUSY = "busy"  # another job holds the shard: try again later


def active_run(kind: str, namespace: Namespace | None, node: StorageNode | None) -> TaskRun | None:
    return TaskRun.objects.filter(kind=kind, namespace=namespace, node=node).exclude(state__in=FINISHED).first()


def create_run(
    *,
    kind: str,
    namespace: Namespace | None = None,
    node: StorageNode | None = None,
    shard: int | None = None,
    actor: Any = None,
    schedule: str = "",
    params: dict[str, Any] | None = None,
    dry_run: bool = False,
) -> TaskRun:
    if kind not in ACTIONS:
        raise InvalidArgumentError("action", f"must be one of {', '.join(sorted(ACTIONS))}")
    action = ACTIONS[kind]
    if action.scope == "namespace" and namespace is None and not (action.sweeps and node is not None):
        raise InvalidArgumentError("namespace", f"is required for {kind}")
    if namespace is not None:
        # A one-shard run belongs to the shard's node; a namespace-wide run is filed under the
        # namespace's node and visits every hosting node in turn (see ``step_targets``).
        node = namespace.node if shard is None else node_for_shard(namespace, shard)
    return runs.create_run(
        kind=kind,
        actor=actor,
        schedule=schedule,
        namespace=namespace,
        node=node,
        shard=shard,
        params=params or {},
        dry_run=dry_run,
    )


def start_action(
    *,
    kind: str,
    actor: Any,
    namespace: Namespace | None = None,
    node: StorageNode | None = None,
    shard: int | None = None,
    confirm: str | None = None,
    dry_run: bool = False,
) -> TaskRun:
    """An operator's manual action: checked, audited, queued.

    A dry run (``dry_run``) is a run like any other, of one step: the node takes the same
    decisions and reports what it would do — records, segments, bytes — changing nothing,
    so it needs no confirmation and never counts as the namespace's last scan or compaction.
    """
    if (namespace is None) == (node is None):
        raise InvalidArgumentError("target", "an action acts on a namespace or on a node, one of them")
    action = ACTIONS.get(kind)
    scope = "namespace" if namespace is not None else "node"
    if action is None or kind not in actions_for(scope):
        raise InvalidArgumentError("action", f"must be one of {', '.join(actions_for(scope))} for a {scope}")
    if shard is not None and "shard" not in action.spec.accepts:
        raise InvalidArgumentError("shard", f"{kind} acts on the whole namespace")
    if dry_run and not action.dry_run:
        offered = ", ".join(sorted(k for k, a in ACTIONS.items() if a.dry_run))
        raise InvalidArgumentError("dry_run", f"is offered for {offered}, not {kind}")
    target = namespace.name if namespace is not None else node.name if node is not None else ""
    if action.destructive and not dry_run and confirm != target:
        raise InvalidArgumentError("confirm", f"must repeat the {scope} name: {kind} deletes data")
    with transaction.atomic():
        run = create_run(
            kind=kind,
            namespace=namespace,
            node=node,
            shard=shard,
            actor=actor,
            params={"manual": True},
            dry_run=dry_run,
        )
        audit.record(
            actor=actor,
            action=f"action.{kind}",
            target_type=scope,
            target=target,
            after={"run": run.pk, "shard": shard, "dry_run": dry_run},
        )
    enqueue(run)
    return run


def schedule_run(
    kind: str,
    namespace: Namespace | None = None,
    node: StorageNode | None = None,
    schedule: str = "",
    params: dict[str, Any] | None = None,
) -> TaskRun | None:
    """A scheduled run, unless one of the same kind on the same target is still active."""
    if active_run(kind, namespace, namespace.node if namespace is not None else node) is not None:
        return None
    run = create_run(kind=kind, namespace=namespace, node=node, schedule=schedule, params=params)
    enqueue(run)
    return run


def step_targets(run: TaskRun) -> list[tuple[StorageNode, int | None]]:
    """Where a run's steps go, in order: (node, shard or None for all of the namespace's shards there).

    A node-level run and a one-shard run have one target. A namespace-wide run has
    one per node hosting a shard of the namespace; it works through them in turn
    (``params["target"]`` is the position), so its counts add up across nodes.
    """
    if run.namespace is None:
        return [(run.node, None)]
    if run.shard is not None:
        return [(node_for_shard(run.namespace, run.shard), run.shard)]
    return [(node, None) for node, _shards in hosting_nodes(run.namespace)]


def current_target(run: TaskRun) -> tuple[list[tuple[StorageNode, int | None]], int]:
    """The run's targets and the position of the one its next step goes to."""
    targets = step_targets(run)
    return targets, min(int(run.params.get("target", 0)), len(targets) - 1)


def queue_for_run(run: TaskRun) -> str:
    """The queue of the node the run's next step goes to."""
    targets, position = current_target(run)
    return queue_for(targets[position][0])


def queue_for_run_id(run_id: int) -> str:
    return queue_for_run(TaskRun.objects.select_related("namespace__node", "node").get(pk=run_id))


def enqueue(run: TaskRun, countdown: float = 0) -> None:
    """Queue the run's next step on its node's queue once the transaction commits."""
    enqueue_task.lifecycle_step(run.pk, queue=queue_for_run(run), countdown=countdown)


def run_step(run_id: int) -> StepOutcome:
    """One bounded step of a run on its node; see the module docstring."""
    run = TaskRun.objects.select_related("namespace", "node", "namespace__node").get(pk=run_id)
    if run.state in FINISHED:
        return StepOutcome.DONE
    if run.cancel_requested:
        runs.finish(run, State.CANCELLED, "cancelled between steps")
        return StepOutcome.DONE
    action = ACTIONS[run.kind]
    targets, position = current_target(run)
    node, shard = targets[position]
    keys = leases.shard_keys(run.namespace, run.shard) if run.namespace else leases.node_keys(node, run.kind)
    holder = f"run:{run.pk}"
    if not leases.acquire_all(keys, holder, LEASE_TTL_S):
        return StepOutcome.BUSY
    runs.mark_running(run)
    try:
        with client_for(node) as client:
            result: LifecycleResult | DiskStatus
            if run.namespace is None and run.params.get("due"):
                result = client.sweep_due(action.operation)  # the shards due now only
            else:
                request = action.request(
                    run.namespace.name if run.namespace else None,
                    shard,
                    manual=bool(run.params.get("manual")),
                    dry_run=run.dry_run,
                )
                result = client.step(request)
            if isinstance(result, DiskStatus):
                runs.record_step(run, {}, progress=1.0)
                TaskRun.objects.filter(pk=run.pk).update(params={**run.params, "disk": result.to_dict()})
                more = False
            else:
                counted = (*COUNTED, *COUNTED_BY_KIND.get(run.kind, ()))
                runs.record_step(
                    run,
                    {k: getattr(result, k) for k in counted},
                    result.bytes_reclaimed,
                    changed=result.namespaces_changed,  # whom the step changed: a sweep's namespaces too
                )
                moved = result.segments_offloaded or result.local_copies_dropped
                if run.kind == Kind.OFFLOAD and moved and not run.dry_run:
                    _tiers_moved(run, node)
                if run.kind == Kind.RECALL and result.segments_recalled and not run.dry_run:
                    _tiers_moved(run, node)
                if result.pending_delete_bytes or "pending_delete_bytes" in run.params:
                    # A level, not a count: the bytes still on disk as .deleted files after this node's last step.
                    pending = {**run.params.get("pending_delete_bytes", {}), node.name: result.pending_delete_bytes}
                    run.params = {**run.params, "pending_delete_bytes": pending}
                    TaskRun.objects.filter(pk=run.pk).update(params=run.params)
                if result.skipped:
                    run.params = {
                        **run.params,
                        "skipped": result.skipped,
                        "skipped_reason": skip_reason(run.kind, result.skipped),
                    }
                    TaskRun.objects.filter(pk=run.pk).update(params=run.params)
                more = result.more
                if more and run.dry_run:
                    # A dry run reports everything at once; repeating it would count the same work again.
                    log.warning(
                        "run %s: node %s answered more to a dry run of %s; not repeating it",
                        run.pk,
                        node.name,
                        run.kind,
                    )
                    more = False
                if not more and position + 1 < len(targets):  # this node is done: the next one
                    run.params = {**run.params, "target": position + 1}
                    TaskRun.objects.filter(pk=run.pk).update(params=run.params)
                    more = True
    except NodeUnavailableError:
        leases.release_all(keys, holder)
        raise  # the Celery task retries with backoff
    except StorageError as exc:
        runs.finish(run, State.FAILED, str(exc))
        leases.release_all(keys, holder)
        return StepOutcome.DONE
    if more and not runs.cancel_requested(run):
        return StepOutcome.MORE  # keep the lease: the next step of this run continues
    runs.finish(run, State.CANCELLED if runs.cancel_requested(run) else State.SUCCEEDED)
    leases.release_all(keys, holder)
    if run.namespace is None and run.kind in DUE_KINDS and deadlines_enabled():
        try:
            schedule_due_sweeps(node)  # the sweep is done: the next one goes at the node's next due time
        except StorageError as exc:  # the node is gone meanwhile: the interval schedule is the safety net
            log.warning("next due times of node %s: %s", node.name, exc)
    return StepOutcome.DONE


def _tiers_moved(run: TaskRun, node: StorageNode) -> None:
    """An offload or recall step moved segments between tiers, which no metrics collection sees: the catalog syncs
    the shards concerned (the namespace's, or a sweep's: every namespace the node hosts) at its next pass."""
    namespaces = [run.namespace] if run.namespace is not None else Namespace.objects.filter(placements__node=node)
    catalog.mark_tiers_stale(namespaces)


def fail_run(run_id: int, error: str) -> None:
    """A run whose task gave up (retries exhausted, time limit): failed, leases released."""
    run = TaskRun.objects.get(pk=run_id)
    runs.finish(run, State.FAILED, error)
    leases.release_all(
        [*leases.shard_keys(run.namespace, run.shard)] if run.namespace else leases.node_keys(run.node, run.kind),
        f"run:{run.pk}",
    )


def compaction_estimate(namespace: Namespace) -> CompactionEstimate:
    """What compacting ``namespace`` now would reclaim: each node estimates the shards it holds (a dry run;
    nothing changes), and all must answer for the sum to mean anything (the gateway raises otherwise)."""
    estimates = gateway.on_each(hosting_nodes(namespace), lambda client, _: client.compaction_estimate(namespace.name))
    return sum((e for e in estimates if e is not None), CompactionEstimate(namespace=namespace.name))


MAX_RESUMES = 3


def reap_stale_runs(now: Any = None, limit: int = 100) -> dict[str, int]:
    """Runs left ``running`` by a worker that died: resume them, or fail them after MAX_RESUMES.

    A live run holds its leases and extends them at every step; once every lease
    of a running run has expired (or is gone), no worker is on it. Its steps are
    safe to repeat, so it is queued again; a run that keeps dying is failed.
    """
    now = now or timezone.now()
    resumed = failed = 0
    # Only lifecycle runs: other kinds (Spark jobs) have their own task and lease handling.
    running = TaskRun.objects.filter(state=State.RUNNING, kind__in=list(ACTIONS))
    for run in running.select_related("namespace", "node")[:limit]:
        live = Lease.objects.filter(holder=f"run:{run.pk}", expires_at__gt=now).exists()
        if live:
            continue
        resumes = int(run.params.get("resumes", 0))
        if resumes >= MAX_RESUMES:
            fail_run(run.pk, f"its worker died {resumes + 1} times; giving up")
            failed += 1
            continue
        TaskRun.objects.filter(pk=run.pk).update(params={**run.params, "resumes": resumes + 1})
        enqueue(run)
        resumed += 1
    return {"resumed": resumed, "failed": failed}


# -- deadline-driven sweeps (issue 15, DESIGN §3 "Timeliness") ------------------------------------------------
# A node knows when each kind of sweep next has work (``GET /v1/node/next-due``). The sweep of that kind is
# scheduled for that moment (a Celery task with an ``eta``), at most one pending per node and kind: a later
# due time while one is pending changes nothing (the pending sweep asks again when it is done), an earlier
# one supersedes it. A sweep run that finishes asks the node again, so sweeps follow the deadlines; a light
# poll (a schedule of kind ``schedules.DUE_POLL``, every ``DUE_POLL_S``) picks up new deadlines earlier than
# any pending sweep (new data with a short TTL), and the interval sweeps stay as a safety net at an interval
# of at least ``DUE_SAFETY_NET_S`` (``schedules.py`` has these constants).
DUE_GRACE_MS = 20  # run a sweep this long after its due time, so that the node's clock is past it
# At most one due sweep of a kind per node per this many ms: deadlines come as often as batches are produced,
# so a sweep per deadline would cost a Celery task and two node calls per batch. Whole-segment drops (what
# moves the expired ratio) go often; the TTL scan (index clean-up: reads already hide expired records) and
# retention less so.
DUE_MIN_GAP_MS = {Kind.RECLAIM: 100, Kind.EXPIRY_SCAN: 1_000, Kind.RETENTION: 1_000}
# A pending sweep this far past its eta has not run (its message was lost, or the workers are that far behind):
# another replaces it (the old message, if it ever runs, finds its token superseded and does nothing).
DUE_LOST_AFTER_S = 10


def schedule_due_sweeps(node: StorageNode, answer: dict[str, Any] | None = None) -> dict[str, datetime | None]:
    """Ask ``node`` when each kind of sweep is next due and schedule those sweeps (see above).

    Returns kind → the eta of the sweep now pending because of this call (``None``: nothing
    scheduled: nothing due, a kind the node's namespaces do not call for, an earlier sweep already
    pending, or a due time an earlier sweep did not clear).
    """
    if answer is None:
        with client_for(node) as client:
            answer = client.next_due()
    # The kinds the node's namespaces call for are those it has a sweep schedule of (schedules.node_schedules).
    swept = scheduled_kinds_of_node(node)
    node_now = int(answer["now"])
    scheduled: dict[str, datetime | None] = {}
    for kind, operation in DUE_KINDS.items():
        due = answer["due"].get(operation)
        if kind not in swept or due is None:
            scheduled[kind] = None
            continue
        # The node's clock decides when its deadline passes: wait (due − node now) from here.
        eta = timezone.now() + timedelta(milliseconds=max(0, int(due) - node_now) + DUE_GRACE_MS)
        scheduled[kind] = schedule_sweep_at(node, kind, int(due), eta)
    return scheduled


def schedule_sweep_at(node: StorageNode, kind: str, due_ms: int, eta: datetime) -> datetime | None:
    """Make a sweep of ``kind`` on ``node`` pending at ``eta`` unless one at or before it already is."""
    now = timezone.now()
    with transaction.atomic():
        row = DueSweep.objects.select_for_update().filter(node=node, kind=kind).first()
        if row is not None:
            pending = bool(row.token) and not row.fired and row.eta > now - timedelta(seconds=DUE_LOST_AFTER_S)
            if pending and row.due_ms <= due_ms:
                return None  # coalesced: the earlier sweep asks the node again when it is done
            if row.fired and due_ms <= row.due_ms:
                return None  # a sweep ran after this due time and left it: not clearable now (the interval sweep will)
            if row.fired:  # the previous due sweep ran at row.eta: keep the kind's minimum gap after it
                eta = max(eta, row.eta + timedelta(milliseconds=DUE_MIN_GAP_MS.get(kind, 0)))
        token = uuid.uuid4().hex
        DueSweep.objects.update_or_create(
            node=node, kind=kind, defaults={"due_ms": due_ms, "eta": eta, "token": token, "fired": False}
        )
        enqueue_task.due_sweep(str(kind), node.pk, token, eta=eta, queue=queue_for(node))
    return eta


def run_due_sweep(kind: str, node_id: int, token: str) -> int | None:
    """A pending sweep's moment has come: start the run, unless a later call superseded it."""
    node = StorageNode.objects.filter(pk=node_id).first()
    if node is None:
        return None
    with transaction.atomic():
        if not DueSweep.objects.filter(node=node, kind=kind, token=token, fired=False).update(fired=True):
            return None  # superseded by an earlier due time, or already run
        run = schedule_run(kind, node=node, schedule=f"{schedule_name(kind, node=node)} (due)", params={"due": True})
        if run is None:
            # A run of this kind is still going: it asks for the next due time when it finishes.
            DueSweep.objects.filter(node=node, kind=kind, token=token).update(fired=False, token="")
            return None
        return run.pk
