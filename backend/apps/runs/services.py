"""Writes of task runs: create, progress, finish, cancel. Celery tasks call these."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from backend.apps.audit import services as audit
from backend.apps.runs.models import FINISHED, Kind, State, TaskRun
from storage_engine.errors import InvalidArgumentError


def create_run(*, kind: str, actor: Any = None, schedule: str = "", **target: Any) -> TaskRun:
    user = actor if getattr(actor, "is_authenticated", False) else None
    return TaskRun.objects.create(kind=kind, started_by=user, schedule=schedule, **target)


def mark_running(run: TaskRun) -> TaskRun:
    TaskRun.objects.filter(pk=run.pk, state=State.QUEUED).update(state=State.RUNNING, started_at=timezone.now())
    run.refresh_from_db()
    return run


def record_step(run: TaskRun, counts: dict[str, int], bytes_reclaimed: int = 0, progress: float | None = None) -> None:
    """Add one bounded step's counts to the run (atomic, safe against concurrent readers)."""
    with transaction.atomic():
        locked = TaskRun.objects.select_for_update().get(pk=run.pk)
        merged = dict(locked.counts)
        for key, value in counts.items():
            merged[key] = merged.get(key, 0) + value
        locked.counts = merged
        locked.steps = F("steps") + 1
        locked.bytes_reclaimed = F("bytes_reclaimed") + bytes_reclaimed
        if progress is not None:
            locked.progress = max(0.0, min(1.0, progress))
        locked.save(update_fields=["counts", "steps", "bytes_reclaimed", "progress"])


def finish(run: TaskRun, state: str, error: str = "") -> None:
    updates: dict[str, Any] = {"state": state, "error": error[:10_000], "finished_at": timezone.now()}
    if state == State.SUCCEEDED:
        updates["progress"] = 1.0
    if TaskRun.objects.filter(pk=run.pk).exclude(state__in=FINISHED).update(**updates) and state == State.SUCCEEDED:
        fold_noop_run(run.pk)


# Scheduled lifecycle runs come every few seconds per node and kind, and most find nothing to
# do: kept one by one they bury the manual runs and grow the table without end. So a scheduled
# run that did nothing (succeeded, every count 0, nothing reclaimed) replaces the earlier no-op
# runs of the same kind and target: only the latest is kept, carrying how many it stands for
# (``params.noop_runs``) and since when (``params.noop_since``). Runs that did work, failed or
# were cancelled, manual runs and Spark jobs (whose counts are not lifecycle counts) are kept.
NOOP_FOLDED_KINDS = frozenset(
    {
        Kind.EXPIRY_SCAN,
        Kind.RETENTION,
        Kind.RECLAIM,
        Kind.COMPACTION,
        Kind.SUBSCRIPTION_TTL,
        Kind.BACKLOG_QUOTA,
        Kind.OFFLOAD,
        Kind.FILE_CLEAN,
        Kind.DISK_CHECK,
    }
)


def is_noop(run: TaskRun) -> bool:
    """A scheduled lifecycle run that succeeded without doing anything."""
    return (
        bool(run.schedule)
        and run.kind in NOOP_FOLDED_KINDS
        and run.state == State.SUCCEEDED
        and run.bytes_reclaimed == 0
        and not any(run.counts.values())
    )


def fold_noop_run(run_id: int) -> None:
    """Keep only the latest no-op scheduled run per kind and target (see ``NOOP_FOLDED_KINDS``)."""
    with transaction.atomic():
        run = TaskRun.objects.select_for_update().get(pk=run_id)
        if not is_noop(run):
            return
        earlier = TaskRun.objects.filter(
            kind=run.kind,
            namespace_id=run.namespace_id,
            node_id=run.node_id,
            shard=run.shard,
            state=State.SUCCEEDED,
            params__noop=True,
        ).exclude(pk=run.pk)
        folded = list(earlier.values_list("params", "created_at"))
        starts = [run.created_at]
        for params, created in folded:
            since = params.get("noop_since")
            starts.append(datetime.fromisoformat(since) if isinstance(since, str) else created)
        run.params = {
            **run.params,
            "noop": True,
            "noop_runs": 1 + sum(int(params.get("noop_runs", 1)) for params, _ in folded),
            "noop_since": min(starts).isoformat(),
        }
        run.save(update_fields=["params"])
        earlier.delete()


def request_cancel(*, run: TaskRun, actor: Any) -> TaskRun:
    """Ask a run to stop; a running job stops between two steps, a queued one never starts."""
    if run.state in FINISHED:
        raise InvalidArgumentError(
            "state", f"the run already {run.state}; only queued or running runs can be cancelled"
        )
    TaskRun.objects.filter(pk=run.pk).update(cancel_requested=True)
    if run.state == State.QUEUED:
        finish(run, State.CANCELLED, "cancelled before it started")
    audit.record(
        actor=actor,
        action="run.cancel",
        target_type="run",
        target=str(run.pk),
        before={"state": run.state},
        after={"cancel_requested": True},
    )
    run.refresh_from_db()
    return run


def cancel_requested(run: TaskRun) -> bool:
    return TaskRun.objects.filter(pk=run.pk, cancel_requested=True).exists()
