"""Notifications of alerts: one delivery per event and enabled channel of the rule, queued as a Celery task,
retried with backoff (bounded attempts), re-queued by a sweep when lost; and channel test messages.

Every function that depends on time takes ``now`` (else :func:`clock.now`).
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F

from backend.apps.alerts import enqueue as enqueue_task
from backend.apps.alerts.models import Alert, AlertEvent, AlertState, Channel, ChannelKind, DeliveryStatus, Notification
from backend.apps.alerts.selectors import is_silenced
from backend.apps.alerts.transports import alertmanager_alert, delivery_error, post_alertmanager, transmit
from backend.apps.audit import services as audit
from backend.apps.metrics import clock

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
BACKOFF_BASE_S = 30
BACKOFF_MAX_S = 3_600
SEND_LEASE_S = 300  # a delivery claimed longer ago than this (a dead worker) is retried
RETRY_SWEEP_GRACE_S = 60


def enqueue(notification_id: int, countdown: float = 0) -> None:
    """Queue one delivery attempt (a Celery task); a broker failure leaves it to the retry sweep."""
    enqueue_task.deliver_notification(notification_id, countdown=countdown)


def notify(alert: Alert, event: AlertEvent, now: datetime) -> list[Notification]:
    """One delivery per enabled channel of the rule, queued when the transaction commits (none once the rule
    is deleted: its channels went with it)."""
    channels = alert.rule.channels.filter(enabled=True) if alert.rule is not None else Channel.objects.none()
    created = [
        Notification.objects.create(channel=channel, alert=alert, event=event, next_attempt_at=now)
        for channel in channels
    ]
    for notification in created:
        transaction.on_commit(lambda pk=notification.pk: enqueue(pk))
    return created


def backoff_s(attempts: int) -> int:
    """Seconds before attempt ``attempts + 1``: 30 s, 1 min, 2 min, … capped at 1 h."""
    return int(min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** max(0, attempts - 1)))


def _stamp(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


def alert_body(alert: Alert) -> dict[str, Any]:
    """An alert as deliveries carry it; the rule's fields are the alert's copy (the rule may be deleted by now)."""
    stamp = _stamp
    return {
        "id": alert.pk,
        "rule": alert.rule_id,
        "rule_name": alert.rule_name,
        "metric": alert.metric,
        "severity": alert.severity,
        "state": alert.state,
        "labels": alert.labels,
        "value": alert.value,
        "threshold": alert.threshold,
        "summary": alert.summary,
        "description": alert.rule.description if alert.rule is not None else "",
        "started_at": stamp(alert.started_at),
        "fired_at": stamp(alert.fired_at),
        "resolved_at": stamp(alert.resolved_at),
    }


def payload(notification: Notification) -> dict[str, Any]:
    """The body of a delivery: the event and the alert as it is now."""
    return {
        "delivery": notification.pk,
        "event": notification.event.kind,
        "at": _stamp(notification.event.at),
        "alert": alert_body(notification.alert),
    }


def _send(notification: Notification) -> None:
    data = payload(notification)
    alert = data["alert"]
    transmit(notification.channel, data, f"[{alert['severity']}] {notification.event.kind.upper()}: {alert['summary']}")


TEST_EVENT = "test"
TEST_MESSAGE = "This is a test notification sent from the console to check this channel; no alert is firing."


def channel_test_payload(channel: Channel, actor: Any, now: datetime) -> dict[str, Any]:
    """A test message shaped like a real delivery (so a receiver's parsing is tested too), marked as a test:
    ``"test": true``, event ``test`` (also in ``X-LCS-Event``), state ``test``, ``[TEST]`` in the summary."""
    who = actor.get_username() if getattr(actor, "is_authenticated", False) else ""
    return {
        "test": True,
        "delivery": f"test-{uuid.uuid4().hex}",
        "event": TEST_EVENT,
        "at": _stamp(now),
        "message": TEST_MESSAGE,
        "sent_by": who,
        "alert": {
            "id": None,
            "rule": None,
            "rule_name": "Test notification",
            "metric": "",
            "severity": "info",
            "state": TEST_EVENT,
            "labels": {"channel": channel.name},
            "value": None,
            "threshold": None,
            "summary": f"[TEST] Test notification for channel {channel.name}"[:500],
            "description": TEST_MESSAGE,
            "started_at": _stamp(now),
            "fired_at": None,
            "resolved_at": None,
        },
    }


def send_channel_test(*, channel: Channel, actor: Any, now: datetime | None = None) -> dict[str, Any]:
    """Send a test message through the channel's real delivery path at once (a disabled channel too: an
    operator checks it before turning it on), audited. Answers ``delivered`` and ``error``, worded by
    :func:`delivery_error` like a real delivery's: never the receiver's answer nor the channel's target."""
    now = now or clock.now()
    data = channel_test_payload(channel, actor, now)
    try:
        transmit(channel, data, f"[TEST] Test notification for channel {channel.name}", intro=TEST_MESSAGE)
    except Exception as exc:
        log.info("alerts: test message to channel %s failed: %r", channel.name, exc)
        delivered, error = False, delivery_error(exc)[:2000]
    else:
        delivered, error = True, ""
    audit.record(
        actor=actor,
        action="alert_channel.test",
        target_type="alert_channel",
        target=channel.name,
        after={"delivered": delivered, "error": error},
        result="ok" if delivered else "failed",
        detail=error,
    )
    return {"delivered": delivered, "error": error}


def deliver(notification_id: int, now: datetime | None = None) -> int | None:
    """One attempt; returns the seconds until the next attempt when it should be retried, else ``None``."""
    now = now or clock.now()
    claimed = Notification.objects.filter(
        pk=notification_id,
        status__in=[DeliveryStatus.PENDING, DeliveryStatus.RETRYING],
        next_attempt_at__lte=now,
    ).update(
        status=DeliveryStatus.SENDING, attempts=F("attempts") + 1, next_attempt_at=now + timedelta(seconds=SEND_LEASE_S)
    )
    if not claimed:  # delivered, given up, not due yet, or another worker has it
        return None
    notification = Notification.objects.select_related("channel", "alert__rule", "event").get(pk=notification_id)
    skip = "channel disabled" if not notification.channel.enabled else ""
    skip = skip or ("alert silenced" if is_silenced(notification.alert, now) else "")
    if skip:
        Notification.objects.filter(pk=notification_id).update(status=DeliveryStatus.SKIPPED, last_error=skip)
        return None
    try:
        _send(notification)
    except Exception as exc:
        log.info("alerts: delivery %s to channel %s failed: %r", notification_id, notification.channel.name, exc)
        error = delivery_error(exc)[:2000]
        if notification.attempts >= MAX_ATTEMPTS:
            Notification.objects.filter(pk=notification_id).update(status=DeliveryStatus.FAILED, last_error=error)
            log.warning("alerts: delivery %s failed for good: %s", notification_id, error)
            return None
        wait = backoff_s(notification.attempts)
        Notification.objects.filter(pk=notification_id).update(
            status=DeliveryStatus.RETRYING, last_error=error, next_attempt_at=now + timedelta(seconds=wait)
        )
        return wait
    Notification.objects.filter(pk=notification_id).update(status=DeliveryStatus.SENT, sent_at=now, last_error="")
    return None


def retry_due(now: datetime | None = None, limit: int = 100) -> int:
    """Re-queue deliveries overdue by a minute (a lost message) or whose worker died mid-send."""
    now = now or clock.now()
    Notification.objects.filter(status=DeliveryStatus.SENDING, next_attempt_at__lte=now).update(
        status=DeliveryStatus.RETRYING
    )
    due = list(
        Notification.objects.filter(
            status__in=[DeliveryStatus.PENDING, DeliveryStatus.RETRYING],
            next_attempt_at__lte=now - timedelta(seconds=RETRY_SWEEP_GRACE_S),
        ).values_list("pk", flat=True)[:limit]
    )
    for pk in due:
        transaction.on_commit(lambda pk=pk: enqueue(pk))
    return len(due)


# -- Alertmanager: firing alerts sent again at each evaluation ------------------------------------------------
# Alertmanager resolves an alert it has not heard of for its resolve_timeout (5 min by default) unless the
# alert says when it ends; as Prometheus does, the console sends every firing alert again at each evaluation
# (every minute), so an alert that fires for hours stays active there, and ends it with ``endsAt`` on resolve.


def resend_firing(now: datetime | None = None) -> int:
    """Queue, per enabled Alertmanager channel with firing alerts, one POST of them all; returns how many."""
    channels = list(
        Channel.objects.filter(kind=ChannelKind.ALERTMANAGER, enabled=True, rules__alerts__state=AlertState.FIRING)
        .values_list("pk", flat=True)
        .distinct()
    )
    for pk in channels:
        transaction.on_commit(lambda pk=pk: _enqueue_resend(pk))
    return len(channels)


def _enqueue_resend(channel_id: int) -> None:
    enqueue_task.resend_to_alertmanager(channel_id)


def resend_to_alertmanager(channel_id: int, now: datetime | None = None) -> int:
    """POST the channel's firing, unsilenced alerts to its Alertmanager once (a failure waits for the next
    evaluation: the first notification of each alert has its own retries). Returns how many were sent."""
    now = now or clock.now()
    channel = Channel.objects.filter(pk=channel_id, enabled=True, kind=ChannelKind.ALERTMANAGER).first()
    if channel is None:
        return 0
    alerts = (
        Alert.objects.filter(state=AlertState.FIRING, rule__channels=channel)
        .exclude(silenced_until__gt=now)
        .select_related("rule")
        .order_by("pk")
    )
    bodies = [alertmanager_alert(alert_body(alert)) for alert in alerts]
    if bodies:
        try:
            post_alertmanager(channel, bodies)
        except Exception as exc:
            log.info("alerts: Alertmanager refresh of channel %s failed: %s", channel.name, delivery_error(exc))
            return 0
    return len(bodies)
