from dataclasses import asdict

from celery import shared_task
from django.core.cache import cache

from backend.apps.catalog import services

SYNC_LOCK = "catalog:sync-stalest"
SYNC_LOCK_S = 180  # longer than the task's time limit: a killed run cannot hold it for good


@shared_task(ignore_result=True, soft_time_limit=120, time_limit=180)
def sync_catalog() -> dict[str, int]:
    """Keep the segment catalog in step with the nodes, a bounded batch per run (every metrics interval).

    A run still going when the next is due makes the next one skip, so two never sync the same shards.
    """
    try:
        locked = cache.add(SYNC_LOCK, 1, SYNC_LOCK_S)
    except Exception:  # no cache: run unguarded (an overlap at worst fails one run; the next catches up)
        return asdict(services.sync_stalest(limit=50))
    if not locked:
        return {"skipped": 1}
    try:
        return asdict(services.sync_stalest(limit=50))
    finally:
        cache.delete(SYNC_LOCK)
