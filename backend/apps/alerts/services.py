"""Writes of alerts: built-in rules, rule and channel changes (audited), evaluation, acknowledgement,
silences, notification deliveries (email, signed webhooks) with retries, and channel test messages.

Every function that depends on time takes ``now`` (else :func:`clock.now`).

How alerts close (as in Prometheus and Alertmanager):

- a *pending* alert whose condition clears before the rule's ``for`` duration never was an alert: it is
  deleted, never notified, and never shows in the history as resolved;
- a *firing* alert resolves when its condition clears, its series stops reporting, or its rule is disabled
  or deleted; its channels get the "resolved" notification (unless it is silenced), so whatever it opened
  downstream closes too — Alertmanager likewise resolves an alert its rule stopped sending;
- a deleted rule's alerts stay (``Alert.rule`` becomes null; the alert keeps the rule's name, metric and
  severity).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

import httpx
from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import F

from backend.apps.alerts.models import (
    OPEN_STATES,
    Alert,
    AlertEvent,
    AlertRule,
    AlertState,
    Channel,
    ChannelKind,
    DefaultRuleMarker,
    DeliveryStatus,
    EventKind,
    Notification,
)
from backend.apps.alerts.rules import COMPARE, DEFAULT_RULES
from backend.apps.alerts.selectors import PolicyCache, labels_key, observations
from backend.apps.audit import services as audit
from backend.apps.core.outgoing import OutgoingURLRefused, check_outgoing_url
from backend.apps.metrics import clock
from backend.apps.metrics.catalog import SERIES
from storage_engine.errors import InvalidArgumentError

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-LCS-Signature"
MAX_ATTEMPTS = 6
BACKOFF_BASE_S = 30
BACKOFF_MAX_S = 3_600
SEND_LEASE_S = 300  # a delivery claimed longer ago than this (a dead worker) is retried
WEBHOOK_TIMEOUT_S = 5.0
RETRY_SWEEP_GRACE_S = 60
RULE_FIELDS = (
    "name",
    "metric",
    "scope_type",
    "scope",
    "comparator",
    "threshold",
    "threshold_policy",
    "for_s",
    "severity",
    "enabled",
    "description",
)


# -- built-in rules ------------------------------------------------------------------------------


def ensure_default_rules(**_: Any) -> int:
    """Idempotent (runs after every migrate): create each built-in rule once. A rule seeded before is never
    touched again: one an operator disabled stays disabled, one an admin deleted stays deleted."""
    created = 0
    for rule in DEFAULT_RULES:
        with transaction.atomic():
            _, new = DefaultRuleMarker.objects.get_or_create(key=rule.key)
            if not new:
                continue
            name = rule.name
            if AlertRule.objects.filter(name=name).exists():  # an admin's rule took the name first
                name = f"{name} (built-in)"
            AlertRule.objects.create(
                name=name,
                metric=rule.metric,
                comparator=rule.comparator,
                threshold=rule.threshold,
                threshold_policy=rule.threshold_policy,
                for_s=rule.for_s,
                severity=rule.severity,
                description=rule.description,
                default_key=rule.key,
            )
            created += 1
    # The built-in backlog quota rule once watched every subscription's bytes summed; the quota limits the
    # largest subscription's (an admin's own metric choice is left alone).
    AlertRule.objects.filter(default_key="backlog_bytes", metric="backlog_bytes").update(
        metric="subscription_backlog_bytes_max"
    )
    return created


# -- rules and channels --------------------------------------------------------------------------


def rule_snapshot(rule: AlertRule) -> dict[str, Any]:
    out = {name: getattr(rule, name) for name in RULE_FIELDS}
    out["channels"] = sorted(c.name for c in rule.channels.all()) if rule.pk else []
    return out


@transaction.atomic
def create_rule(*, actor: Any, channels: list[Channel] | None = None, **fields: Any) -> AlertRule:
    rule = AlertRule.objects.create(**fields)
    rule.channels.set(channels or [])
    audit.record(
        actor=actor, action="alert_rule.create", target_type="alert_rule", target=rule.name, after=rule_snapshot(rule)
    )
    return rule


def _closed_detail(closed: dict[str, int]) -> str:
    return f"open alerts closed: {closed['resolved']} resolved, {closed['cleared']} pending dropped"


@transaction.atomic
def update_rule(
    *,
    actor: Any,
    rule: AlertRule,
    channels: list[Channel] | None = None,
    now: datetime | None = None,
    **changes: Any,
) -> AlertRule:
    """An admin's edit. Open alerts follow the rule's new name, metric and severity; disabling it closes
    them (see the module docstring)."""
    before = rule_snapshot(rule)
    was_enabled = rule.enabled
    for name, value in changes.items():
        setattr(rule, name, value)
    rule.save()
    if channels is not None:
        rule.channels.set(channels)
    rule.alerts.filter(state__in=OPEN_STATES).update(rule_name=rule.name, metric=rule.metric, severity=rule.severity)
    detail = ""
    if was_enabled and not rule.enabled:
        detail = _closed_detail(close_rule_alerts(rule, now or clock.now(), "rule disabled", actor=actor))
    audit.record(
        actor=actor,
        action="alert_rule.update",
        target_type="alert_rule",
        target=rule.name,
        before=before,
        after=rule_snapshot(rule),
        detail=detail,
    )
    return rule


@transaction.atomic
def set_rule_enabled(*, actor: Any, rule: AlertRule, enabled: bool, now: datetime | None = None) -> AlertRule:
    """An operator turns a rule (a built-in one too) off or on again, audited. Off: the rule is not
    evaluated and its open alerts close at once (firing ones resolve and notify, pending ones are dropped).
    On: it is evaluated from the next minute, its ``for`` duration counting from then. Setting the state it
    already has changes nothing and records nothing."""
    rule = AlertRule.objects.select_for_update().get(pk=rule.pk)
    if rule.enabled == enabled:
        return rule
    rule.enabled = enabled
    rule.save(update_fields=["enabled", "updated_at"])
    detail = "" if enabled else _closed_detail(close_rule_alerts(rule, now or clock.now(), "rule disabled", actor))
    audit.record(
        actor=actor,
        action="alert_rule.enable" if enabled else "alert_rule.disable",
        target_type="alert_rule",
        target=rule.name,
        before={"enabled": not enabled},
        after={"enabled": enabled},
        detail=detail,
    )
    return rule


@transaction.atomic
def delete_rule(*, actor: Any, rule: AlertRule, now: datetime | None = None) -> None:
    """Delete a rule, keeping its alerts' history: its open alerts close first (firing ones resolve and
    notify the rule's channels, pending ones are dropped), then every alert of it stays with ``rule`` null."""
    closed = close_rule_alerts(rule, now or clock.now(), "rule deleted", actor)
    audit.record(
        actor=actor,
        action="alert_rule.delete",
        target_type="alert_rule",
        target=rule.name,
        before=rule_snapshot(rule),
        detail=_closed_detail(closed),
    )
    rule.delete()


def channel_snapshot(channel: Channel) -> dict[str, Any]:
    return {
        "name": channel.name,
        "kind": channel.kind,
        "target": channel.target,
        "enabled": channel.enabled,
        "secret": "***" if channel.secret else "",
    }


def create_channel(*, actor: Any, **fields: Any) -> Channel:
    channel = Channel.objects.create(**fields)
    audit.record(
        actor=actor,
        action="alert_channel.create",
        target_type="alert_channel",
        target=channel.name,
        after=channel_snapshot(channel),
    )
    return channel


def update_channel(*, actor: Any, channel: Channel, **changes: Any) -> Channel:
    before = channel_snapshot(channel)
    for name, value in changes.items():
        setattr(channel, name, value)
    channel.save()
    audit.record(
        actor=actor,
        action="alert_channel.update",
        target_type="alert_channel",
        target=channel.name,
        before=before,
        after=channel_snapshot(channel),
    )
    return channel


def delete_channel(*, actor: Any, channel: Channel) -> None:
    audit.record(
        actor=actor,
        action="alert_channel.delete",
        target_type="alert_channel",
        target=channel.name,
        before=channel_snapshot(channel),
    )
    channel.delete()


# -- evaluation ----------------------------------------------------------------------------------


def _fmt(value: float | None, unit: str = "") -> str:
    """A figure as an operator reads it: ratios in percent, bytes in binary units, the rest as is."""
    if value is None:
        return "n/a"
    if unit == "ratio":
        return f"{value * 100:.1f}%"
    if unit == "bytes":
        size = float(value)
        for suffix in ("B", "KiB", "MiB", "GiB", "TiB"):
            if abs(size) < 1024 or suffix == "TiB":
                return f"{size:.0f} {suffix}" if suffix == "B" else f"{size:.1f} {suffix}"
            size /= 1024
    if unit == "seconds":
        return f"{value:.3g} s"
    return f"{value:.6g}"


def _summary(rule: AlertRule, key: str, value: float, threshold: float | None) -> str:
    where = key or "cluster"
    series = SERIES.get(rule.metric)
    unit = series.unit if series is not None else ""
    text = f"{rule.name}: {rule.metric} {_fmt(value, unit)} {rule.comparator} {_fmt(threshold, unit)} ({where})"
    return text[:500]


def _event(alert: Alert, kind: str, at: datetime, value: float | None = None, actor: Any = None, detail: str = ""):
    user = actor if getattr(actor, "is_authenticated", False) else None
    return AlertEvent.objects.create(alert=alert, kind=kind, at=at, value=value, actor=user, detail=detail[:500])


def _silenced(alert: Alert, now: datetime) -> bool:
    return alert.silenced_until is not None and alert.silenced_until > now


def _fire(alert: Alert, now: datetime) -> None:
    alert.state, alert.fired_at = AlertState.FIRING, now
    alert.save(update_fields=["state", "fired_at", "value", "threshold", "summary", "updated_at"])
    silenced = _silenced(alert, now)
    event = _event(alert, EventKind.FIRING, now, alert.value, detail="silenced: not notified" if silenced else "")
    if not silenced:
        notify(alert, event, now)


def _resolve(alert: Alert, now: datetime, value: float | None, why: str, actor: Any = None) -> None:
    """A firing alert resolves (and notifies, unless silenced)."""
    alert.state, alert.resolved_at = AlertState.RESOLVED, now
    if value is not None:
        alert.value = value
    alert.save(update_fields=["state", "resolved_at", "value", "updated_at"])
    event = _event(alert, EventKind.RESOLVED, now, value, actor=actor, detail=why)
    if not _silenced(alert, now):
        notify(alert, event, now)


def _close(alert: Alert, now: datetime, why: str, value: float | None = None, actor: Any = None) -> str:
    """An open alert stops: a firing one resolves (``"resolved"``); a pending one never fired, so it never
    was an alert (Prometheus drops a pending alert that clears) and is deleted (``"cleared"``)."""
    if alert.state == AlertState.PENDING:
        alert.delete()
        return "cleared"
    _resolve(alert, now, value, why, actor)
    return "resolved"


def close_rule_alerts(rule: AlertRule, now: datetime, why: str, actor: Any = None) -> dict[str, int]:
    """Close every open alert of ``rule`` (disabled or deleted)."""
    closed = {"resolved": 0, "cleared": 0}
    for alert in rule.alerts.select_for_update().filter(state__in=OPEN_STATES).order_by("pk"):
        alert.rule = rule
        closed[_close(alert, now, why, actor=actor)] += 1
    return closed


def evaluate_rule(
    rule: AlertRule, now: datetime, policies: PolicyCache, open_alerts: dict[str, Alert]
) -> dict[str, int]:
    """One rule: open, fire, keep or resolve its alerts (one open alert per label set)."""
    counts = {"pending": 0, "firing": 0, "resolved": 0, "cleared": 0}
    now_ms = clock.to_ms(now)
    seen: dict[str, float] = {}
    holding: set[str] = set()
    observed = observations(rule, now_ms, policies) if rule.enabled else []
    compare = COMPARE[rule.comparator]
    for obs in observed:
        key = labels_key(obs.labels)
        seen[key] = obs.value
        if obs.threshold is None or not compare(obs.value, obs.threshold):
            continue
        holding.add(key)
        summary = _summary(rule, key, obs.value, obs.threshold)
        alert = open_alerts.get(key)
        if alert is None:
            try:
                with transaction.atomic():
                    alert = Alert.objects.create(
                        rule=rule,
                        rule_name=rule.name,
                        metric=rule.metric,
                        severity=rule.severity,
                        labels_key=key,
                        labels=obs.labels,
                        state=AlertState.PENDING,
                        value=obs.value,
                        threshold=obs.threshold,
                        summary=summary,
                        started_at=now,
                    )
            except IntegrityError:  # a concurrent evaluation opened it first
                continue
            _event(alert, EventKind.PENDING, now, obs.value)
            counts["pending"] += 1
        else:
            alert.value, alert.threshold, alert.summary = obs.value, obs.threshold, summary
        if alert.state == AlertState.PENDING and (now - alert.started_at).total_seconds() >= rule.for_s:
            _fire(alert, now)
            counts["firing"] += 1
        else:
            alert.save(update_fields=["value", "threshold", "summary", "updated_at"])
    for key, alert in open_alerts.items():
        if key not in holding:
            why = "rule disabled" if not rule.enabled else ("condition cleared" if key in seen else "no data")
            counts[_close(alert, now, why, seen.get(key))] += 1
    return counts


def evaluate(now: datetime | None = None) -> dict[str, int]:
    """Evaluate every enabled rule once (the minute task). Open alerts of disabled rules, and of rules deleted
    without :func:`delete_rule` (the Django admin, the ORM), are closed."""
    now = now or clock.now()
    policies = PolicyCache()
    by_rule: dict[int | None, dict[str, Alert]] = {}
    for alert in Alert.objects.filter(state__in=OPEN_STATES):
        by_rule.setdefault(alert.rule_id, {})[alert.labels_key] = alert
    totals = {"rules": 0, "pending": 0, "firing": 0, "resolved": 0, "cleared": 0}
    with transaction.atomic():
        for alert in by_rule.pop(None, {}).values():
            totals[_close(alert, now, "rule deleted")] += 1
    for rule in AlertRule.objects.order_by("pk"):
        open_alerts = by_rule.get(rule.pk, {})
        if not rule.enabled and not open_alerts:
            continue
        with transaction.atomic():
            counts = evaluate_rule(rule, now, policies, open_alerts)
        totals["rules"] += 1
        for name, value in counts.items():
            totals[name] += value
    totals["retried"] = retry_due(now)
    return totals


# -- operator actions ----------------------------------------------------------------------------


def acknowledge(*, alert: Alert, actor: Any, now: datetime | None = None) -> Alert:
    now = now or clock.now()
    if alert.state == AlertState.RESOLVED:
        raise InvalidArgumentError("state", "the alert is resolved; only pending or firing alerts can be acknowledged")
    before = {"acknowledged_by": alert.acknowledged_by.get_username() if alert.acknowledged_by else None}
    alert.acknowledged_by, alert.acknowledged_at = actor, now
    alert.save(update_fields=["acknowledged_by", "acknowledged_at", "updated_at"])
    _event(alert, EventKind.ACKNOWLEDGED, now, actor=actor)
    audit.record(
        actor=actor,
        action="alert.ack",
        target_type="alert",
        target=str(alert.pk),
        before=before,
        after={"acknowledged_by": actor.get_username()},
    )
    return alert


def silence(*, alert: Alert, actor: Any, minutes: int, now: datetime | None = None) -> Alert:
    """No notifications for this alert until ``now + minutes`` (0 lifts the silence)."""
    now = now or clock.now()
    if alert.state == AlertState.RESOLVED:
        raise InvalidArgumentError("state", "the alert is resolved; only pending or firing alerts can be silenced")
    before = {"silenced_until": alert.silenced_until.isoformat() if alert.silenced_until else None}
    alert.silenced_until = now + timedelta(minutes=minutes) if minutes else None
    alert.save(update_fields=["silenced_until", "updated_at"])
    detail = f"for {minutes} min" if minutes else "silence lifted"
    _event(alert, EventKind.SILENCED, now, actor=actor, detail=detail)
    audit.record(
        actor=actor,
        action="alert.silence",
        target_type="alert",
        target=str(alert.pk),
        before=before,
        after={"silenced_until": alert.silenced_until.isoformat() if alert.silenced_until else None},
    )
    return alert


# -- notifications -------------------------------------------------------------------------------


def enqueue(notification_id: int, countdown: float = 0) -> None:
    """Queue one delivery attempt (a Celery task); a broker failure leaves it to the retry sweep."""
    from backend.apps.alerts.tasks import deliver_notification

    try:
        deliver_notification.apply_async((notification_id,), countdown=countdown)
    except Exception as exc:
        log.warning("alerts: could not queue delivery %s: %s", notification_id, exc)


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


def payload(notification: Notification) -> dict[str, Any]:
    """The body of a delivery; the rule's fields are the alert's copy (the rule may be deleted by now)."""
    alert = notification.alert
    stamp = _stamp
    return {
        "delivery": notification.pk,
        "event": notification.event.kind,
        "at": stamp(notification.event.at),
        "alert": {
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
            "started_at": stamp(alert.started_at),
            "fired_at": stamp(alert.fired_at),
            "resolved_at": stamp(alert.resolved_at),
        },
    }


class DeliveryError(Exception):
    """A delivery failed for a reason worded here, safe to show to every viewer."""


def delivery_error(exc: Exception) -> str:
    """What viewers see of a failed delivery: our own words, the status, or the error's class; never the
    text a receiver (or a mail server) answered, nor the channel's target."""
    if isinstance(exc, DeliveryError):
        return str(exc)
    if isinstance(exc, OutgoingURLRefused):
        return f"refused by OUTGOING_URL_ALLOW: {exc}"
    return type(exc).__name__


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _transmit(channel: Channel, data: dict[str, Any], subject: str, intro: str = "") -> None:
    """Send ``data`` (a :func:`payload`-shaped body) through the channel: an email to its addresses, or a
    signed POST to its webhook URL (checked against OUTGOING_URL_ALLOW each time). Raises on failure."""
    if channel.kind == ChannelKind.EMAIL:
        lines = [f"{k}: {v}" for k, v in data["alert"].items()]
        text = (f"{intro}\n\n" if intro else "") + "\n".join(lines) + "\n"
        recipients = [a.strip() for a in channel.target.split(",") if a.strip()]
        send_mail(subject[:200], text, settings.DEFAULT_FROM_EMAIL, recipients, fail_silently=False)
        return
    body = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: sign(channel.secret, body),
        "X-LCS-Event": str(data["event"]),
        "X-LCS-Delivery": str(data["delivery"]),
    }
    check_outgoing_url(channel.target)  # again at each delivery: the name may resolve elsewhere by now
    answer = httpx.post(
        channel.target, content=body, headers=headers, timeout=WEBHOOK_TIMEOUT_S, follow_redirects=False
    )
    if not 200 <= answer.status_code < 300:
        raise DeliveryError(f"webhook answered HTTP {answer.status_code}")


def _send(notification: Notification) -> None:
    data = payload(notification)
    alert = data["alert"]
    _transmit(
        notification.channel, data, f"[{alert['severity']}] {notification.event.kind.upper()}: {alert['summary']}"
    )


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
        _transmit(channel, data, f"[TEST] Test notification for channel {channel.name}", intro=TEST_MESSAGE)
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
    skip = skip or ("alert silenced" if _silenced(notification.alert, now) else "")
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
