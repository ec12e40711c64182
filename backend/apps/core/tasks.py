from celery import shared_task

from backend.apps.core.services import BEAT_HEARTBEAT, record_heartbeat


@shared_task(ignore_result=True)
def beat_heartbeat() -> None:
    """Scheduled by beat; proves beat and a worker both run."""
    record_heartbeat(BEAT_HEARTBEAT)
