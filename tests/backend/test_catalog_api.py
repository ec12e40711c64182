"""Segment catalog: incremental sync from a real node, filters, summaries, query counts."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from backend.apps.catalog.models import Segment, ShardStatus
from backend.apps.catalog.services import sync_namespace
from backend.apps.namespaces.models import Namespace
from storage_engine.api import NewRecord
from storage_engine.node_api.client import NodeClient


@pytest.fixture
def rolling_namespace(api_as, registered_node, node):
    admin = api_as("admin")
    response = admin.post(
        "/api/namespaces/", {"name": "logs", "shards": 2, "policy": {"segment_bytes": 1024}}, format="json"
    )
    assert response.status_code == 201 and response.json()["sync_state"] == "synced", response.content
    return Namespace.objects.select_related("node").get(name="logs")


def produce(node, shard: int, count: int, size: int = 300) -> None:
    with NodeClient(node.url, node.token) as client:
        for _ in range(count):
            client.append("logs", shard, [NewRecord(value=b"x" * size)])


def test_sync_mirrors_the_node_and_an_unchanged_sync_writes_nothing(rolling_namespace, node):
    produce(node, 0, 10)
    produce(node, 1, 2)
    first = sync_namespace(rolling_namespace)
    with NodeClient(node.url, node.token) as client:
        on_node = {(s, seg.base_offset) for s in (0, 1) for seg in client.list_segments("logs", s)}
    assert {(r.shard, r.base_offset) for r in Segment.objects.all()} == on_node
    assert first.inserted == len(on_node) and first.updated == first.deleted == 0
    assert ShardStatus.objects.get(namespace=rolling_namespace, shard=0).end_offset == 10

    with CaptureQueriesContext(connection) as queries:
        again = sync_namespace(rolling_namespace)
    assert (again.inserted, again.updated, again.deleted, again.unchanged) == (0, 0, 0, len(on_node))
    writes = [q["sql"] for q in queries.captured_queries if q["sql"].split()[0] in {"INSERT", "UPDATE", "DELETE"}]
    assert writes == []


def test_sync_picks_up_rolled_and_grown_segments(rolling_namespace, node):
    produce(node, 0, 2)
    sync_namespace(rolling_namespace)
    active_before = Segment.objects.filter(shard=0, state="active").get()
    produce(node, 0, 8)
    result = sync_namespace(rolling_namespace)
    assert result.inserted >= 1 and result.updated >= 1  # the old active segment was sealed, new ones appeared
    assert Segment.objects.get(pk=active_before.pk).state == "sealed"
    assert sum(Segment.objects.filter(shard=0).values_list("record_count", flat=True)) == 10


def test_sync_deletes_rows_of_segments_gone_from_the_node(rolling_namespace, node, api_as):
    produce(node, 0, 5)
    sync_namespace(rolling_namespace)
    rows_before = Segment.objects.count()
    assert rows_before >= 3  # shard 0 rolled at least once
    with NodeClient(node.url, node.token) as client:
        client.delete_namespace("logs")
        client.create_namespace("logs", 2)
    result = sync_namespace(rolling_namespace)
    # Each shard keeps only an empty base-0 segment: those rows are updated, every other row deleted.
    assert (result.deleted, result.updated) == (rows_before - 2, 2)
    assert list(Segment.objects.values_list("base_offset", "record_count")) == [(0, 0), (0, 0)]


def test_segment_api_filters_orders_and_pages(rolling_namespace, node, api_as):
    produce(node, 0, 12)
    produce(node, 1, 3, size=50)
    sync_namespace(rolling_namespace)
    viewer = api_as("viewer")
    everything = viewer.get("/api/segments/?page_size=1000").json()["results"]
    assert len(everything) == Segment.objects.count()
    shard1 = viewer.get("/api/segments/?namespace=logs&shard=1").json()["results"]
    assert {s["shard"] for s in shard1} == {1}
    active = viewer.get("/api/segments/?state=active").json()["results"]
    assert len(active) == 2 and all(s["state"] == "active" for s in active)
    big = viewer.get("/api/segments/?min_size=600").json()["results"]
    assert big and all(s["size_bytes"] >= 600 for s in big)
    by_size = viewer.get("/api/segments/?ordering=-size_bytes&page_size=1000").json()["results"]
    assert [s["size_bytes"] for s in by_size] == sorted((s["size_bytes"] for s in by_size), reverse=True)
    page = viewer.get("/api/segments/?page_size=2").json()
    seen = [s["id"] for s in page["results"]]
    while page["next"]:
        page = viewer.get(page["next"]).json()
        seen += [s["id"] for s in page["results"]]
    assert sorted(seen) == sorted(s["id"] for s in everything) and len(set(seen)) == len(seen)


def test_namespace_summary_and_list_usage(rolling_namespace, node, api_as):
    produce(node, 0, 4, size=100)
    sync_namespace(rolling_namespace)
    viewer = api_as("viewer")
    summary = viewer.get("/api/namespaces/logs/summary").json()
    assert summary["stored_records"] == 4 and summary["expired_ratio"] == 0.0
    assert [s["shard"] for s in summary["shards"]] == [0, 1]
    assert summary["segment_count"] == sum(s["segment_count"] for s in summary["shards"])
    row = viewer.get("/api/namespaces/").json()["results"][0]
    assert row["stored_records"] == 4 and row["stored_bytes"] == summary["stored_bytes"]
    assert row["last_scan_at"] is None


def test_namespace_list_query_count_does_not_grow_with_namespaces(api_as, db):
    from backend.apps.catalog.models import ShardStatus
    from backend.apps.nodes.models import StorageNode

    node = StorageNode.objects.create(name="n", url="http://127.0.0.1:9")
    viewer = api_as("viewer")

    def count_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert viewer.get("/api/namespaces/").status_code == 200
        return len(queries)

    Namespace.objects.bulk_create(Namespace(name=f"a{i}", node=node) for i in range(3))
    few = count_queries()
    created = Namespace.objects.bulk_create(Namespace(name=f"b{i}", node=node, shards=4) for i in range(40))
    ShardStatus.objects.bulk_create(
        ShardStatus(namespace=ns, shard=s, size_bytes=10) for ns in created for s in range(4)
    )
    assert count_queries() == few


def test_manual_sync_needs_operator(rolling_namespace, api_as):
    assert api_as("viewer").post("/api/namespaces/logs/sync").status_code == 403
    response = api_as("operator").post("/api/namespaces/logs/sync")
    assert response.status_code == 200 and response.json()["inserted"] == 2


def test_periodic_sync_takes_the_stalest_namespaces_first(rolling_namespace, node, api_as):
    from backend.apps.catalog.services import sync_stalest

    api_as("admin").post("/api/namespaces/", {"name": "second", "shards": 1}, format="json")
    produce(node, 0, 3)
    first = sync_stalest(limit=1)  # never-synced namespaces come first
    assert first.inserted >= 1
    synced_once = set(ShardStatus.objects.values_list("namespace__name", flat=True))
    assert len(synced_once) == 1
    sync_stalest(limit=1)
    assert set(ShardStatus.objects.values_list("namespace__name", flat=True)) == {"logs", "second"}


def test_summary_expired_ratio_counts_expired_not_yet_reclaimed(rolling_namespace, node, api_as):
    with NodeClient(node.url, node.token) as client:
        client.append("logs", 1, [NewRecord(value=b"old", expire_at=1)] * 6 + [NewRecord(value=b"new")] * 6)
        client.lifecycle_step("logs", "expire-scan", shard=1, manual=True)  # marks them dead; nothing reclaimed yet
    sync_namespace(rolling_namespace)
    summary = api_as("viewer").get("/api/namespaces/logs/summary").json()
    assert summary["stored_records"] == 12
    assert summary["expired_ratio"] == 0.5
    assert summary["shards"][1]["expired_records"] == 6
    assert api_as("viewer").get("/api/namespaces/").json()["results"][0]["expired_ratio"] == 0.5
