"""Writes of alerts an operator or admin makes: the built-in rules, rule and channel changes (audited),
acknowledgement and silences. Evaluation (pending, firing, resolved) is :mod:`evaluation`; notifications
and their retries are :mod:`delivery`, over the channels' transports (:mod:`transports`).

Every function that depends on time takes ``now`` (else :func:`clock.now`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from backend.apps.alerts.evaluation import close_rule_alerts, record_event
from backend.apps.alerts.models import (
    OPEN_STATES,
    Alert,
    AlertRule,
    AlertState,
    Channel,
    DefaultRuleMarker,
    EventKind,
)
from backend.apps.alerts.rules import DEFAULT_RULES
from backend.apps.audit import services as audit
from backend.apps.metrics import clock
from storage_engine.errors import InvalidArgumentError

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


# -- operator actions ----------------------------------------------------------------------------


def acknowledge(*, alert: Alert, actor: Any, now: datetime | None = None) -> Alert:
    now = now or clock.now()
    if alert.state == AlertState.RESOLVED:
        raise InvalidArgumentError("state", "the alert is resolved; only pending or firing alerts can be acknowledged")
    before = {"acknowledged_by": alert.acknowledged_by.get_username() if alert.acknowledged_by else None}
    alert.acknowledged_by, alert.acknowledged_at = actor, now
    alert.save(update_fields=["acknowledged_by", "acknowledged_at", "updated_at"])
    record_event(alert, EventKind.ACKNOWLEDGED, now, actor=actor)
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
    record_event(alert, EventKind.SILENCED, now, actor=actor, detail=detail)
    audit.record(
        actor=actor,
        action="alert.silence",
        target_type="alert",
        target=str(alert.pk),
        before=before,
        after={"silenced_until": alert.silenced_until.isoformat() if alert.silenced_until else None},
    )
    return alert
