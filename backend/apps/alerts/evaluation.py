"""Evaluation of alert rules: an alert per rule and label set goes pending, fires, resolves.

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

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from backend.apps.alerts.delivery import notify, resend_firing, retry_due
from backend.apps.alerts.models import OPEN_STATES, Alert, AlertEvent, AlertRule, AlertState, EventKind
from backend.apps.alerts.rules import COMPARE
from backend.apps.alerts.selectors import PolicyCache, is_silenced, labels_key, observations
from backend.apps.metrics import clock
from backend.apps.metrics.catalog import SERIES


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


def record_event(
    alert: Alert, kind: str, at: datetime, value: float | None = None, actor: Any = None, detail: str = ""
) -> AlertEvent:
    """A transition or an operator action in the alert's history."""
    user = actor if getattr(actor, "is_authenticated", False) else None
    return AlertEvent.objects.create(alert=alert, kind=kind, at=at, value=value, actor=user, detail=detail[:500])


def _fire(alert: Alert, now: datetime) -> None:
    alert.state, alert.fired_at = AlertState.FIRING, now
    alert.save(update_fields=["state", "fired_at", "value", "threshold", "summary", "updated_at"])
    silenced = is_silenced(alert, now)
    event = record_event(alert, EventKind.FIRING, now, alert.value, detail="silenced: not notified" if silenced else "")
    if not silenced:
        notify(alert, event, now)


def _resolve(alert: Alert, now: datetime, value: float | None, why: str, actor: Any = None) -> None:
    """A firing alert resolves (and notifies, unless silenced)."""
    alert.state, alert.resolved_at = AlertState.RESOLVED, now
    if value is not None:
        alert.value = value
    alert.save(update_fields=["state", "resolved_at", "value", "updated_at"])
    event = record_event(alert, EventKind.RESOLVED, now, value, actor=actor, detail=why)
    if not is_silenced(alert, now):
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
            record_event(alert, EventKind.PENDING, now, obs.value)
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
    totals["resent"] = resend_firing(now)
    return totals
