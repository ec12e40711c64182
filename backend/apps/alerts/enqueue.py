"""The alert tasks the delivery module queues, by name (:mod:`backend.apps.core.queueing` says why: no
delivery ↔ tasks circle). :mod:`backend.apps.alerts.tasks` registers its tasks under these names.

A broker that cannot be reached is logged, not raised: the retry sweep (deliveries) or the next evaluation
(Alertmanager refreshes) queues the work again.
"""

from __future__ import annotations

import logging

from backend.apps.core.queueing import queue_task

log = logging.getLogger("backend.apps.alerts.delivery")  # the delivery log these lines always went to

DELIVER_NOTIFICATION = "backend.apps.alerts.tasks.deliver_notification"
RESEND_TO_ALERTMANAGER = "backend.apps.alerts.tasks.resend_to_alertmanager"


def deliver_notification(notification_id: int, countdown: float = 0) -> None:
    """Queue one delivery attempt; a broker failure leaves it to the retry sweep."""
    try:
        queue_task(DELIVER_NOTIFICATION, (notification_id,), countdown=countdown)
    except Exception as exc:
        log.warning("alerts: could not queue delivery %s: %s", notification_id, exc)


def resend_to_alertmanager(channel_id: int) -> None:
    """Queue the refresh of one Alertmanager channel; a broker failure waits for the next evaluation."""
    try:
        queue_task(RESEND_TO_ALERTMANAGER, (channel_id,))
    except Exception as exc:
        log.warning("alerts: could not queue the Alertmanager refresh of channel %s: %s", channel_id, exc)
