"""Thin Celery tasks over :mod:`backend.apps.reports.services`: they take ids or job names.

``spark_job`` runs a whole Spark job (minutes, not a bounded step): its Celery time limits sit above the
job's own hard limit (``SPARK_JOB_TIME_LIMIT_S``), which the service enforces by killing the job.
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from backend.apps.reports import enqueue, services

BUSY_RETRY_S = 30
_LIMIT = settings.SPARK_JOB_TIME_LIMIT_S


@shared_task(
    name=enqueue.SPARK_JOB,
    bind=True,
    acks_late=True,
    soft_time_limit=_LIMIT + 60,
    time_limit=_LIMIT + 120,
    ignore_result=True,
)
def spark_job(self, run_id: int) -> str:
    outcome = services.run_spark_job(run_id)
    if outcome is services.JobOutcome.BUSY:
        self.apply_async((run_id,), countdown=BUSY_RETRY_S, queue=self.request.delivery_info.get("routing_key"))
    return outcome.value


@shared_task(ignore_result=True)
def scheduled_lake_export() -> int | None:
    """Started by beat at ``SPARK_LAKE_EXPORT_CRON`` (daily, off-peak)."""
    run = services.schedule_spark_job("lake-export", schedule="platform: spark lake-export")
    return run.pk if run else None


@shared_task(ignore_result=True)
def scheduled_lifecycle_report() -> int | None:
    """Started by beat at ``SPARK_LIFECYCLE_REPORT_CRON`` (daily, after the export)."""
    run = services.schedule_spark_job("lifecycle-report", schedule="platform: spark lifecycle-report")
    return run.pk if run else None
