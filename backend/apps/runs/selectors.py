"""Reads of task runs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Max, OuterRef, QuerySet, Subquery

from backend.apps.runs.models import Kind, RunChange, State, TaskRun


@dataclass(frozen=True)
class RunSummary:
    """What a run affected (a dry run: would affect), in three figures; see :func:`run_summary`."""

    records: int
    segments: int
    bytes: int
    pending_bytes: int = 0


def run_summary(run: TaskRun) -> RunSummary:
    """The one definition of what a run affected, from its counts (summed over its steps so far): the figures a
    dry run reports as what the action would do, and a real run as what it did.

    - a recall (tiered storage) moves offloaded segments back to local disk and removes nothing: ``segments``
      the segments recalled, ``bytes`` the bytes recalled (the local disk they take), ``records`` 0;
    - an offload (tiered storage) copies sealed segments to the object store and removes no record:
      ``segments`` the segments offloaded, ``bytes`` the local disk it frees: the bytes of the local copies it
      dropped past local retention (``local_bytes_dropped``), ``records`` 0;
    - message TTL and backlog-quota eviction move subscription cursors and delete nothing: ``records`` the
      messages the cursors acknowledged (``messages_acknowledged``; the cursors themselves are
      ``cursors_moved`` in the counts), ``segments`` and ``bytes`` 0;
    - any other kind: ``records`` the records expired plus the records removed (``expired_records`` +
      ``records_removed``), ``segments`` the segments deleted plus those rewritten (``segments_deleted`` +
      ``segments_rewritten``), ``bytes`` the bytes reclaimed (``bytes_reclaimed``)."""
    counts = run.counts or {}

    def count(*names: str) -> int:
        return sum(int(counts.get(name) or 0) for name in names)

    if run.kind == Kind.RECALL:
        return RunSummary(records=0, segments=count("segments_recalled"), bytes=count("bytes_recalled"))
    if run.kind == Kind.OFFLOAD:
        return RunSummary(records=0, segments=count("segments_offloaded"), bytes=count("local_bytes_dropped"))
    if run.kind in (Kind.SUBSCRIPTION_TTL, Kind.BACKLOG_QUOTA):
        return RunSummary(records=count("messages_acknowledged"), segments=0, bytes=0)
    return RunSummary(
        records=count("expired_records", "records_removed"),
        segments=count("segments_deleted", "segments_rewritten"),
        bytes=run.bytes_reclaimed,
        pending_bytes=pending_bytes(run),
    )


def pending_bytes(run: TaskRun) -> int:
    """Bytes the run's deletions left on disk as ``.deleted`` files (not freed yet: ``file_delete_delay_ms``, or a
    reader holding them; storage_engine.rules.work.count_freed): what each node reported after its last step, summed
    over the run's nodes. A later run (or the file cleaner) that removes them counts them freed then."""
    levels = (run.params or {}).get("pending_delete_bytes") or {}
    return sum(int(v or 0) for v in levels.values()) if isinstance(levels, dict) else 0


def fold_window() -> timedelta:
    """How long a folded row's window is (``RUN_FOLD_WINDOW_S``; see ``services.fold_sweep``)."""
    return timedelta(seconds=int(settings.RUN_FOLD_WINDOW_S))


def run_list() -> QuerySet[TaskRun]:
    return TaskRun.objects.select_related("namespace", "node", "started_by").prefetch_related("changes__namespace")


def _changes_by(namespace: Any, kind: str) -> QuerySet[RunChange]:
    """When runs of ``kind`` changed the namespace (a model or an ``OuterRef``): runs on it (or one of its shards)
    and node-wide runs (a sweep, a manual node action) that the node says changed it (``RunChange``). A run that
    changed nothing there (every count 0 for it) and a dry run (it changes nothing) are not among them."""
    return RunChange.objects.filter(namespace=namespace, run__kind=kind, run__dry_run=False)


def last_finished(kind: str) -> Subquery:
    """A subquery: when a run of ``kind`` last changed the namespace (see :func:`last_run_at`)."""
    return Subquery(_changes_by(OuterRef("pk"), kind).order_by("-changed_at").values("changed_at")[:1])


def last_change(namespace: Any, kind: str) -> tuple[Any, int | None]:
    """When a run of ``kind`` last changed the namespace — its last scan that expired records, its last compaction
    that removed or rewrote something — one on the namespace or a node-wide sweep of a node hosting it (its
    step that changed it), and that run's id; ``(None, None)`` if none did. A run that found nothing to do is
    not the last scan."""
    found = _changes_by(namespace, kind).order_by("-changed_at").values_list("changed_at", "run_id").first()
    return found if found is not None else (None, None)


def last_run_at(namespace: Any, kind: str) -> Any:
    """When a run of ``kind`` last changed the namespace (:func:`last_change`), or ``None``."""
    return last_change(namespace, kind)[0]


def run_durations(now: datetime, kinds: list[str] | None = None) -> dict[tuple[str, str, str], float]:
    """(kind, namespace, node) → the running run's time so far, else the last successful run's duration (of a
    row of folded sweeps: its latest sweep's).

    A run on a namespace (or one of its shards) is the namespace's, whatever nodes it went through; a run with
    no namespace is its node's (the node-wide sweeps); Spark jobs name neither."""
    runs = TaskRun.objects.filter(started_at__isnull=False, dry_run=False)
    if kinds is not None:
        runs = runs.filter(kind__in=kinds)
    fields = ("kind", "namespace__name", "node__name")

    def key(kind: str, namespace: str | None, node: str | None) -> tuple[str, str, str]:
        return (kind, namespace or "", "" if namespace else node or "")

    out: dict[tuple[str, str, str], float] = {}
    for kind, namespace, node, started in runs.filter(state=State.RUNNING).values_list(*fields, "started_at"):
        target = key(kind, namespace, node)
        out[target] = max(out.get(target, 0.0), (now - started).total_seconds(), 0.0)
    succeeded = runs.filter(state=State.SUCCEEDED, finished_at__isnull=False)
    last: dict[tuple[str, str, str], datetime] = {}
    for row in succeeded.values(*fields).annotate(finished=Max("finished_at")):
        target = key(row["kind"], row["namespace__name"], row["node__name"])
        last[target] = max(last.get(target, row["finished"]), row["finished"])
    if last:
        rows = succeeded.filter(finished_at__in=set(last.values())).values_list(
            *fields, "started_at", "finished_at", "last_sweep_s"
        )
        for kind, namespace, node, started, finished, last_sweep_s in rows:
            target = key(kind, namespace, node)
            if target not in out and last.get(target) == finished:
                # A row of folded sweeps spans its window: its latest sweep's own duration is the run's.
                took = last_sweep_s if last_sweep_s is not None else (finished - started).total_seconds()
                out[target] = max(0.0, took)
    return out
