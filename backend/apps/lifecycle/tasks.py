"""Thin Celery tasks over :mod:`backend.apps.lifecycle.services` and :mod:`~backend.apps.lifecycle.schedules`:
they take ids, do one bounded step and re-queue themselves while the node reports more work."""

from __future__ import annotations

import contextlib

from celery import shared_task
from celery.exceptions import MaxRetriesExceededError, SoftTimeLimitExceeded

from backend.apps.lifecycle import enqueue, schedules, services
from backend.apps.namespaces.models import Namespace
from backend.apps.nodes.models import StorageNode
from storage_engine.errors import NodeUnavailableError, StorageError

BUSY_RETRY_S = 5


@shared_task(
    name=enqueue.LIFECYCLE_STEP,
    bind=True,
    acks_late=True,
    max_retries=8,
    soft_time_limit=300,
    time_limit=360,
    ignore_result=True,
)
def lifecycle_step(self, run_id: int) -> str:
    try:
        outcome = services.run_step(run_id)
    except NodeUnavailableError as exc:
        try:
            # Exponential backoff: 2, 4, 8, ... 256 s, then the run fails.
            raise self.retry(exc=exc, countdown=2 ** (self.request.retries + 1))
        except MaxRetriesExceededError:
            services.fail_run(run_id, f"node unavailable after {self.max_retries} retries: {exc}")
            return "failed"
    except SoftTimeLimitExceeded:
        services.fail_run(run_id, "step exceeded the soft time limit")
        return "failed"
    if outcome is services.StepOutcome.MORE:
        # The next step may be on another node (a namespace spread over nodes): its queue.
        self.apply_async((run_id,), queue=services.queue_for_run_id(run_id))
    elif outcome is services.StepOutcome.BUSY:
        self.apply_async((run_id,), countdown=BUSY_RETRY_S, queue=self.request.delivery_info.get("routing_key"))
    return outcome.value


@shared_task(ignore_result=True)
def tick_schedules() -> int:
    """Started by beat every ``schedules.TICK_S``: the schedules due now start their tasks."""
    return schedules.tick_schedules()


@shared_task(ignore_result=True)
def scheduled_run(kind: str, namespace_id: int | None = None, node_id: int | None = None) -> int | None:
    """Started by the tick from a namespace's or node's schedule."""
    namespace = Namespace.objects.select_related("node").filter(pk=namespace_id).first() if namespace_id else None
    node = StorageNode.objects.filter(pk=node_id).first() if node_id else None
    if namespace is None and node is None:
        return None  # the target was deleted; its schedule goes with it
    run = services.schedule_run(
        kind, namespace=namespace, node=node, schedule=schedules.schedule_name(kind, namespace=namespace, node=node)
    )
    return run.pk if run else None


@shared_task(ignore_result=True)
def reap_stale_runs() -> dict[str, int]:
    """Resume (or fail) runs whose worker died; their leases have expired."""
    return services.reap_stale_runs()


@shared_task(name=enqueue.DUE_SWEEP, ignore_result=True)
def due_sweep(kind: str, node_id: int, token: str) -> int | None:
    """A deadline-driven sweep (``services.schedule_sweep_at``): runs unless superseded."""
    return services.run_due_sweep(kind, node_id, token)


@shared_task(ignore_result=True)
def poll_due_sweeps(node_id: int) -> None:
    """Started by the tick every ``schedules.DUE_POLL_S``: new deadlines earlier than any pending sweep get one."""
    node = StorageNode.objects.filter(pk=node_id).first()
    if node is None or not schedules.deadlines_enabled():
        return
    with contextlib.suppress(StorageError):  # the node is down: the next poll asks again
        services.schedule_due_sweeps(node)
