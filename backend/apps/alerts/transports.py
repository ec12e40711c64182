"""How a notification reaches a channel: an email to its addresses, or a signed POST to its webhook URL.

:func:`transmit` sends one body (shaped as :func:`delivery.payload`) and raises on failure; what viewers
see of a failure is :func:`delivery_error`'s wording, never what a receiver answered nor the target.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import httpx
from django.conf import settings
from django.core.mail import send_mail

from backend.apps.alerts.models import Channel, ChannelKind
from backend.apps.core.outgoing import OutgoingURLRefused, check_outgoing_url

SIGNATURE_HEADER = "X-LCS-Signature"
WEBHOOK_TIMEOUT_S = 5.0


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


def transmit(channel: Channel, data: dict[str, Any], subject: str, intro: str = "") -> None:
    """Send ``data`` (a :func:`delivery.payload`-shaped body) through the channel: an email to its addresses,
    or a signed POST to its webhook URL (checked against OUTGOING_URL_ALLOW each time). Raises on failure."""
    if channel.kind == ChannelKind.EMAIL:
        _email(channel, data, subject, intro)
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
    check_outgoing_url(channel.target)  # again at each delivery: the name may resolve elsewhere by now
    answer = httpx.post(
        channel.target, content=body, headers=headers, timeout=WEBHOOK_TIMEOUT_S, follow_redirects=False
    )
    if not 200 <= answer.status_code < 300:
        raise DeliveryError(f"webhook answered HTTP {answer.status_code}")
