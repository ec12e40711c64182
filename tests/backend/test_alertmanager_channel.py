"""Issue 18: the Alertmanager channel — the API v2 body (labels, annotations, startsAt, endsAt on resolve,
generatorURL), firing alerts sent again at each evaluation, validation of its URL, redaction, test messages."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from backend.apps.alerts import delivery, evaluation
from backend.apps.alerts.models import Alert, AlertRule, Channel, Notification
from backend.apps.metrics.services import write_points
from tests.support.receiver import Receiver, receiving

T0 = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def alertmanager(settings: Any) -> Iterator[Receiver]:
    """Alertmanager's API v2 as the console sees it: every POST recorded, answered 200 (a test may change that),
    on 127.0.0.1, which the allow list names (a channel reaches loopback only then)."""
    settings.OUTGOING_URL_ALLOW = "*, 127.0.0.1"
    with receiving() as server:
        yield server


@pytest.fixture
def rule(db, alertmanager, settings):
    settings.CONTROL_PLANE_URL = "https://console.example.com/"
    AlertRule.objects.update(enabled=False)
    rule = AlertRule.objects.create(
        name="Expired ratio high",
        metric="expired_ratio",
        comparator=">",
        threshold=0.2,
        for_s=0,
        severity="critical",
        description="Reclamation is falling behind.",
    )
    channel = Channel.objects.create(name="am", kind="alertmanager", target=alertmanager.url + "/", secret="tok")
    rule.channels.add(channel)
    return rule


def ratio(value: float, at: datetime) -> None:
    write_points(int(at.timestamp() * 1000), {("expired_ratio", "", "orders", None, ""): value})


def deliver_all() -> None:
    for pk in Notification.objects.filter(status="pending").values_list("pk", flat=True):
        delivery.deliver(pk, now=datetime.now(UTC) + timedelta(days=3650))


def test_alerts_reach_alertmanager_and_resolve_there(rule, alertmanager, monkeypatch):
    monkeypatch.setattr(delivery, "enqueue", lambda pk, countdown=0: None)
    monkeypatch.setattr(delivery, "_enqueue_resend", lambda pk: None)
    ratio(0.5, T0)
    evaluation.evaluate(now=T0)
    deliver_all()
    (request,) = alertmanager.received
    assert request.path == "/api/v2/alerts" and request.headers["Authorization"] == "Bearer tok"
    (alert,) = request.json()
    assert alert["labels"] == {
        "alertname": "ExpiredRatioHigh",
        "severity": "critical",
        "rule": str(rule.pk),
        "namespace": "orders",
    }
    assert alert["annotations"]["summary"].startswith("Expired ratio high: expired_ratio 50.0% > 20.0%")
    assert alert["annotations"]["description"] == "Reclamation is falling behind."
    assert (alert["annotations"]["value"], alert["annotations"]["threshold"]) == ("0.5", "0.2")
    assert alert["startsAt"] == T0.isoformat() and "endsAt" not in alert
    assert alert["generatorURL"] == "https://console.example.com/alerts?state=firing"
    # Still firing a minute later: sent again (Alertmanager would resolve it after its resolve_timeout).
    ratio(0.5, T0 + timedelta(minutes=1))
    assert evaluation.evaluate(now=T0 + timedelta(minutes=1))["resent"] == 1
    assert delivery.resend_to_alertmanager(rule.channels.get().pk, now=T0 + timedelta(minutes=1)) == 1
    assert alertmanager.received[-1].json()[0]["labels"] == alert["labels"]
    # Resolved: endsAt tells Alertmanager to resolve it too.
    ratio(0.1, T0 + timedelta(minutes=2))
    evaluation.evaluate(now=T0 + timedelta(minutes=2))
    deliver_all()
    (resolved,) = alertmanager.received[-1].json()
    assert resolved["labels"] == alert["labels"] and resolved["endsAt"] == (T0 + timedelta(minutes=2)).isoformat()
    assert evaluation.evaluate(now=T0 + timedelta(minutes=3))["resent"] == 0  # nothing fires: nothing resent
    # A silenced alert is not sent again.
    ratio(0.5, T0 + timedelta(minutes=4))
    evaluation.evaluate(now=T0 + timedelta(minutes=4))
    Alert.objects.filter(state="firing").update(silenced_until=T0 + timedelta(hours=1))
    assert delivery.resend_to_alertmanager(rule.channels.get().pk, now=T0 + timedelta(minutes=5)) == 0


def test_a_failing_alertmanager_is_retried_and_worded_by_us(rule, alertmanager, monkeypatch):
    monkeypatch.setattr(delivery, "enqueue", lambda pk, countdown=0: None)
    alertmanager.answer = lambda request: (400, "text/plain", b"")
    ratio(0.5, T0)
    evaluation.evaluate(now=T0)
    (notification,) = Notification.objects.all()
    assert delivery.deliver(notification.pk, now=T0) == 30
    notification.refresh_from_db()
    assert (notification.status, notification.last_error) == ("retrying", "Alertmanager answered HTTP 400")


def test_alertmanager_channels_through_the_api(db, api_as, alertmanager, settings):
    admin, viewer = api_as("admin"), api_as("viewer")
    created = admin.post(
        "/api/alert-channels/", {"name": "am", "kind": "alertmanager", "target": alertmanager.url}, format="json"
    )
    assert created.status_code == 201, created.content  # no secret needed
    channel = created.json()
    assert channel["kind"] == "alertmanager" and channel["has_secret"] is False
    (listed,) = viewer.get("/api/alert-channels/").json()
    assert listed["target"] == alertmanager.url + "/…" and listed["target_redacted"] is True
    bad = admin.post("/api/alert-channels/", {"name": "x", "kind": "alertmanager", "target": "am:9093"}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"].keys() == {"target"}
    meta = admin.post(
        "/api/alert-channels/",
        {"name": "meta", "kind": "alertmanager", "target": "http://169.254.169.254/"},
        format="json",
    )
    assert meta.status_code == 400 and meta.json()["errors"]["target"][0].startswith("refused")
    # A test message: an alert that shows in Alertmanager, then ends by itself.
    answer = api_as("operator").post(f"/api/alert-channels/{channel['id']}/test").json()
    assert answer == {"delivered": True, "error": ""}
    (request,) = alertmanager.received
    (test,) = request.json()
    assert request.path == "/api/v2/alerts"
    assert test["labels"] == {"alertname": "TestNotification", "severity": "info", "channel": "am"}
    ends = datetime.fromisoformat(test["endsAt"]) - datetime.fromisoformat(test["startsAt"])
    assert ends == timedelta(minutes=5)
    settings.OUTGOING_URL_ALLOW = "hooks.example.com"
    answer = api_as("operator").post(f"/api/alert-channels/{channel['id']}/test").json()
    assert answer["delivered"] is False and answer["error"].startswith("refused by OUTGOING_URL_ALLOW")
