from celery import shared_task

from backend.apps.namespaces import services


@shared_task(ignore_result=True)
def push_pending_namespaces() -> int:
    """Retry pushing namespaces the node did not take yet (bounded batch)."""
    return services.push_pending_namespaces(limit=100)
