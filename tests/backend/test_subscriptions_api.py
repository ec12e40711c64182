"""Subscriptions through the control plane: created on the node, listed with live backlog, deleted."""

from __future__ import annotations

import pytest

from backend.apps.audit.models import AuditEntry
from backend.apps.metrics.services import collect
from storage_engine.api import NewRecord
from storage_engine.node_api.client import NodeClient


@pytest.fixture
def events(api_as, registered_node, node):
    assert api_as("admin").post("/api/namespaces/", {"name": "events", "shards": 2}, format="json").status_code == 201
    with NodeClient(node.url, node.token) as client:
        client.append("events", 0, [NewRecord(value=b"x" * 10)] * 5)
    return "events"


def test_create_list_with_backlog_and_delete(api_as, events, node):
    admin = api_as("admin")
    response = admin.post("/api/namespaces/events/subscriptions", {"name": "billing"}, format="json")
    assert response.status_code == 201, response.content
    with NodeClient(node.url, node.token) as client:
        assert [s["name"] for s in client.list_subscriptions("events")] == ["billing"]
        client.acknowledge("events", "billing", 0, 1)
    body = api_as("viewer").get("/api/namespaces/events/subscriptions").json()
    assert body["node_error"] == ""
    [billing] = body["results"]
    assert [(b["shard"], b["messages"], b["live_messages"]) for b in billing["backlog"]] == [(0, 3, 3), (1, 0, 0)]
    # The subscription's figures are the sums over its shards.
    assert (billing["messages"], billing["live_messages"]) == (3, 3)
    assert billing["bytes"] == sum(b["bytes"] for b in billing["backlog"]) > 0
    # The namespace page's backlog: the collection's sum over subscriptions and shards, the same figure.
    collect()
    assert api_as("viewer").get("/api/namespaces/events/summary").json()["backlog_messages"] == 3
    assert (
        admin.delete("/api/namespaces/events/subscriptions/billing", {"confirm": "bill"}, format="json").status_code
        == 400
    )
    assert (
        admin.delete("/api/namespaces/events/subscriptions/billing", {"confirm": "billing"}, format="json").status_code
        == 204
    )
    with NodeClient(node.url, node.token) as client:
        assert client.list_subscriptions("events") == []
    assert {e.action for e in AuditEntry.objects.filter(target="events/billing")} == {
        "subscription.create",
        "subscription.delete",
    }


def test_rules_and_roles(api_as, events):
    admin = api_as("admin")
    assert admin.post("/api/namespaces/events/subscriptions", {"name": "a b"}, format="json").status_code == 400
    assert (
        admin.post(
            "/api/namespaces/events/subscriptions", {"name": "a", "initial": "middle"}, format="json"
        ).status_code
        == 400
    )
    assert admin.post("/api/namespaces/events/subscriptions", {"name": "a"}, format="json").status_code == 201
    response = admin.post("/api/namespaces/events/subscriptions", {"name": "a"}, format="json")
    assert response.status_code == 400 and "already exists" in response.json()["errors"]["name"][0]
    assert (
        api_as("operator").post("/api/namespaces/events/subscriptions", {"name": "b"}, format="json").status_code == 403
    )


def test_listing_survives_a_node_outage(api_as, events, node):
    api_as("admin").post("/api/namespaces/events/subscriptions", {"name": "keep"}, format="json")
    node.stop()
    body = api_as("viewer").get("/api/namespaces/events/subscriptions").json()
    assert [s["name"] for s in body["results"]] == ["keep"] and body["results"][0]["backlog"] is None
    assert "unavailable" in body["node_error"]


def cursor(client, body, name="billing"):
    return client.post(f"/api/namespaces/events/subscriptions/{name}/cursor", body, format="json")


def cursors(node, name="billing"):
    with NodeClient(node.url, node.token) as client:
        return [b["cursor"] for b in client.backlog("events", name)]


def test_cursor_reset_skip_and_clear_are_confirmed_and_audited(api_as, events, node):
    with NodeClient(node.url, node.token) as client:
        client.append("events", 1, [NewRecord(value=b"y", timestamp=t) for t in (1_000, 2_000, 3_000)])
    api_as("admin").post("/api/namespaces/events/subscriptions", {"name": "billing"}, format="json")
    operator = api_as("operator")
    # Clear the backlog of every shard: acknowledged up to the end.
    response = cursor(operator, {"action": "clear", "confirm": "billing"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["moves"] == [{"shard": 0, "before": -1, "after": 4}, {"shard": 1, "before": -1, "after": 2}]
    assert body["subscription"]["messages"] == 0 and body["subscription"]["age_ms"] == 0
    # Reset to earliest on one shard moves BACKWARD (ack never does), and only that shard.
    body = cursor(operator, {"action": "earliest", "shard": 0, "confirm": "billing"}).json()
    assert body["moves"] == [{"shard": 0, "before": 4, "after": -1}]
    assert cursors(node) == [-1, 2]
    assert body["subscription"]["messages"] == 5 and body["subscription"]["live_messages"] == 5
    # Skip N messages on a shard, then reset a shard to a time.
    # The console sends the count as decimal text (a JS number loses digits past 2^53).
    assert cursor(operator, {"action": "skip", "count": "2", "shard": 0, "confirm": "billing"}).json()["moves"] == [
        {"shard": 0, "before": -1, "after": 1}
    ]
    assert cursor(operator, {"action": "time", "timestamp": 2_000, "shard": 1, "confirm": "billing"}).json()[
        "moves"
    ] == [{"shard": 1, "before": 2, "after": 0}]
    assert cursors(node) == [1, 0]
    assert cursor(operator, {"action": "latest", "confirm": "billing"}).status_code == 200
    assert cursors(node) == [4, 2]
    entries = AuditEntry.objects.filter(target="events/billing").exclude(action="subscription.create")
    assert [e.action for e in entries.order_by("id")] == [
        "subscription.clear_backlog",
        "subscription.reset",
        "subscription.skip",
        "subscription.reset",
        "subscription.reset",
    ]
    earliest = entries.order_by("id")[1]
    assert earliest.before == {"cursors": {"0": 4}} and earliest.after == {"action": "earliest", "cursors": {"0": -1}}
    assert earliest.actor.username == "user-operator"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"action": "earliest", "confirm": "bill"}, "confirm"),
        ({"action": "rewind", "confirm": "billing"}, "action"),
        ({"action": "time", "confirm": "billing"}, "timestamp"),
        ({"action": "skip", "confirm": "billing"}, "count"),
        ({"action": "skip", "count": 0, "confirm": "billing"}, "count"),
        ({"action": "skip", "count": "99999999999999999999", "confirm": "billing"}, "count"),  # past 2^62: refused
        ({"action": "skip", "count": "1e3", "confirm": "billing"}, "count"),
        ({"action": "latest", "count": 3, "confirm": "billing"}, "count"),
        ({"action": "earliest", "shard": 2, "confirm": "billing"}, "shard"),
        ({"action": "earliest", "confirm": "billing", "offset": 3}, "offset"),
    ],
)
def test_cursor_refusals_name_the_field_and_change_nothing(api_as, events, node, body, field):
    api_as("admin").post(
        "/api/namespaces/events/subscriptions", {"name": "billing", "initial": "latest"}, format="json"
    )
    response = cursor(api_as("operator"), body)
    assert response.status_code == 400 and field in response.json()["errors"], response.content
    assert cursors(node) == [4, -1]
    assert not AuditEntry.objects.filter(action__startswith="subscription.").exclude(action="subscription.create")


def test_cursor_moves_need_an_operator_and_a_subscription(api_as, events):
    api_as("admin").post("/api/namespaces/events/subscriptions", {"name": "billing"}, format="json")
    assert cursor(api_as("viewer"), {"action": "clear", "confirm": "billing"}).status_code == 403
    assert cursor(api_as("operator"), {"action": "clear", "confirm": "nope"}, name="nope").status_code == 404
