from dataclasses import asdict

from celery import shared_task

from backend.apps.catalog import services


@shared_task(ignore_result=True, soft_time_limit=120, time_limit=180)
def sync_catalog() -> dict[str, int]:
    """Keep the segment catalog in step with the nodes, a bounded batch per run."""
    return asdict(services.sync_stalest(limit=50))
