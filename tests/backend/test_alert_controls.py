"""The console's alerting controls (issue 16): viewers read everything (channel targets redacted), operators
turn rules off and on (built-in ones too) and test channels, a deleted rule's alerts stay, and the TTL scan
rule sees the node-wide sweeps."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.apps import apps
from django.core import mail
from django.db.models.signals import post_migrate

from backend.apps.alerts import delivery, evaluation, services
from backend.apps.alerts.apps import AlertsConfig
from backend.apps.alerts.models import Alert, AlertRule, Channel, DefaultRuleMarker, Notification
from backend.apps.alerts.rules import DEFAULT_RULES
from backend.apps.audit.models import AuditEntry
from backend.apps.lifecycle import services as lifecycle
from backend.apps.metrics import services as metrics
from backend.apps.metrics.services import write_points
from backend.apps.runs import services as runs
from backend.apps.runs.models import Kind, State, TaskRun
from tests.support.receiver import Receiver, receiving

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def ratio(ns: str, value: float, at: datetime) -> None:
    write_points(ms(at), {("expired_ratio", "", ns, None, ""): value})


@pytest.fixture
def quiet(db):
    """Built-in rules off, so each test sees only the rules it turns on."""
    AlertRule.objects.update(enabled=False)


def make_rule(**fields) -> AlertRule:
    defaults = {"name": "expired", "metric": "expired_ratio", "comparator": ">", "threshold": 0.2, "for_s": 0}
    return AlertRule.objects.create(**{**defaults, **fields})


ANSWER = b"internal: db password is hunter2"  # what the webhook answers: it must never reach the console
HOOK_PATH = "/hook/T0KEN-in-path?key=s3cret-query"


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    """A webhook receiver answering 204 (a test may change the status) with :data:`ANSWER`, on 127.0.0.1,
    which the allow list names (a channel reaches loopback only then)."""
    settings.OUTGOING_URL_ALLOW = "*, 127.0.0.1"
    with receiving() as server:
        server.answer = lambda request: (204, "text/plain", ANSWER)
        yield server


# -- 1. viewers read alerts, rules and channels --------------------------------------------------


def test_viewers_read_rules_and_channels_with_targets_redacted(quiet, api_as):
    hook = Channel.objects.create(
        name="hook", kind="webhook", target="https://hooks.example.com:8443/services/T0KEN?x=1", secret="k"
    )
    Channel.objects.create(name="ops", kind="email", target="alice@example.com, bob@corp.example")
    make_rule().channels.add(hook)
    viewer, operator, admin = api_as("viewer"), api_as("operator"), api_as("admin")
    for client in (viewer, operator):
        response = client.get("/api/alert-channels/")
        assert response.status_code == 200
        by_name = {c["name"]: c for c in response.json()}
        assert by_name["hook"]["target"] == "https://hooks.example.com:8443/…"
        assert by_name["ops"]["target"] == "…@example.com, …@corp.example"
        assert all(c["target_redacted"] for c in by_name.values())
        assert "T0KEN" not in response.content.decode() and "alice" not in response.content.decode()
        assert "secret" not in by_name["hook"] and by_name["hook"]["has_secret"] is True
        detail = client.get(f"/api/alert-channels/{hook.pk}/").json()
        assert detail["target"] == "https://hooks.example.com:8443/…"
        assert client.get("/api/alert-rules/").status_code == 200
        assert client.get("/api/alerts/").status_code == 200
    full = {c["name"]: c for c in admin.get("/api/alert-channels/").json()}
    assert full["hook"]["target"] == hook.target and full["hook"]["target_redacted"] is False
    # Writes stay with admins.
    assert viewer.patch(f"/api/alert-channels/{hook.pk}/", {"enabled": False}, format="json").status_code == 403
    assert operator.delete(f"/api/alert-channels/{hook.pk}/").status_code == 403
    assert viewer.post(f"/api/alert-channels/{hook.pk}/test").status_code == 403
    rule = AlertRule.objects.get(name="expired")
    assert viewer.post(f"/api/alert-rules/{rule.pk}/enabled", {"enabled": False}, format="json").status_code == 403
    assert Channel.objects.get(pk=hook.pk).enabled and AlertRule.objects.get(pk=rule.pk).enabled


# -- 2. operators turn rules off and on; seeding keeps their choice ------------------------------


def test_operator_disables_a_builtin_rule_its_alerts_close_and_seeding_keeps_it_off(
    quiet, api_as, django_capture_on_commit_callbacks, monkeypatch
):
    queued: list[int] = []
    monkeypatch.setattr(delivery, "enqueue", lambda pk, countdown=0: queued.append(pk))
    rule = AlertRule.objects.get(default_key="expired_ratio")  # for 15 min
    AlertRule.objects.filter(pk=rule.pk).update(enabled=True)
    rule.channels.add(Channel.objects.create(name="ops", kind="email", target="ops@example.com"))
    ratio("orders", 0.5, T0)
    evaluation.evaluate(now=T0)
    ratio("orders", 0.5, T0 + timedelta(minutes=15))
    ratio("payments", 0.9, T0 + timedelta(minutes=15))
    evaluation.evaluate(now=T0 + timedelta(minutes=15))
    firing = Alert.objects.get(labels_key="namespace=orders")
    assert firing.state == "firing" and Alert.objects.get(labels_key="namespace=payments").state == "pending"
    monkeypatch.setattr("backend.apps.metrics.clock.now", lambda: T0 + timedelta(minutes=16))

    operator = api_as("operator")
    url = f"/api/alert-rules/{rule.pk}/enabled"
    # Bad input is refused, naming the field.
    assert operator.post(url, {}, format="json").json()["errors"].keys() == {"enabled"}
    assert operator.post(url, {"enabled": "perhaps"}, format="json").json()["errors"].keys() == {"enabled"}
    response = operator.post(url, {"enabled": False, "name": "x"}, format="json")
    assert response.status_code == 400 and response.json()["errors"].keys() == {"name"}
    assert operator.post("/api/alert-rules/999999/enabled", {"enabled": False}, format="json").status_code == 404

    with django_capture_on_commit_callbacks(execute=True):
        response = operator.post(url, {"enabled": False}, format="json")
    assert response.status_code == 200
    assert (response.json()["enabled"], response.json()["builtin"]) == (False, True)
    # The firing alert resolved (and its channel hears so); the pending one never was an alert.
    firing.refresh_from_db()
    assert (firing.state, firing.resolved_at) == ("resolved", T0 + timedelta(minutes=16))
    resolved = firing.events.get(kind="resolved")
    assert (resolved.detail, resolved.actor.username) == ("rule disabled", "user-operator")
    assert not Alert.objects.filter(labels_key="namespace=payments").exists()
    notes = list(Notification.objects.filter(alert=firing).order_by("pk"))
    assert [n.event.kind for n in notes] == ["firing", "resolved"] and queued[-1] == notes[-1].pk
    entry = AuditEntry.objects.get(action="alert_rule.disable")
    assert (entry.target, entry.actor.username) == (rule.name, "user-operator")
    assert entry.diff == {"enabled": {"before": True, "after": False}}
    assert "1 resolved, 1 pending dropped" in entry.detail
    # Setting the state it has changes and records nothing.
    assert operator.post(url, {"enabled": False}, format="json").status_code == 200
    assert AuditEntry.objects.filter(action__in=["alert_rule.disable", "alert_rule.enable"]).count() == 1

    # Off: not evaluated.
    ratio("orders", 0.9, T0 + timedelta(minutes=20))
    evaluation.evaluate(now=T0 + timedelta(minutes=20))
    assert not Alert.objects.filter(state__in=["pending", "firing"]).exists()

    # Seeding the built-in rules again (it runs after every migrate) neither re-enables it nor
    # re-creates one an admin deleted.
    AlertRule.objects.get(default_key="scan_duration").delete()
    config = apps.get_app_config("alerts")
    post_migrate.send(sender=AlertsConfig, app_config=config, verbosity=0, interactive=False, using="default")
    assert services.ensure_default_rules() == 0
    assert AlertRule.objects.get(pk=rule.pk).enabled is False
    assert not AlertRule.objects.filter(default_key="scan_duration").exists()
    assert DefaultRuleMarker.objects.count() == len(DEFAULT_RULES)

    # The rules list says it is off; on again, it is evaluated again (its `for` counting from then).
    listed = {r["id"]: r for r in api_as("viewer").get("/api/alert-rules/").json()}
    assert listed[rule.pk]["enabled"] is False
    assert operator.post(url, {"enabled": True}, format="json").json()["enabled"] is True
    assert AuditEntry.objects.get(action="alert_rule.enable").diff == {"enabled": {"before": False, "after": True}}
    ratio("orders", 0.9, T0 + timedelta(minutes=21))
    evaluation.evaluate(now=T0 + timedelta(minutes=21))
    assert Alert.objects.get(state="pending").started_at == T0 + timedelta(minutes=21)


def test_admin_patch_disabling_a_rule_closes_its_alerts_too(quiet, api_as):
    rule = make_rule()
    ratio("orders", 0.5, T0)
    evaluation.evaluate(now=T0)
    assert Alert.objects.get().state == "firing"
    response = api_as("admin").patch(f"/api/alert-rules/{rule.pk}/", {"enabled": False}, format="json")
    assert response.status_code == 200 and response.json()["enabled"] is False
    assert Alert.objects.get().state == "resolved"
    assert "1 resolved" in AuditEntry.objects.get(action="alert_rule.update").detail


# -- 3. deleting a rule keeps its alerts' history ------------------------------------------------


def test_deleting_a_rule_keeps_its_alerts(quiet, api_as, django_capture_on_commit_callbacks, monkeypatch):
    monkeypatch.setattr(delivery, "enqueue", lambda pk, countdown=0: None)
    rule = make_rule(name="Expired ratio high", severity="critical")
    rule.channels.add(Channel.objects.create(name="ops", kind="email", target="ops@example.com"))
    ratio("orders", 0.5, T0)
    evaluation.evaluate(now=T0)
    ratio("orders", 0.1, T0 + timedelta(minutes=1))
    evaluation.evaluate(now=T0 + timedelta(minutes=1))  # first episode resolves
    ratio("orders", 0.6, T0 + timedelta(minutes=2))
    evaluation.evaluate(now=T0 + timedelta(minutes=2))  # second one fires
    old, current = Alert.objects.order_by("pk")
    assert (old.state, current.state) == ("resolved", "firing")

    admin = api_as("admin")
    monkeypatch.setattr("backend.apps.metrics.clock.now", lambda: T0 + timedelta(minutes=3))
    with django_capture_on_commit_callbacks(execute=True):
        assert admin.delete(f"/api/alert-rules/{rule.pk}/").status_code == 204
    assert not AlertRule.objects.filter(pk=rule.pk).exists()
    old.refresh_from_db()
    current.refresh_from_db()
    assert (old.rule_id, current.rule_id) == (None, None)
    assert (old.rule_name, old.metric, old.severity) == ("Expired ratio high", "expired_ratio", "critical")
    assert current.state == "resolved" and current.events.last().detail == "rule deleted"
    assert list(old.events.values_list("kind", flat=True)) == ["pending", "firing", "resolved"]
    assert "1 resolved" in AuditEntry.objects.get(action="alert_rule.delete").detail

    # The resolved notification still goes out after the rule is gone, naming it.
    last = Notification.objects.filter(alert=current).latest("pk")
    assert last.event.kind == "resolved"
    delivery.deliver(last.pk, now=T0 + timedelta(minutes=3))
    assert Notification.objects.get(pk=last.pk).status == "sent"
    assert "RESOLVED" in mail.outbox[-1].subject and "Expired ratio high" in mail.outbox[-1].subject
    assert "rule_name: Expired ratio high" in mail.outbox[-1].body

    # The history reads as before, for viewers too.
    viewer = api_as("viewer")
    page = viewer.get("/api/alerts/?state=resolved").json()["results"]
    assert {(a["rule"], a["rule_name"], a["metric"], a["severity"]) for a in page} == {
        (None, "Expired ratio high", "expired_ratio", "critical")
    }
    assert len(page) == 2
    assert viewer.get("/api/alerts/?severity=critical").json()["results"]
    detail = viewer.get(f"/api/alerts/{current.pk}/").json()
    assert [e["kind"] for e in detail["events"]] == ["pending", "firing", "resolved"]
    assert evaluation.evaluate(now=T0 + timedelta(minutes=4))["resolved"] == 0


def test_a_rule_deleted_outside_the_api_has_its_open_alert_closed_by_the_next_evaluation(quiet):
    rule = make_rule()
    ratio("orders", 0.5, T0)
    evaluation.evaluate(now=T0)
    rule.delete()  # the Django admin, a shell: no delete_rule
    alert = Alert.objects.get()
    assert (alert.rule_id, alert.state) == (None, "firing")
    assert evaluation.evaluate(now=T0 + timedelta(minutes=1))["resolved"] == 1
    alert.refresh_from_db()
    assert alert.state == "resolved" and alert.events.last().detail == "rule deleted"


# -- 4. only alerts that fired resolve -----------------------------------------------------------


def test_resolved_history_holds_only_alerts_that_fired(quiet, api_as):
    make_rule(for_s=300)
    ratio("orders", 0.5, T0)
    ratio("payments", 0.5, T0)
    evaluation.evaluate(now=T0)
    ratio("orders", 0.1, T0 + timedelta(minutes=2))  # clears while pending
    ratio("payments", 0.5, T0 + timedelta(minutes=2))
    evaluation.evaluate(now=T0 + timedelta(minutes=2))
    ratio("payments", 0.5, T0 + timedelta(minutes=5))
    evaluation.evaluate(now=T0 + timedelta(minutes=5))  # payments fires
    ratio("payments", 0.1, T0 + timedelta(minutes=6))
    evaluation.evaluate(now=T0 + timedelta(minutes=6))
    (only,) = api_as("viewer").get("/api/alerts/?state=resolved").json()["results"]
    assert only["scope"] == "namespace=payments"
    assert only["fired_at"].startswith("2030-01-01T00:05") and only["resolved_at"].startswith("2030-01-01T00:06")
    assert Alert.objects.count() == 1


# -- 5. the TTL scan rule sees the node-wide sweeps ----------------------------------------------


def test_a_node_wide_sweep_longer_than_the_threshold_fires_the_scan_rule(quiet, registered_node):
    AlertRule.objects.filter(default_key="scan_duration").update(enabled=True)  # > 10 min, for 0
    # A due sweep's run, as lifecycle.run_due_sweep files it: the node's whole TTL index, no namespace.
    run = lifecycle.create_run(kind=Kind.EXPIRY_SCAN, node=registered_node, schedule="sweep (due)", params={"due": 1})
    assert run.namespace_id is None
    run = runs.mark_running(run)
    started = run.started_at
    assert started is not None

    at = started + timedelta(minutes=9)
    metrics.collect(now=at)
    evaluation.evaluate(now=at)
    assert not Alert.objects.exists()  # 9 minutes: under the threshold

    at = started + timedelta(minutes=11)  # still running 11 minutes in
    metrics.collect(now=at)
    evaluation.evaluate(now=at)
    alert = Alert.objects.get(rule__default_key="scan_duration")
    assert (alert.state, alert.labels, alert.threshold) == ("firing", {"node": "node-1"}, 600)
    assert alert.value == pytest.approx(660, abs=1)

    # The sweep finishes (a real step against the node): it took moments, so the alert resolves.
    while lifecycle.run_step(run.pk) is lifecycle.StepOutcome.MORE:
        pass
    run.refresh_from_db()
    assert run.state == State.SUCCEEDED, (run.state, run.error)
    at = started + timedelta(minutes=12)
    metrics.collect(now=at)
    evaluation.evaluate(now=at)
    alert.refresh_from_db()
    assert alert.state == "resolved"

    # The last finished sweep took 25 minutes: "ran longer than 10 minutes" fires again. (The sweep is a
    # folded row's first: its own duration is last_sweep_s, which a 25-minute sweep would have recorded.)
    run.refresh_from_db()
    assert run.window_start is not None and run.last_sweep_s is not None
    TaskRun.objects.filter(pk=run.pk).update(started_at=run.finished_at - timedelta(minutes=25), last_sweep_s=25 * 60)
    at = started + timedelta(minutes=13)
    metrics.collect(now=at)
    evaluation.evaluate(now=at)
    again = Alert.objects.get(rule__default_key="scan_duration", state="firing")
    assert again.labels == {"node": "node-1"} and again.value == pytest.approx(1500, abs=1)


# -- 6. testing a channel ------------------------------------------------------------------------


def test_send_test_through_a_webhook(quiet, api_as, receiver):
    target = receiver.url + HOOK_PATH
    channel = Channel.objects.create(name="hook", kind="webhook", target=target, secret="s3cret", enabled=False)
    operator = api_as("operator")
    url = f"/api/alert-channels/{channel.pk}/test"
    response = operator.post(url)
    assert response.status_code == 200 and response.json() == {"delivered": True, "error": ""}
    (request,) = receiver.received
    headers, body = request.headers, request.body
    assert headers["X-LCS-Signature"] == "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert headers["X-LCS-Event"] == "test" and headers["X-LCS-Delivery"].startswith("test-")
    data = json.loads(body)
    assert data["test"] is True and data["event"] == "test" and data["sent_by"] == "user-operator"
    assert data["alert"]["state"] == "test" and data["alert"]["summary"].startswith("[TEST]")
    assert not Notification.objects.exists() and not Alert.objects.exists()  # no alert history

    # The receiver fails: the error is ours (the status), never what it answered.
    receiver.answer = lambda request: (500, "text/plain", ANSWER)
    response = operator.post(url)
    assert response.json() == {"delivered": False, "error": "webhook answered HTTP 500"}
    assert "hunter2" not in response.content.decode()
    entries = list(AuditEntry.objects.filter(action="alert_channel.test").order_by("pk"))
    assert [(e.result, e.actor.username, e.target) for e in entries] == [
        ("ok", "user-operator", "hook"),
        ("failed", "user-operator", "hook"),
    ]
    assert entries[1].after == {"delivered": False, "error": "webhook answered HTTP 500"}
    assert all("hunter2" not in json.dumps([e.after, e.detail]) for e in entries)

    # Input: nothing is taken; unknown channels are 404.
    response = operator.post(url, {"message": "hi"}, format="json")
    assert response.status_code == 400 and response.json()["errors"].keys() == {"message"}
    assert operator.post("/api/alert-channels/999999/test").status_code == 404


def test_send_test_obeys_outgoing_url_allow(quiet, api_as, receiver, settings):
    channel = Channel.objects.create(name="hook", kind="webhook", target=receiver.url + HOOK_PATH, secret="s3cret")
    operator = api_as("operator")
    settings.OUTGOING_URL_ALLOW = "hooks.example.com"  # 127.0.0.1 is no longer allowed
    response = operator.post(f"/api/alert-channels/{channel.pk}/test").json()
    assert response["delivered"] is False
    assert response["error"].startswith("refused by OUTGOING_URL_ALLOW: ")
    assert "127.0.0.1" not in response["error"]
    settings.OUTGOING_URL_ALLOW = "*"
    metadata = Channel.objects.create(
        name="meta", kind="webhook", target="http://169.254.169.254/latest/meta-data/", secret="k"
    )
    response = operator.post(f"/api/alert-channels/{metadata.pk}/test").json()
    assert response["delivered"] is False and "metadata" in response["error"]
    assert receiver.received == []


def test_send_test_email(quiet, api_as):
    channel = Channel.objects.create(name="ops", kind="email", target="a@example.com, b@example.com")
    response = api_as("operator").post(f"/api/alert-channels/{channel.pk}/test")
    assert response.json() == {"delivered": True, "error": ""}
    (message,) = mail.outbox
    assert message.to == ["a@example.com", "b@example.com"]
    assert message.subject == "[TEST] Test notification for channel ops"
    assert message.body.startswith(delivery.TEST_MESSAGE)
