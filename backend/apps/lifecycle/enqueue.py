"""The lifecycle tasks the services queue, by name (:mod:`backend.apps.core.queueing` says why: no
services ↔ tasks circle). :mod:`backend.apps.lifecycle.tasks` registers its tasks under these names.

Each queues after the transaction commits and on the queue the caller names — the node's queue
(``<CELERY_QUEUE>.<node>``, ``nodes.selectors.queue_for``), so a step runs on a worker near its node.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from backend.apps.core.queueing import queue_task

LIFECYCLE_STEP = "backend.apps.lifecycle.tasks.lifecycle_step"
DUE_SWEEP = "backend.apps.lifecycle.tasks.due_sweep"


def lifecycle_step(run_id: int, *, queue: str, countdown: float = 0) -> None:
    """The run's next step on ``queue`` (the node of that step), ``countdown`` seconds after the commit."""
    transaction.on_commit(lambda: queue_task(LIFECYCLE_STEP, (run_id,), queue=queue, countdown=countdown))


def due_sweep(kind: str, node_id: int, token: str, *, eta: datetime, queue: str) -> None:
    """A deadline-driven sweep of ``kind`` on the node, at ``eta``, on the node's ``queue``."""
    transaction.on_commit(lambda: queue_task(DUE_SWEEP, (kind, node_id, token), eta=eta, queue=queue))
