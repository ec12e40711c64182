"""``GET /v1/node/next-due`` over real HTTP (issue 15): per kind of sweep the earliest due time."""

from __future__ import annotations

import time

import httpx

from storage_engine.api import NewRecord
from storage_engine.node_api.client import NodeClient
from storage_engine.policies.policy import NamespacePolicy


def test_next_due_names_each_sweeps_earliest_deadline(node):
    with NodeClient(node.url, node.token) as client:
        empty = client.next_due()
        assert empty["due"] == {"expire-scan": None, "reclaim": None, "retention": None}
        assert empty["shards"] == 0 and abs(empty["now"] - time.time() * 1000) < 60_000
        client.create_namespace("ttl", 2, NamespacePolicy(ttl_ms=600_000, retention_ms=3_600_000))
        now = int(time.time() * 1000)
        client.append("ttl", 1, [NewRecord(value=b"x", expire_at=now + 120_000)] * 3)
        client.append("ttl", 0, [NewRecord(value=b"y", expire_at=now + 90_000)])
        answer = client.next_due()
        due = answer["due"]
        assert answer["shards"] == 2 and answer["recomputed"] == 2
        assert due["expire-scan"] == now + 90_000 and due["reclaim"] == now + 90_000
        assert now + 3_600_000 < due["retention"] <= answer["now"] + 3_600_001
        again = client.next_due()
        assert again["due"] == due and again["recomputed"] == 0  # nothing sealed changed: cached minima
        client.append("ttl", 0, [NewRecord(value=b"z", expire_at=1)])  # already expired
        assert client.next_due()["due"]["expire-scan"] == 1
    # Auth like every other route.
    assert httpx.get(f"{node.url}/v1/node/next-due").status_code == 401


def test_a_due_sweep_step_over_http(node):
    with NodeClient(node.url, node.token) as client:
        client.create_namespace("d", 2, NamespacePolicy(ttl_ms=60_000, segment_ms=1_000))
        client.append("d", 0, [NewRecord(value=b"x", expire_at=1)] * 4)  # due long ago
        client.append("d", 1, [NewRecord(value=b"y", expire_at=int(time.time() * 1000) + 600_000)])
        result = client.sweep_due("reclaim")
        assert (result.operation, result.namespace, result.segments_deleted) == ("reclaim", None, 1)
        assert client.shard_stats("d", 0)["record_count"] == 0 and client.shard_stats("d", 1)["record_count"] == 1
        assert client.sweep_due("expire-scan", limit=10).operation == "expire_scan"
    bad = httpx.post(f"{node.url}/v1/node/due/compact", headers={"Authorization": f"Bearer {node.token}"})
    assert bad.status_code == 400 and bad.json()["field"] == "operation"
    bad = httpx.post(f"{node.url}/v1/node/due/reclaim?limit=0", headers={"Authorization": f"Bearer {node.token}"})
    assert bad.status_code == 400 and bad.json()["field"] == "limit"
