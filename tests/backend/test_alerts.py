"""Alerts: built-in rules, the state machine with an injected clock, notifications, export, the REST API."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core import mail
from django.utils import timezone

from backend.apps.alerts import delivery, evaluation, services, tasks
from backend.apps.alerts.models import (
    Alert,
    AlertEvent,
    AlertRule,
    Channel,
    DefaultRuleMarker,
    DeliveryStatus,
    Notification,
)
from backend.apps.alerts.rules import DEFAULT_RULES
from backend.apps.audit.models import AuditEntry
from backend.apps.metrics.services import write_points
from backend.apps.nodes.models import StorageNode
from tests.backend.conftest import make_user
from tests.support.receiver import Receiver, receiving

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def ratio(ns: str, value: float, at: datetime) -> None:
    write_points(ms(at), {("expired_ratio", "", ns, None, ""): value})


@pytest.fixture
def quiet(db):
    """Built-in rules off, so each test sees only its own rule."""
    AlertRule.objects.update(enabled=False)


def make_rule(**fields) -> AlertRule:
    defaults = {"name": "expired", "metric": "expired_ratio", "comparator": ">", "threshold": 0.2, "for_s": 300}
    return AlertRule.objects.create(**{**defaults, **fields})


def test_default_rules_are_created_once(db):
    rules = AlertRule.objects.exclude(default_key=None)
    assert sorted(rules.values_list("default_key", flat=True)) == sorted(r.key for r in DEFAULT_RULES)
    assert services.ensure_default_rules() == 0
    expired = rules.get(default_key="expired_ratio")
    assert (expired.metric, expired.comparator, expired.threshold) == ("expired_ratio", ">", 0.2)
    warning = rules.get(default_key="disk_warning")
    assert (warning.threshold_policy, warning.threshold, warning.severity) == ("disk_warning_ratio", 1.0, "critical")
    assert rules.get(default_key="disk_forecast").metric == "forecast"
    assert rules.get(default_key="scan_duration").threshold == 600
    expired.delete()  # an admin's deletion sticks
    assert services.ensure_default_rules() == 0
    assert not AlertRule.objects.filter(default_key="expired_ratio").exists()
    DefaultRuleMarker.objects.all().delete()
    AlertRule.objects.all().delete()
    assert services.ensure_default_rules() == len(DEFAULT_RULES)


def test_pending_then_firing_after_for_then_resolved_deduplicated(quiet):
    rule = make_rule()
    channel = Channel.objects.create(name="ops", kind="email", target="ops@example.com")
    rule.channels.add(channel)
    ratio("orders", 0.5, T0)
    ratio("payments", 0.1, T0)
    assert evaluation.evaluate(now=T0)["pending"] == 1
    alert = Alert.objects.get(rule=rule)
    assert (alert.state, alert.labels, alert.value, alert.threshold) == ("pending", {"namespace": "orders"}, 0.5, 0.2)
    evaluation.evaluate(now=T0 + timedelta(seconds=299))
    assert Alert.objects.get(pk=alert.pk).state == "pending"
    ratio("orders", 0.6, T0 + timedelta(seconds=300))
    assert evaluation.evaluate(now=T0 + timedelta(seconds=300))["firing"] == 1
    alert.refresh_from_db()
    assert (alert.state, alert.fired_at, alert.value) == ("firing", T0 + timedelta(seconds=300), 0.6)
    evaluation.evaluate(now=T0 + timedelta(seconds=360))  # still holding: one alert, no new notification
    assert Alert.objects.filter(rule=rule).count() == 1
    assert Notification.objects.filter(alert=alert).count() == 1
    ratio("orders", 0.05, T0 + timedelta(seconds=420))
    assert evaluation.evaluate(now=T0 + timedelta(seconds=420))["resolved"] == 1
    alert.refresh_from_db()
    assert (alert.state, alert.resolved_at, alert.value) == ("resolved", T0 + timedelta(seconds=420), 0.05)
    assert list(alert.events.values_list("kind", flat=True)) == ["pending", "firing", "resolved"]
    assert [n.event.kind for n in Notification.objects.filter(alert=alert).order_by("pk")] == ["firing", "resolved"]
    # The condition holds again: a new episode, a new alert.
    ratio("orders", 0.7, T0 + timedelta(seconds=480))
    evaluation.evaluate(now=T0 + timedelta(seconds=480))
    assert Alert.objects.filter(rule=rule).count() == 2
    assert Alert.objects.filter(rule=rule, state="pending").count() == 1


def test_pending_that_clears_before_for_never_was_an_alert(quiet):
    """As in Prometheus: a pending alert whose condition clears before ``for`` is dropped, never notified,
    and never shows in the history as resolved (only alerts that fired resolve)."""
    rule = make_rule()
    rule.channels.add(Channel.objects.create(name="ops", kind="email", target="ops@example.com"))
    ratio("orders", 0.5, T0)
    evaluation.evaluate(now=T0)
    assert Alert.objects.get(rule=rule).state == "pending"
    ratio("orders", 0.1, T0 + timedelta(seconds=60))
    counts = evaluation.evaluate(now=T0 + timedelta(seconds=60))
    assert (counts["cleared"], counts["resolved"]) == (1, 0)
    assert not Alert.objects.exists() and not AlertEvent.objects.exists()
    assert not Notification.objects.exists()
    # A series that stops reporting drops a pending alert the same way.
    ratio("orders", 0.5, T0 + timedelta(seconds=120))
    evaluation.evaluate(now=T0 + timedelta(seconds=120))
    assert Alert.objects.get().state == "pending"
    ratio("payments", 0.1, T0 + timedelta(hours=1))  # a later collection without orders
    assert evaluation.evaluate(now=T0 + timedelta(hours=1))["cleared"] == 1
    assert not Alert.objects.exists()


def test_silence_and_ack(quiet, api_as, monkeypatch):
    monkeypatch.setattr("backend.apps.metrics.clock.now", lambda: T0 + timedelta(seconds=30))
    rule = make_rule(for_s=0)
    rule.channels.add(Channel.objects.create(name="ops", kind="email", target="ops@example.com"))
    ratio("orders", 0.5, T0)
    evaluation.evaluate(now=T0)
    alert = Alert.objects.get(rule=rule)
    assert alert.state == "firing" and Notification.objects.count() == 1
    operator = api_as("operator")
    response = operator.post(f"/api/alerts/{alert.pk}/ack")
    assert response.status_code == 200 and response.json()["acknowledged_by"] == "user-operator"
    assert response.json()["acknowledged_at"]
    response = operator.post(f"/api/alerts/{alert.pk}/silence", {"minutes": 60}, format="json")
    assert response.status_code == 200 and response.json()["silenced_until"].startswith("2030-01-01T01:00:30")
    assert operator.post(f"/api/alerts/{alert.pk}/silence", {"minutes": "x"}, format="json").json()[
        "errors"
    ].keys() == {"minutes"}
    assert set(AuditEntry.objects.values_list("action", flat=True)) >= {"alert.ack", "alert.silence"}
    # Silenced: resolving it sends nothing (the history says so).
    ratio("orders", 0.0, T0 + timedelta(minutes=2))
    evaluation.evaluate(now=T0 + timedelta(minutes=2))
    alert.refresh_from_db()
    assert alert.state == "resolved" and Notification.objects.count() == 1
    kinds = list(alert.events.values_list("kind", flat=True))
    assert kinds == ["pending", "firing", "acknowledged", "silenced", "resolved"]
    assert operator.post(f"/api/alerts/{alert.pk}/ack").status_code == 400  # resolved


def test_policy_thresholds_and_forecast(quiet):
    StorageNode.objects.create(
        name="n1",
        url="http://127.0.0.1:9",
        policy_overrides={"disk_max_used_ratio": 0.3, "disk_clean_forcibly_ratio": 0.4, "disk_warning_ratio": 0.5},
    )
    AlertRule.objects.filter(default_key__in=["disk_warning", "disk_forecast", "backlog_bytes"]).update(enabled=True)
    # Disk rising 0.01 per hour from 0.35: below every watermark but the max-used one now; 0.59 in 24 h.
    for minute in range(0, 6 * 60 + 1, 10):
        write_points(
            ms(T0 + timedelta(minutes=minute)), {("disk_used_ratio", "n1", "", None, ""): 0.35 + minute / 6000}
        )
    write_points(ms(T0 + timedelta(hours=6)), {("backlog_bytes", "", "orders", None, ""): 10**9})  # no quota
    now = T0 + timedelta(hours=6)
    evaluation.evaluate(now=now)
    forecast = Alert.objects.get(rule__default_key="disk_forecast")
    assert forecast.state == "pending" and forecast.labels == {"node": "n1"}
    assert forecast.threshold == 0.5 and forecast.value == pytest.approx(0.65)
    assert not Alert.objects.filter(rule__default_key__in=["disk_warning", "backlog_bytes"]).exists()
    write_points(ms(now + timedelta(minutes=1)), {("disk_used_ratio", "n1", "", None, ""): 0.55})
    evaluation.evaluate(now=now + timedelta(minutes=1))
    warning = Alert.objects.get(rule__default_key="disk_warning")
    assert (warning.state, warning.threshold, warning.value) == ("firing", 0.5, 0.55)  # for 0: at once


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    """A webhook receiver failing the first POST (500), taking the others (204), on 127.0.0.1, which the
    allow list names (a channel reaches loopback only then)."""
    settings.OUTGOING_URL_ALLOW = "*, 127.0.0.1"
    with receiving() as server:
        server.answer = lambda request: (500 if len(server.received) == 1 else 204, "text/plain", b"")
        yield server


def test_webhook_signed_and_retried(quiet, receiver, monkeypatch, django_capture_on_commit_callbacks):
    queued: list[tuple[int, float]] = []
    monkeypatch.setattr(delivery, "enqueue", lambda pk, countdown=0: queued.append((pk, countdown)))
    rule = make_rule(for_s=0, severity="critical")
    hook = Channel.objects.create(name="hook", kind="webhook", target=receiver.url + "/hook", secret="s3cret")
    rule.channels.add(hook)
    start = timezone.now()
    ratio("orders", 0.5, start)
    with django_capture_on_commit_callbacks(execute=True):
        evaluation.evaluate(now=start)
    (notification,) = Notification.objects.all()
    assert queued == [(notification.pk, 0)]
    tasks.deliver_notification(notification.pk)  # the receiver fails the first attempt: queued again with backoff
    notification.refresh_from_db()
    assert (notification.status, notification.attempts) == ("retrying", 1)
    assert "500" in notification.last_error and queued[-1] == (notification.pk, 30)
    assert delivery.deliver(notification.pk) is None  # not due yet: nothing sent
    assert len(receiver.received) == 1
    assert delivery.deliver(notification.pk, now=timezone.now() + timedelta(seconds=31)) is None
    notification.refresh_from_db()
    assert (notification.status, notification.attempts, notification.last_error) == ("sent", 2, "")
    headers, body = receiver.received[-1].headers, receiver.received[-1].body
    expected = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert headers["X-LCS-Signature"] == expected
    data = json.loads(body)
    assert data["event"] == "firing" and data["alert"]["labels"] == {"namespace": "orders"}
    assert data["alert"]["severity"] == "critical" and data["alert"]["value"] == 0.5


def test_delivery_gives_up_after_bounded_attempts(quiet):
    rule = make_rule(for_s=0)
    rule.channels.add(Channel.objects.create(name="dead", kind="webhook", target="http://127.0.0.1:9/", secret="x"))
    ratio("orders", 0.5, T0)
    evaluation.evaluate(now=T0)
    (notification,) = Notification.objects.all()
    when, waits = T0, []
    while (wait := delivery.deliver(notification.pk, now=when)) is not None:
        waits.append(wait)
        when += timedelta(seconds=wait)
    notification.refresh_from_db()
    assert notification.status == DeliveryStatus.FAILED and notification.attempts == delivery.MAX_ATTEMPTS
    assert waits == [30, 60, 120, 240, 480]


def test_email_via_locmem(quiet):
    rule = make_rule(for_s=0, name="Expired ratio high")
    rule.channels.add(Channel.objects.create(name="ops", kind="email", target="a@example.com, b@example.com"))
    ratio("orders", 0.5, T0)
    evaluation.evaluate(now=T0)
    (notification,) = Notification.objects.all()
    delivery.deliver(notification.pk, now=T0)
    (message,) = mail.outbox
    assert message.to == ["a@example.com", "b@example.com"]
    assert "FIRING" in message.subject and "Expired ratio high" in message.subject
    assert "namespace=orders" in message.body
    assert Notification.objects.get().status == "sent"


def test_overdue_deliveries_are_requeued(quiet, monkeypatch, django_capture_on_commit_callbacks):
    queued: list[int] = []
    monkeypatch.setattr(delivery, "enqueue", lambda pk, countdown=0: queued.append(pk))
    rule = make_rule(for_s=0)
    rule.channels.add(Channel.objects.create(name="ops", kind="email", target="ops@example.com"))
    ratio("orders", 0.5, T0)
    evaluation.evaluate(now=T0)
    (notification,) = Notification.objects.all()
    with django_capture_on_commit_callbacks(execute=True):
        assert delivery.retry_due(now=T0 + timedelta(seconds=30)) == 0  # just queued: not lost yet
        assert delivery.retry_due(now=T0 + timedelta(minutes=2)) == 1
    assert queued == [notification.pk]


def test_permissions(quiet, api_as):
    rule = make_rule(for_s=0)
    ratio("orders", 0.5, T0)
    evaluation.evaluate(now=T0)
    alert = Alert.objects.get(rule=rule)
    viewer, operator, admin = api_as("viewer"), api_as("operator"), api_as("admin")
    assert api_as(None).get("/api/alerts/").status_code == 401
    page = viewer.get("/api/alerts/?state=firing").json()
    assert [a["id"] for a in page["results"]] == [alert.pk]
    first = page["results"][0]
    assert (first["rule_name"], first["scope"], first["threshold"], first["state"]) == (
        "expired",
        "namespace=orders",
        0.2,
        "firing",
    )
    assert viewer.get("/api/alerts/?state=resolved").json()["results"] == []
    assert viewer.get("/api/alerts/?state=nope").status_code == 400
    detail = viewer.get(f"/api/alerts/{alert.pk}/").json()
    assert [e["kind"] for e in detail["events"]] == ["pending", "firing"]
    assert viewer.post(f"/api/alerts/{alert.pk}/ack").status_code == 403
    assert viewer.post(f"/api/alerts/{alert.pk}/silence", {"minutes": 5}, format="json").status_code == 403
    assert operator.post(f"/api/alerts/{alert.pk}/ack").status_code == 200
    assert viewer.get("/api/alert-rules/").status_code == 200
    assert operator.post("/api/alert-rules/", {}, format="json").status_code == 403
    # Channels: everyone reads them (targets redacted unless admin), only admins write.
    assert viewer.get("/api/alert-channels/").status_code == 200
    assert operator.get("/api/alert-channels/").status_code == 200
    assert admin.get("/api/alert-channels/").status_code == 200
    assert viewer.post("/api/alert-channels/", {}, format="json").status_code == 403
    assert operator.post("/api/alert-channels/", {}, format="json").status_code == 403


def test_rule_validation_and_audit(quiet, api_as, settings):
    settings.OUTGOING_URL_ALLOW = "*, 127.0.0.1"  # the webhook below is on loopback: a channel needs it named
    admin = api_as("admin")
    good = {"name": "big", "metric": "stored_bytes", "comparator": ">", "threshold": 1e9, "for_s": 60}
    for field, bad in [("comparator", "=="), ("metric", "cpu"), ("for_s", -1), ("severity", "panic")]:
        response = admin.post("/api/alert-rules/", {**good, field: bad}, format="json")
        assert response.status_code == 400 and field in response.json()["errors"], (field, response.json())
    response = admin.post("/api/alert-rules/", {**good, "scope_type": "shard", "scope": "orders"}, format="json")
    assert response.status_code == 400 and "scope" in response.json()["errors"]
    response = admin.post(
        "/api/alert-rules/",
        {**good, "metric": "disk_used_ratio", "scope_type": "namespace", "scope": "x"},
        format="json",
    )
    assert response.status_code == 400 and "scope_type" in response.json()["errors"]
    channel = admin.post(
        "/api/alert-channels/", {"name": "hook", "kind": "webhook", "target": "http://127.0.0.1:1/h", "secret": "k"}
    ).json()
    assert channel["has_secret"] is True and "secret" not in channel
    response = admin.post("/api/alert-channels/", {"name": "h2", "kind": "webhook", "target": "http://x.example/"})
    assert response.status_code == 400 and "secret" in response.json()["errors"]
    response = admin.post("/api/alert-channels/", {"name": "m", "kind": "email", "target": "not-an-address"})
    assert response.status_code == 400 and "target" in response.json()["errors"]
    created = admin.post("/api/alert-rules/", {**good, "channels": [channel["id"]]}, format="json")
    assert created.status_code == 201 and created.json()["channels"] == [channel["id"]]
    rule_id = created.json()["id"]
    patched = admin.patch(f"/api/alert-rules/{rule_id}/", {"threshold": 2e9, "enabled": False}, format="json")
    assert patched.status_code == 200 and patched.json()["threshold"] == 2e9 and patched.json()["enabled"] is False
    assert admin.patch(f"/api/alert-rules/{rule_id}/", {"for_s": -5}, format="json").json()["errors"].keys() == {
        "for_s"
    }
    assert admin.delete(f"/api/alert-rules/{rule_id}/").status_code == 204
    update = AuditEntry.objects.get(action="alert_rule.update")
    assert update.diff["threshold"] == {"before": 1e9, "after": 2e9}
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert actions >= {"alert_rule.create", "alert_rule.update", "alert_rule.delete", "alert_channel.create"}


@pytest.mark.parametrize("count", [3, 30])
def test_list_query_counts_are_bounded(quiet, api_as, django_assert_max_num_queries, count):
    ack_user = make_user("acker", "operator")
    channels = [Channel.objects.create(name=f"c{i}", kind="email", target="a@example.com") for i in range(3)]
    for i in range(count):
        rule = make_rule(name=f"r{i}")
        rule.channels.set(channels)
        alert = Alert.objects.create(rule=rule, labels_key=f"namespace=n{i}", labels={}, started_at=T0, state="firing")
        alert.acknowledged_by = ack_user
        alert.save()
        AlertEvent.objects.create(alert=alert, kind="pending", at=T0)
    viewer, admin = api_as("viewer"), api_as("admin")
    with django_assert_max_num_queries(8):
        assert len(viewer.get("/api/alerts/").json()["results"]) == count
    with django_assert_max_num_queries(8):
        assert len(admin.get("/api/alert-rules/").json()) >= count
    with django_assert_max_num_queries(8):
        admin.get("/api/alert-channels/")


def test_alert_summaries_read_in_the_metrics_units():
    """A disk alert says "90.3% > 90.0%", not "0.902549 > 0.9"; bytes read in binary units."""
    from backend.apps.alerts.evaluation import _summary
    from backend.apps.alerts.models import AlertRule

    disk = AlertRule(name="Disk above the warning watermark", metric="disk_used_ratio", comparator=">")
    assert _summary(disk, "node=node-1", 0.902549, 0.9) == (
        "Disk above the warning watermark: disk_used_ratio 90.3% > 90.0% (node=node-1)"
    )
    stored = AlertRule(name="Big", metric="stored_bytes", comparator=">")
    assert _summary(stored, "", 3 * 1024**3, 1024**3) == "Big: stored_bytes 3.0 GiB > 1.0 GiB (cluster)"
