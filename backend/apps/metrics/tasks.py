import logging
from dataclasses import asdict
from typing import Any

from celery import shared_task

from backend.apps.catalog.tasks import sync_catalog
from backend.apps.metrics import services

log = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def collect_metrics() -> dict[str, Any]:
    """Scheduled every ``METRICS_INTERVAL_S``: sample every node, the scans and the broker queues. When a
    shard's data changed, the segment catalog sync runs at once (changed shards first), so the Segments
    page follows within the same interval; its own schedule is the safety net."""
    result = services.collect()
    if result.shards_changed:
        try:
            sync_catalog.delay()
        except Exception as exc:  # a broker hiccup: the scheduled sync comes anyway
            log.warning("metrics: could not queue the catalog sync: %s", exc)
    return asdict(result)


@shared_task(ignore_result=True)
def downsample_metrics() -> dict[str, Any]:
    """Scheduled every 5 minutes: roll raw samples into 5-minute buckets, expire old rows (bounded)."""
    return asdict(services.downsample())
