"""How a notification reaches a channel: an email to its addresses, a signed POST to its webhook URL, or
a POST to an Alertmanager's alerts API v2.

:func:`transmit` sends one body (shaped as :func:`delivery.payload`) and raises on failure; what viewers
see of a failure is :func:`delivery_error`'s wording, never what a receiver answered nor the target.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime, timedelta
from typing import Any

import httpx
from django.conf import settings
from django.core.mail import send_mail

from backend.apps.alerts.models import Channel, ChannelKind
from backend.apps.alerts.rules import alert_name
from backend.apps.core.outgoing import CHANNEL, OutgoingURLRefused, check_outgoing_url

SIGNATURE_HEADER = "X-LCS-Signature"
WEBHOOK_TIMEOUT_S = 5.0
ALERTMANAGER_PATH = "/api/v2/alerts"
TEST_ALERT_S = 300  # a test alert ends by itself in Alertmanager after this


class DeliveryError(Exception):
    """A delivery failed for a reason worded here, safe to show to every viewer."""


def delivery_error(exc: Exception) -> str:
    """What viewers see of a failed delivery: our own words, the status, or the error's class; never the
    text a receiver (or a mail server) answered, nor the channel's target."""
    if isinstance(exc, DeliveryError):
        return str(exc)
    if isinstance(exc, OutgoingURLRefused):
        return f"refused by OUTGOING_URL_ALLOW: {exc.rule}"  # the rule, not the address it reaches
    return type(exc).__name__


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def transmit(channel: Channel, data: dict[str, Any], subject: str, intro: str = "") -> None:
    """Send ``data`` (a :func:`delivery.payload`-shaped body) through the channel: an email to its addresses,
    a signed POST to its webhook URL, or the alert to its Alertmanager (URLs checked against OUTGOING_URL_ALLOW
    each time). Raises on failure."""
    if channel.kind == ChannelKind.EMAIL:
        _email(channel, data, subject, intro)
    elif channel.kind == ChannelKind.ALERTMANAGER:
        post_alertmanager(channel, [alertmanager_alert(data["alert"], test=bool(data.get("test")))])
    else:
        _webhook(channel, data)


def _email(channel: Channel, data: dict[str, Any], subject: str, intro: str) -> None:
    lines = [f"{k}: {v}" for k, v in data["alert"].items()]
    text = (f"{intro}\n\n" if intro else "") + "\n".join(lines) + "\n"
    recipients = [a.strip() for a in channel.target.split(",") if a.strip()]
    send_mail(subject[:200], text, settings.DEFAULT_FROM_EMAIL, recipients, fail_silently=False)


def _webhook(channel: Channel, data: dict[str, Any]) -> None:
    body = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: sign(channel.secret, body),
        "X-LCS-Event": str(data["event"]),
        "X-LCS-Delivery": str(data["delivery"]),
    }
    check_outgoing_url(channel.target, purpose=CHANNEL)  # again at each delivery: the name may resolve elsewhere by now
    answer = httpx.post(
        channel.target, content=body, headers=headers, timeout=WEBHOOK_TIMEOUT_S, follow_redirects=False
    )
    if not 200 <= answer.status_code < 300:
        raise DeliveryError(f"webhook answered HTTP {answer.status_code}")


def alertmanager_url(target: str) -> str:
    """The alerts endpoint of the Alertmanager at ``target`` (its base URL, or the endpoint itself)."""
    base = target.rstrip("/")
    return base if base.endswith(ALERTMANAGER_PATH) else base + ALERTMANAGER_PATH


def alertmanager_alert(alert: dict[str, Any], test: bool = False) -> dict[str, Any]:
    """One alert (a :func:`delivery.alert_body`) in Alertmanager's API v2 shape.

    Labels identify it (Alertmanager groups, deduplicates and routes by them): ``alertname`` (the rule's name
    as ``export_alert_rules`` names its Prometheus rule), ``severity``, ``rule`` (the rule's id) and the alert's
    own labels (namespace, shard, node, queue). ``startsAt`` is when it fired; ``endsAt`` is set once it
    resolved, so Alertmanager resolves it too (a firing alert has none: the console sends it again at each
    evaluation, every minute, and Alertmanager keeps it active for its ``resolve_timeout`` in between)."""
    labels = {"alertname": alert_name(str(alert["rule_name"])), "severity": str(alert["severity"])}
    if alert.get("rule") is not None:
        labels["rule"] = str(alert["rule"])
    labels.update({str(k): str(v) for k, v in (alert.get("labels") or {}).items()})
    annotations = {"summary": str(alert.get("summary") or "")}
    for name in ("description", "value", "threshold"):
        if alert.get(name) not in (None, ""):
            annotations[name] = str(alert[name])
    body: dict[str, Any] = {
        "labels": labels,
        "annotations": annotations,
        "startsAt": alert.get("fired_at") or alert.get("started_at"),
        "generatorURL": settings.CONTROL_PLANE_URL.rstrip("/") + f"/alerts?state={alert.get('state') or 'firing'}",
    }
    if alert.get("resolved_at"):
        body["endsAt"] = alert["resolved_at"]
    elif test:  # a test alert shows, then ends by itself
        body["endsAt"] = _after(str(alert["started_at"]), TEST_ALERT_S)
    return body


def _after(stamp: str, seconds: int) -> str:
    return (datetime.fromisoformat(stamp) + timedelta(seconds=seconds)).isoformat()


def post_alertmanager(channel: Channel, alerts: list[dict[str, Any]]) -> None:
    """POST alerts (already in API v2 shape) to the channel's Alertmanager; its URL is checked against
    OUTGOING_URL_ALLOW each time, the channel's secret (if any) is sent as a bearer token."""
    url = alertmanager_url(channel.target)
    check_outgoing_url(url, purpose=CHANNEL)
    headers = {"Content-Type": "application/json"}
    if channel.secret:
        headers["Authorization"] = f"Bearer {channel.secret}"
    body = json.dumps(alerts, separators=(",", ":")).encode()
    answer = httpx.post(url, content=body, headers=headers, timeout=WEBHOOK_TIMEOUT_S, follow_redirects=False)
    if not 200 <= answer.status_code < 300:
        raise DeliveryError(f"Alertmanager answered HTTP {answer.status_code}")
