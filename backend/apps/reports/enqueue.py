"""The reports task the services queue, by name (:mod:`backend.apps.core.queueing` says why: no services ↔
tasks circle). :mod:`backend.apps.reports.tasks` registers ``spark_job`` under this name."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from backend.apps.core.queueing import queue_task

SPARK_JOB = "backend.apps.reports.tasks.spark_job"


def spark_job(run_id: int) -> None:
    """The run's Spark job on the default queue (any worker: the job reads every node), after the commit."""
    transaction.on_commit(lambda: queue_task(SPARK_JOB, (run_id,), queue=settings.CELERY_TASK_DEFAULT_QUEUE))
