from typing import Any

from celery import shared_task

from backend.apps.alerts import delivery, enqueue, evaluation


@shared_task(ignore_result=True)
def evaluate_alerts() -> dict[str, Any]:
    """Scheduled every minute: evaluate every rule, then re-queue overdue deliveries."""
    return evaluation.evaluate()


@shared_task(name=enqueue.DELIVER_NOTIFICATION, ignore_result=True)
def deliver_notification(notification_id: int) -> None:
    """One delivery attempt; on failure it queues itself again after the backoff (bounded attempts)."""
    wait = delivery.deliver(notification_id)
    if wait is not None:
        delivery.enqueue(notification_id, countdown=wait)


@shared_task(name=enqueue.RESEND_TO_ALERTMANAGER, ignore_result=True)
def resend_to_alertmanager(channel_id: int) -> None:
    """Each evaluation: the channel's firing alerts to its Alertmanager again, so they stay active there."""
    delivery.resend_to_alertmanager(channel_id)
