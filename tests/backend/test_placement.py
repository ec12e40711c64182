"""Shards placed on several real nodes: the namespace lives on each hosting node, and every
per-shard path (policy push, message browser, catalog sync, lifecycle runs, metrics,
subscriptions, deletion) goes to the node that holds the shard."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from backend.apps.catalog.models import Segment
from backend.apps.catalog.services import sync_namespace
from backend.apps.lifecycle import services as lifecycle
from backend.apps.metrics.models import MetricSeries
from backend.apps.metrics.services import collect, series_key
from backend.apps.namespaces.models import Namespace
from backend.apps.nodes.models import StorageNode
from backend.apps.nodes.services import DEFAULT_NODE_NAME
from backend.apps.runs.models import TaskRun
from storage_engine.api import NewRecord
from storage_engine.node_api.client import NodeClient
from tests.support.processes import NodeProc, start_node


@pytest.fixture
def second_node(tmp_path: Path) -> Iterator[NodeProc]:
    proc = start_node(tmp_path / "second-data", token="second-token")
    yield proc
    proc.stop()


@pytest.fixture
def spread(api_as, registered_node, node, second_node):
    """``events``: shards 0 and 2 on the default node, shard 1 on ``second``."""
    StorageNode.objects.create(name="second", url=second_node.url, token=second_node.token)
    body = {"name": "events", "shards": 3, "placement": [DEFAULT_NODE_NAME, "second", DEFAULT_NODE_NAME]}
    response = api_as("admin").post("/api/namespaces/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def clients(node: NodeProc, second_node: NodeProc) -> tuple[NodeClient, NodeClient]:
    return NodeClient(node.url, node.token), NodeClient(second_node.url, second_node.token)


def test_create_places_shards_and_pushes_to_every_hosting_node(spread, node, second_node, api_as):
    assert spread["placement"] == [
        {"shard": 0, "node": DEFAULT_NODE_NAME},
        {"shard": 1, "node": "second"},
        {"shard": 2, "node": DEFAULT_NODE_NAME},
    ]
    assert spread["sync_state"] == "synced"
    with clients(node, second_node)[0] as first, clients(node, second_node)[1] as second:
        assert first.get_namespace("events").shards == second.get_namespace("events").shards == 3
    response = api_as("admin").patch("/api/namespaces/events/policy", {"set": {"ttl_ms": 60_000}}, format="json")
    assert response.status_code == 200, response.content
    first, second = clients(node, second_node)
    with first, second:
        assert first.get_namespace("events").policy.ttl_ms == second.get_namespace("events").policy.ttl_ms == 60_000
    listed = api_as("viewer").get("/api/namespaces/").json()["results"]
    assert [row["placement"][1]["node"] for row in listed] == ["second"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"shards": 2, "placement": [DEFAULT_NODE_NAME]}, "one node per shard"),
        ({"shards": 1, "placement": ["nowhere"]}, "unknown nodes: nowhere"),
        ({"shards": 1, "placement": [DEFAULT_NODE_NAME], "node": DEFAULT_NODE_NAME}, "not both"),
    ],
)
def test_bad_placement_is_refused_naming_the_field(api_as, registered_node, body, message):
    response = api_as("admin").post("/api/namespaces/", {"name": "bad", **body}, format="json")
    assert response.status_code == 400
    assert message in str(response.json()["errors"]["placement"])
    assert not Namespace.objects.filter(name="bad").exists()


def test_reads_sync_and_runs_go_to_the_shards_node(spread, node, second_node, api_as, settings):
    first, second = clients(node, second_node)
    with first, second:
        first.append("events", 0, [NewRecord(value=b"zero", expire_at=1)] * 4)
        second.append("events", 1, [NewRecord(value=b"one", expire_at=1)] * 6 + [NewRecord(value=b"kept")])
    sync_namespace(Namespace.objects.get(name="events"))
    records = {s.shard: s.record_count for s in Segment.objects.filter(namespace__name="events")}
    assert records[0] == 4 and records[1] == 7 and records.get(2, 0) == 0

    namespace = Namespace.objects.get(name="events")
    run = lifecycle.create_run(kind="expiry_scan", namespace=namespace)
    assert lifecycle.queue_for_run(run).endswith(f".{DEFAULT_NODE_NAME}")
    visited = []
    while True:
        visited.append(lifecycle.queue_for_run(TaskRun.objects.get(pk=run.pk)).rsplit(".", 1)[1])
        if lifecycle.run_step(run.pk) is not lifecycle.StepOutcome.MORE:
            break
    run.refresh_from_db()
    assert run.state == "succeeded", run.error
    assert visited[0] == DEFAULT_NODE_NAME and visited[-1] == "second"
    assert run.counts["expired_records"] == 10  # 4 on the default node + 6 on the second

    rows = api_as("viewer").get("/api/namespaces/events/messages?shard=1&offset=0").json()["records"]
    assert [r["value"]["text"] for r in rows] == ["kept"]  # from the second node

    one_shard = lifecycle.create_run(kind="expiry_scan", namespace=namespace, shard=1)
    assert one_shard.node.name == "second"

    queue = f"placement-{uuid.uuid4().hex[:8]}"
    settings.METRICS_CELERY_QUEUES = [queue]
    collect(now=datetime(2026, 1, 1, tzinfo=UTC))
    nodes_reporting_shard_1 = set(
        MetricSeries.objects.filter(name="stored_records", namespace="events", shard=1).values_list("node", flat=True)
    )
    assert nodes_reporting_shard_1 == {"second"}  # the default node's empty copy of shard 1 is not counted
    total = MetricSeries.objects.get(key=series_key("stored_records", namespace="events"))
    assert total.last_value == 11


def test_subscriptions_span_nodes_and_delete_removes_everywhere(spread, node, second_node, api_as):
    admin = api_as("admin")
    assert admin.post("/api/namespaces/events/subscriptions", {"name": "billing"}, format="json").status_code == 201
    first, second = clients(node, second_node)
    with first, second:
        second.append("events", 1, [NewRecord(value=b"x")] * 5)
        assert [s["name"] for s in second.list_subscriptions("events")] == ["billing"]
    first, second = clients(node, second_node)
    body = api_as("viewer").get("/api/namespaces/events/subscriptions").json()
    [billing] = body["results"]
    assert [(b["shard"], b["messages"]) for b in billing["backlog"]] == [(0, 0), (1, 5), (2, 0)]

    assert admin.delete("/api/namespaces/events/", {"confirm": "events"}, format="json").status_code == 204
    with first, second:
        assert "events" not in [n.name for n in first.list_namespaces()]
        assert "events" not in [n.name for n in second.list_namespaces()]


def test_a_hosting_node_down_leaves_the_namespace_pending(api_as, registered_node):
    StorageNode.objects.create(name="down", url="http://127.0.0.1:9", token="x")
    body = {"name": "halfway", "shards": 2, "placement": [DEFAULT_NODE_NAME, "down"]}
    response = api_as("admin").post("/api/namespaces/", body, format="json")
    assert response.status_code == 201
    assert response.json()["sync_state"] == "pending"
    assert "down:" in response.json()["sync_error"]
