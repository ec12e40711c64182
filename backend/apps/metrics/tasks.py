from dataclasses import asdict
from typing import Any

from celery import shared_task

from backend.apps.metrics import services


@shared_task(ignore_result=True)
def collect_metrics() -> dict[str, Any]:
    """Scheduled every ``METRICS_INTERVAL_S``: sample every node, the scans and the broker queues."""
    return asdict(services.collect())


@shared_task(ignore_result=True)
def downsample_metrics() -> dict[str, Any]:
    """Scheduled every 5 minutes: roll raw samples into 5-minute buckets, expire old rows (bounded)."""
    return asdict(services.downsample())
