"""Subscriptions through the control plane: created on the node, listed with live backlog, deleted."""

from __future__ import annotations

import pytest

from backend.apps.audit.models import AuditEntry
from storage_engine.api import NewRecord
from storage_engine.client import NodeClient


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
    assert response.status_code == 400 and "already exists" in response.json()["name"][0]
    assert (
        api_as("operator").post("/api/namespaces/events/subscriptions", {"name": "b"}, format="json").status_code == 403
    )


def test_listing_survives_a_node_outage(api_as, events, node):
    api_as("admin").post("/api/namespaces/events/subscriptions", {"name": "keep"}, format="json")
    node.stop()
    body = api_as("viewer").get("/api/namespaces/events/subscriptions").json()
    assert [s["name"] for s in body["results"]] == ["keep"] and body["results"][0]["backlog"] is None
    assert "unavailable" in body["node_error"]
