"""The storage node over real HTTP: a node process on a free loopback port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from storage_engine.api import NewRecord
from storage_engine.errors import (
    InvalidArgumentError,
    NamespaceExistsError,
    OffsetOutOfRangeError,
    PolicyValidationError,
    RecordTooLargeError,
    UnknownNamespaceError,
    UnknownShardError,
)
from storage_engine.node_api.client import NodeClient
from storage_engine.node_api.placement import shard_for_key
from storage_engine.policies.policy import NamespacePolicy
from tests.support.processes import BIN, free_port, start_node

PERSISTENT = os.environ.get("TEST_NODE_ADAPTER", "segment") != "memory"


@pytest.fixture
def client(node):
    with NodeClient(node.url, node.token) as c:
        yield c


def test_health_is_public_everything_else_needs_the_token(node):
    assert httpx.get(f"{node.url}/health").json()["status"] == "ok"
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": node.token}):
        response = httpx.get(f"{node.url}/v1/namespaces", headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
    assert httpx.get(f"{node.url}/metrics").status_code == 401


def test_insecure_no_auth_serves_without_a_token(tmp_path):
    node = start_node(tmp_path / "d", extra=["--insecure-no-auth"], token="")
    try:
        assert httpx.get(f"{node.url}/v1/namespaces").status_code == 200
    finally:
        node.stop()


def test_a_node_without_a_token_refuses_to_start(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NODE_TOKEN"}
    result = subprocess.run(
        [str(BIN / "storage-node"), "--data-dir", str(tmp_path), "--port", str(free_port())],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert result.returncode == 2
    assert "--token" in result.stderr


def test_namespace_lifecycle_and_errors(client):
    info = client.create_namespace("orders", 3)
    assert (info.name, info.shards) == ("orders", 3)
    assert [n.name for n in client.list_namespaces()] == ["orders"]
    with pytest.raises(NamespaceExistsError):
        client.create_namespace("orders", 1)
    with pytest.raises(InvalidArgumentError) as bad_name:
        client.create_namespace("no spaces", 1)
    assert bad_name.value.field == "name"
    with pytest.raises(InvalidArgumentError) as bad_shards:
        client.create_namespace("x", 0)
    assert bad_shards.value.field == "shards"
    with pytest.raises(UnknownNamespaceError):
        client.get_namespace("nope")
    client.delete_namespace("orders")
    assert client.list_namespaces() == []


def test_policy_travels_with_put_and_is_validated(client):
    from storage_engine.policies.policy import NamespacePolicy

    client.create_namespace("p", 1)
    updated = client.update_namespace("p", NamespacePolicy(ttl_ms=60_000, segment_bytes=4096))
    assert updated.policy.ttl_ms == 60_000
    assert client.get_namespace("p").policy.segment_bytes == 4096
    response = httpx.put(
        f"{client.base_url}/v1/namespaces/p",
        json={"policy": {"disk": 1, "ttl_ms": -5}},
        headers={"Authorization": f"Bearer {client._http.headers['authorization'][7:]}"},
    )
    assert response.status_code == 400
    assert response.json()["errors"] == {"disk": "unknown field"}
    with pytest.raises(PolicyValidationError) as invalid:
        client.update_namespace("p", NamespacePolicy(min_compaction_lag_ms=10, max_compaction_lag_ms=5))
    assert "min_compaction_lag_ms" in invalid.value.errors


def test_produce_and_fetch_round_trip(client):
    client.create_namespace("events", 2)
    records = [
        NewRecord(value=f"v{i}".encode(), key=b"k", tags=("a", "b"), headers=(("h", b"\x00\x01"),), timestamp=1_000 + i)
        for i in range(5)
    ]
    result = client.append("events", 1, records)
    assert list(result.offsets) == [0, 1, 2, 3, 4]
    read = client.read("events", 1, 0)
    assert [r.value for r in read.records] == [f"v{i}".encode() for i in range(5)]
    assert read.records[0].headers == (("h", b"\x00\x01"),) and read.records[0].tags == ("a", "b")
    assert (read.next_offset, read.log_start_offset, read.end_offset) == (5, 0, 5)
    assert client.read("events", 1, 5).records == ()
    limited = client.read("events", 1, 1, max_records=2)
    assert [r.offset for r in limited.records] == [1, 2] and limited.next_offset == 3


def test_fetch_errors_carry_the_bounds(client):
    client.create_namespace("e", 1)
    client.append("e", 0, [NewRecord(value=b"x")])
    with pytest.raises(OffsetOutOfRangeError) as past:
        client.read("e", 0, 7)
    assert (past.value.offset, past.value.log_start_offset, past.value.end_offset) == (7, 0, 1)
    with pytest.raises(UnknownShardError):
        client.read("e", 3, 0)
    response = httpx.get(f"{client.base_url}/v1/namespaces/e/shards/0/records?offset=abc", headers=client._http.headers)
    assert response.status_code == 400 and response.json()["field"] == "offset"
    response = httpx.get(f"{client.base_url}/v1/namespaces/e/shards/zero/records", headers=client._http.headers)
    assert response.status_code == 400 and response.json()["field"] == "shard"


def test_placement_by_key_hash_and_round_robin(client):
    client.create_namespace("placed", 4)
    keyed = [NewRecord(value=b"v", key=f"user-{i % 5}".encode()) for i in range(40)]
    placements = client.produce("placed", keyed)
    for record, (shard, _) in zip(keyed, placements, strict=True):
        assert shard == shard_for_key(record.key, 4)
    keyless = client.produce("placed", [NewRecord(value=b"v") for _ in range(40)])
    per_shard = [sum(1 for s, _ in keyless if s == shard) for shard in range(4)]
    assert per_shard == [10, 10, 10, 10]


def test_idempotency_key_writes_a_retried_batch_once(client):
    client.create_namespace("idem", 1)
    batch = [NewRecord(value=b"once")]
    first = client.append("idem", 0, batch, idempotency_key="batch-1")
    again = client.append("idem", 0, batch, idempotency_key="batch-1")
    assert first == again
    assert client.read("idem", 0, 0).end_offset == 1
    assert client.append("idem", 0, batch, idempotency_key="batch-2").base_offset == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"not json", "body"),
        (b"[1,2]", "body"),
        (b'{"records": []}', "records"),
        (b'{"records": [{"value": "***"}]}', "records[0].value"),
        (b'{"records": [{"value_text": "x", "tags": "a"}]}', "records[0].tags"),
        (b'{"records": [{"value_text": "x", "colour": 1}]}', "records[0].colour"),
        (b'{"records": [{"value_text": "x"}], "extra": 1}', "extra"),
        (b'{"records": [{"value_text": "x", "timestamp": -1}]}', "records[0].timestamp"),
        (b'{"records": [{"value_text": "x", "ttl_ms": 0}]}', "records[0].ttl_ms"),
    ],
)
def test_bad_produce_bodies_are_400_naming_the_field_and_write_nothing(client, body, field):
    client.create_namespace("strict", 1)
    response = httpx.post(
        f"{client.base_url}/v1/namespaces/strict/shards/0/records", content=body, headers=client._http.headers
    )
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field
    assert client.read("strict", 0, 0).end_offset == 0


def test_too_large_record_is_413(client):
    from storage_engine.policies.policy import NamespacePolicy

    client.create_namespace("small", 1, NamespacePolicy(max_record_bytes=100))
    with pytest.raises(RecordTooLargeError) as too_large:
        client.append("small", 0, [NewRecord(value=b"x" * 500)])
    assert too_large.value.limit == 100 and too_large.value.size > 500


def test_reads_by_key_tag_and_time(client):
    client.create_namespace("q", 1)
    client.append(
        "q",
        0,
        [
            NewRecord(value=b"1", key=b"a", tags=("red",), timestamp=100),
            NewRecord(value=b"2", key=b"b", tags=("blue",), timestamp=200),
            NewRecord(value=b"3", key=b"a", tags=("red",), timestamp=300),
        ],
    )
    latest = client.read_key("q", 0, "a")
    assert latest is not None and (latest.offset, latest.value) == (2, b"3")
    assert client.read_key("q", 0, "zzz") is None
    assert [r.offset for r in client.read_tag("q", 0, "red").records] == [0, 2]
    assert client.offset_for_timestamp("q", 0, 150) == 1
    assert client.offset_for_timestamp("q", 0, 301) is None


def test_segments_are_paginated(client):
    from storage_engine.policies.policy import NamespacePolicy

    client.create_namespace("seg", 1, NamespacePolicy(segment_bytes=1024))
    for _ in range(12):
        client.append("seg", 0, [NewRecord(value=b"x" * 400)])
    segments = client.list_segments("seg", 0, page_size=2)
    assert len(segments) >= 5
    assert [s.base_offset for s in segments] == sorted({s.base_offset for s in segments})
    assert segments[-1].state.value == "active"
    assert sum(s.record_count for s in segments) == 12


def test_stats_and_prometheus_metrics(client):
    client.create_namespace("m", 2)
    client.append("m", 0, [NewRecord(value=b"abc")] * 3)
    stats = client.stats()
    shard0 = next(s for s in stats["shards"] if s["namespace"] == "m" and s["shard"] == 0)
    assert shard0["end_offset"] == 3 and shard0["record_count"] == 3
    text = client.metrics_text()
    assert 'lcs_shard_end_offset{namespace="m",shard="0"} 3' in text
    assert "# TYPE lcs_node_http_requests_total counter" in text


@pytest.mark.skipif(not PERSISTENT, reason="the memory adapter keeps nothing across restarts")
def test_sigterm_shuts_down_cleanly_and_data_survives(tmp_path: Path):
    node = start_node(tmp_path / "d")
    with NodeClient(node.url, node.token) as client:
        client.create_namespace("keep", 1)
        client.append("keep", 0, [NewRecord(value=b"durable")])
    assert node.stop(signal.SIGTERM) == 0
    node = start_node(tmp_path / "d")
    try:
        with NodeClient(node.url, node.token) as client:
            assert [r.value for r in client.read("keep", 0, 0).records] == [b"durable"]
    finally:
        node.stop()


@pytest.mark.skipif(not PERSISTENT, reason="only file-backed adapters lock a data directory")
def test_a_second_node_on_the_same_directory_refuses_to_start(node):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "storage_engine.node.server",
            "--data-dir",
            str(node.data_dir),
            "--port",
            str(free_port()),
            "--token",
            "t",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 3
    assert "already opened by another process" in result.stderr


def test_binary_client_round_trip_matches_json(node):
    records = [
        NewRecord(value=b"v", key=b"k", tags=("t",), headers=(("h", b"1"),), timestamp=7),
        NewRecord(value=None, key=b"k", expire_at=10**13),
    ]
    with NodeClient(node.url, node.token, binary=True) as binary, NodeClient(node.url, node.token) as plain:
        binary.create_namespace("bin", 1)
        assert list(binary.append("bin", 0, records).offsets) == [0, 1]
        assert binary.read("bin", 0, 0) == plain.read("bin", 0, 0)
        assert binary.read("bin", 0, 2).records == ()


def test_put_with_shards_is_an_idempotent_upsert(client):
    """A control plane pushes its desired namespace with one call, whether it exists there or not."""
    policy = NamespacePolicy(ttl_ms=60_000)
    created = client.upsert_namespace("upserted", 3, policy)
    assert (created.name, created.shards, created.policy.ttl_ms) == ("upserted", 3, 60_000)
    again = client.upsert_namespace("upserted", 3, NamespacePolicy(ttl_ms=120_000))
    assert (again.shards, again.policy.ttl_ms) == (3, 120_000)
    with pytest.raises(InvalidArgumentError) as changed:
        client.upsert_namespace("upserted", 4, policy)
    assert changed.value.field == "shards"
    with pytest.raises(UnknownNamespaceError):
        client.update_namespace("absent", policy)  # without shards, PUT only updates
    raw = httpx.put(
        f"{client.base_url}/v1/namespaces/fresh", json={"shards": 1, "policy": {}}, headers=client._http.headers
    )
    assert raw.status_code == 201
    raw = httpx.put(
        f"{client.base_url}/v1/namespaces/fresh", json={"shards": 1, "policy": {}}, headers=client._http.headers
    )
    assert raw.status_code == 200
