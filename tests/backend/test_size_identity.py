"""Every size adds up, in one collection (issue 26): stored = local + remote only in every answer — the node's
``/v1/stats`` and shard stats, ``/api/namespaces/``, a namespace's summary and its shards, the Overview's totals
and nodes — while a producer keeps appending and metrics collections and catalog syncs keep writing. Each answer
takes all of a shard's figures from one node answer, so no answer mixes two moments."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db.models import Sum

from backend.apps.catalog import services as catalog
from backend.apps.catalog.models import Segment, ShardStatus
from backend.apps.lifecycle import services
from backend.apps.metrics import services as metrics
from backend.apps.namespaces.models import Namespace
from backend.apps.runs.models import TaskRun
from storage_engine.api import NewRecord
from storage_engine.node_api.client import NodeClient
from tests.support.processes import NodeProc, start_node

SPLIT = ("local_bytes", "remote_only_bytes")


@pytest.fixture
def node(tmp_path: Path) -> Iterator[NodeProc]:
    proc = start_node(tmp_path / "node-data", extra=["--tier-uri", (tmp_path / "tier").as_uri()])
    yield proc
    proc.stop()


@pytest.fixture
def offloaded(api_as: Any, registered_node: Any, node: NodeProc, django_capture_on_commit_callbacks: Any) -> Namespace:
    """``cold`` (remote storage, small segments, about two segments' worth kept local per shard) with segments in
    every tier after an offload run, and ``hot`` (no remote storage) beside it."""
    admin = api_as("admin")
    policy = {"segment_bytes": 4096, "remote_storage_enabled": True, "local_retention_bytes": 10_000}
    assert (
        admin.post("/api/namespaces/", {"name": "cold", "shards": 2, "policy": policy}, format="json").status_code
        == 201
    )
    assert admin.post("/api/namespaces/", {"name": "hot", "shards": 1}, format="json").status_code == 201
    with NodeClient(node.url, node.token) as client:
        for i in range(150):
            client.append("cold", i % 2, [NewRecord(value=b"%d:" % i + b"v" * 200, key=b"k%d" % (i % 7))])
            client.append("hot", 0, [NewRecord(value=b"h" * 100)])
    with django_capture_on_commit_callbacks(execute=False):
        response = api_as("operator").post("/api/namespaces/cold/actions", {"action": "offload"}, format="json")
    assert response.status_code == 202, response.content
    while services.run_step(response.json()["id"]) is services.StepOutcome.MORE:
        pass
    run = TaskRun.objects.get(pk=response.json()["id"])
    assert run.state == "succeeded" and run.counts["local_copies_dropped"] > 0, (run.error, run.counts)
    return Namespace.objects.get(name="cold")


def adds_up(figures: dict[str, Any], stored: str = "stored_bytes") -> bool:
    return figures[stored] == figures["local_bytes"] + figures["remote_only_bytes"]


def check_every_answer(api: Any, client: NodeClient) -> dict[str, int]:
    """Read every answer carrying sizes once; assert the identity in each. Returns the Overview's totals."""
    for shard in client.stats()["shards"]:
        assert adds_up(shard, "size_bytes"), shard
    for n in (0, 1):
        assert adds_up(client.shard_stats("cold", n), "size_bytes")
    rows = api.get("/api/namespaces/").json()["results"]
    assert {r["name"] for r in rows} == {"cold", "hot"}
    for row in rows:
        assert adds_up(row), row
        summary = api.get(f"/api/namespaces/{row['name']}/summary").json()
        assert adds_up(summary), summary
        for shard in summary["shards"]:
            assert adds_up(shard, "size_bytes"), shard
    overview = api.get("/api/metrics/summary").json()
    assert adds_up(overview), overview
    for name in SPLIT:  # the nodes split the same totals (one node here)
        assert sum(n[name] for n in overview["nodes"]) == overview[name], overview
    return {k: overview[k] for k in ("stored_bytes", *SPLIT)}


def test_stored_is_local_plus_remote_only_in_every_answer_while_appends_go_on(api_as, offloaded, node):
    api = api_as("viewer")
    stop = threading.Event()
    appended = [0]

    def produce() -> None:
        with NodeClient(node.url, node.token) as producer:
            while not stop.is_set():
                producer.append("cold", appended[0] % 2, [NewRecord(value=b"p" * 300, key=b"k")])
                producer.append("hot", 0, [NewRecord(value=b"q" * 120)])
                appended[0] += 1

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    seen = set()
    try:
        with NodeClient(node.url, node.token) as client:
            for _ in range(12):  # collections and syncs interleaved with the appends, each answer checked
                metrics.collect()
                seen.add(tuple(check_every_answer(api, client).values()))
                catalog.sync_stalest(limit=10)
                check_every_answer(api, client)
    finally:
        stop.set()
        thread.join(10)
    assert appended[0] > 0 and len(seen) > 1  # the figures moved while they were read
    assert all(remote_only > 0 for _stored, _local, remote_only in seen)

    # Quiet again: one collection and one sync, and the catalog's segments split exactly as the shards do.
    metrics.collect()
    catalog.sync_namespace(offloaded)
    with NodeClient(node.url, node.token) as client:
        node_totals = check_every_answer(api, client)
        counters = client.stats()["counters"]
    assert node_totals["local_bytes"] == counters["tier_local_bytes"]
    assert node_totals["remote_only_bytes"] == counters["tier_remote_only_bytes"]
    for row in ShardStatus.objects.filter(namespace=offloaded):
        segments = Segment.objects.filter(namespace=offloaded, shard=row.shard)
        remote_only = segments.filter(tier="remote").aggregate(total=Sum("size_bytes"))["total"] or 0
        local = segments.exclude(tier="remote").aggregate(total=Sum("size_bytes"))["total"] or 0
        assert (row.local_bytes, row.remote_only_bytes, row.size_bytes) == (local, remote_only, local + remote_only)
