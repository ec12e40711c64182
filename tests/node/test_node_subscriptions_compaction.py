"""Subscriptions, backlog quotas and compaction through the node's HTTP API."""

from __future__ import annotations

import pytest

from storage_engine.api import NewRecord
from storage_engine.errors import (
    BacklogQuotaExceededError,
    InvalidArgumentError,
    SubscriptionExistsError,
    UnknownSubscriptionError,
)
from storage_engine.node_api.client import NodeClient
from storage_engine.policies.policy import NamespacePolicy


@pytest.fixture
def client(node):
    with NodeClient(node.url, node.token) as c:
        yield c


def test_subscription_read_ack_and_backlog(client):
    client.create_namespace("orders", 1)
    client.append("orders", 0, [NewRecord(value=f"m{i}".encode()) for i in range(10)])
    info = client.create_subscription("orders", "billing")
    assert info["name"] == "billing" and info["cursors"] == [-1]
    with pytest.raises(SubscriptionExistsError):
        client.create_subscription("orders", "billing")
    read = client.read_subscription("orders", "billing", 0, max_records=4)
    assert [r.offset for r in read.records] == [0, 1, 2, 3]
    assert client.acknowledge("orders", "billing", 0, 3) == 3
    assert client.acknowledge("orders", "billing", 0, 1) == 3  # cumulative: never backward
    assert [r.offset for r in client.read_subscription("orders", "billing", 0, max_records=2).records] == [4, 5]
    backlog = client.backlog("orders", "billing")
    assert backlog[0]["messages"] == 6 and backlog[0]["cursor"] == 3
    with pytest.raises(InvalidArgumentError) as past_end:
        client.acknowledge("orders", "billing", 0, 99)
    assert "offset" in past_end.value.field
    rows = client.stats()["subscriptions"]
    assert {k: rows[0][k] for k in ("namespace", "subscription", "shard", "backlog_messages")} == {
        "namespace": "orders",
        "subscription": "billing",
        "shard": 0,
        "backlog_messages": 6,
    }
    assert 'lcs_subscription_backlog_messages{namespace="orders",shard="0",subscription="billing"} 6' in (
        client.metrics_text()
    )
    client.delete_subscription("orders", "billing")
    with pytest.raises(UnknownSubscriptionError):
        client.read_subscription("orders", "billing", 0)
    assert client.list_subscriptions("orders") == []


def test_seek_resets_a_cursor_backward_by_position_or_time(client):
    client.create_namespace("replay", 1)
    client.append("replay", 0, [NewRecord(value=b"m", timestamp=1_000 * (i + 1)) for i in range(6)])
    client.create_subscription("replay", "audit", initial="latest")
    assert client.backlog("replay", "audit")[0]["messages"] == 0
    assert client.seek_subscription("replay", "audit", 0, -1) == -1  # earliest: backward, which ack never does
    assert client.backlog("replay", "audit")[0]["messages"] == 6
    assert client.seek_subscription("replay", "audit", 0, timestamp=3_500) == 2
    assert [r.offset for r in client.read_subscription("replay", "audit", 0).records] == [3, 4, 5]
    with pytest.raises(InvalidArgumentError) as past_end:
        client.seek_subscription("replay", "audit", 0, 6)
    assert past_end.value.field == "position"
    with pytest.raises(InvalidArgumentError) as neither:
        client.seek_subscription("replay", "audit", 0)
    assert neither.value.field == "position"
    with pytest.raises(UnknownSubscriptionError):
        client.seek_subscription("replay", "nope", 0, 0)


def test_backlog_quota_exception_is_429_with_the_numbers(client):
    client.create_namespace(
        "q", 1, NamespacePolicy(backlog_quota_bytes=2_000, backlog_quota_policy="producer_exception")
    )
    client.create_subscription("q", "slow")
    client.append("q", 0, [NewRecord(value=b"x" * 500)] * 6)
    with pytest.raises(BacklogQuotaExceededError) as refused:
        client.append("q", 0, [NewRecord(value=b"more")])
    assert refused.value.kind == "size" and refused.value.limit == 2_000 and refused.value.current > 2_000


def test_subscription_ttl_and_quota_steps(client):
    client.create_namespace("t", 1)
    client.create_subscription("t", "late")
    client.append("t", 0, [NewRecord(value=b"old", expire_at=1)] * 5 + [NewRecord(value=b"new")])
    result = client.lifecycle_step("t", "subscription-ttl")
    assert (result.messages_acknowledged, result.cursors_moved) == (5, 1)
    assert client.backlog("t", "late")[0]["messages"] == 1
    assert client.lifecycle_step("t", "backlog-quota").skipped == "policy"


def test_compaction_estimate_then_compact(client):
    client.create_namespace(
        "kv", 1, NamespacePolicy(cleanup_policy="compact", segment_bytes=4096, min_cleanable_dirty_ratio=0.1)
    )
    for i in range(200):
        client.append("kv", 0, [NewRecord(value=f"v{i}".encode() * 5, key=f"k{i % 10}".encode())])
    estimate = client.compaction_estimate("kv", 0)
    assert estimate.records_removable > 0 and estimate.reclaimable_bytes > 0
    # The estimate counts the active segment as rolled; the part that waits for the roll goes later.
    assert estimate.active_records_removable > 0 and estimate.active_bytes_reclaimable > 0
    result = client.lifecycle_step("kv", "compact", shard=0, manual=True)
    assert result.records_removed == estimate.records_removable - estimate.active_records_removable
    assert result.bytes_reclaimed == estimate.reclaimable_bytes - estimate.active_bytes_reclaimable
    latest = client.read_key("kv", 0, "k3")
    assert latest is not None and latest.value == b"v193" * 5
    assert client.verify("kv")["ok"]
