"""Backlog quotas by size and by age with Pulsar's three policies (DESIGN §3), on every adapter.

Time only moves through the ManualClock: a held producer "sleeps" through the
adapter's injectable sleeper, which advances the clock instead.
"""

from __future__ import annotations

from typing import Any

import pytest

from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.errors import BacklogQuotaExceededError, ProducerHeldTooLongError
from storage_engine.policies.policy import NamespacePolicy
from tests.storage_engine.lifecycle_util import make_ns


def fill(adapter: StorageAdapter, ns: str, n: int, shard: int = 0) -> None:
    for _ in range(n):
        adapter.append(ns, shard, [NewRecord(b"x" * 100)])


def backlog_bytes(adapter: StorageAdapter, ns: str, name: str) -> int:
    return sum(b.bytes for b in adapter.backlog(ns, name))


def with_quota(adapter: StorageAdapter, ns: str, **quota: Any) -> None:
    adapter.update_namespace(ns, NamespacePolicy(retention_ms=None, **quota))


def fake_sleep(adapter: StorageAdapter, clock: ManualClock, on_sleep: Any = None) -> list[float]:
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(int(seconds * 1000))
        if on_sleep is not None:
            on_sleep()

    adapter.sleep = sleep  # type: ignore[attr-defined]
    return slept


def counters(adapter: StorageAdapter) -> dict[str, float]:
    return adapter.stats().counters


def test_no_quota_no_check(lc_adapter: StorageAdapter) -> None:
    ns = make_ns(lc_adapter)
    lc_adapter.create_subscription(ns, "s")

    def boom(*args: Any) -> None:
        raise AssertionError("the append path checked a namespace without a quota")

    lc_adapter._check_backlog_quota = boom  # type: ignore[attr-defined]
    fill(lc_adapter, ns, 5)
    assert lc_adapter.enforce_backlog_quota(ns).skipped == "policy"


def test_quota_without_subscriptions_never_blocks(lc_adapter: StorageAdapter) -> None:
    ns = make_ns(lc_adapter, backlog_quota_bytes=1, backlog_quota_policy="producer_exception")
    fill(lc_adapter, ns, 5)
    assert lc_adapter.shard_stats(ns, 0).end_offset == 5


# -- producer_exception --------------------------------------------------------------------------------------
def test_producer_exception_by_size(lc_adapter: StorageAdapter) -> None:
    ns = make_ns(lc_adapter)
    lc_adapter.create_subscription(ns, "s")
    fill(lc_adapter, ns, 4)
    limit = backlog_bytes(lc_adapter, ns, "s") - 1
    with_quota(lc_adapter, ns, backlog_quota_bytes=limit, backlog_quota_policy="producer_exception")
    with pytest.raises(BacklogQuotaExceededError) as exc:
        fill(lc_adapter, ns, 1)
    err = exc.value
    assert (err.code, err.namespace, err.kind, err.limit) == ("backlog_quota_exceeded", ns, "size", limit)
    assert err.current == limit + 1
    assert lc_adapter.shard_stats(ns, 0).end_offset == 4  # nothing written
    assert counters(lc_adapter)["producer_rejected_total"] == 1
    lc_adapter.acknowledge(ns, "s", 0, 1)
    fill(lc_adapter, ns, 1)
    assert lc_adapter.shard_stats(ns, 0).end_offset == 5


def test_producer_exception_by_age(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, backlog_quota_seconds=10, backlog_quota_policy="producer_exception")
    lc_adapter.create_subscription(ns, "s")
    fill(lc_adapter, ns, 2)
    clock.advance(10_000)
    fill(lc_adapter, ns, 1)  # exactly at the limit: not over
    clock.advance(1)
    with pytest.raises(BacklogQuotaExceededError) as exc:
        fill(lc_adapter, ns, 1)
    assert (exc.value.kind, exc.value.limit, exc.value.current) == ("time", 10_000, 10_001)
    lc_adapter.acknowledge(ns, "s", 0, 1)
    fill(lc_adapter, ns, 1)


# -- producer_request_hold -----------------------------------------------------------------------------------
def test_hold_times_out(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter)
    lc_adapter.create_subscription(ns, "s")
    fill(lc_adapter, ns, 3)
    limit = backlog_bytes(lc_adapter, ns, "s") - 1
    with_quota(lc_adapter, ns, backlog_quota_bytes=limit, backlog_hold_timeout_ms=1_000)
    slept = fake_sleep(lc_adapter, clock)
    start = clock.now_ms()
    with pytest.raises(ProducerHeldTooLongError) as exc:
        fill(lc_adapter, ns, 1)
    assert exc.value.code == "producer_held"
    assert exc.value.waited_ms == 1_000 == clock.now_ms() - start
    assert slept and sum(slept) == pytest.approx(1.0)
    assert lc_adapter.shard_stats(ns, 0).end_offset == 3
    c = counters(lc_adapter)
    assert (c["producer_held_total"], c["producer_rejected_total"]) == (1, 1)


def test_hold_released_when_cursor_moves(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter)
    lc_adapter.create_subscription(ns, "s")
    fill(lc_adapter, ns, 3)
    limit = backlog_bytes(lc_adapter, ns, "s") - 1
    with_quota(lc_adapter, ns, backlog_quota_bytes=limit, backlog_hold_timeout_ms=30_000)
    slept = fake_sleep(lc_adapter, clock, on_sleep=lambda: lc_adapter.acknowledge(ns, "s", 0, 2))
    fill(lc_adapter, ns, 1)  # held once, then the consumer caught up
    assert len(slept) == 1
    assert lc_adapter.shard_stats(ns, 0).end_offset == 4
    c = counters(lc_adapter)
    assert (c["producer_held_total"], c["producer_rejected_total"]) == (1, 0)


def test_hold_by_age(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, backlog_quota_seconds=5, backlog_hold_timeout_ms=2_000)
    lc_adapter.create_subscription(ns, "s")
    fill(lc_adapter, ns, 1)
    clock.advance(6_000)
    fake_sleep(lc_adapter, clock)
    with pytest.raises(ProducerHeldTooLongError) as exc:
        fill(lc_adapter, ns, 1)
    assert exc.value.kind == "time" and exc.value.waited_ms == 2_000


# -- consumer_backlog_eviction -------------------------------------------------------------------------------
def test_eviction_by_size(lc_adapter: StorageAdapter) -> None:
    ns = make_ns(lc_adapter, shards=2)
    lc_adapter.create_subscription(ns, "slow")
    lc_adapter.create_subscription(ns, "fast")
    fill(lc_adapter, ns, 10)
    fill(lc_adapter, ns, 10, shard=1)
    lc_adapter.acknowledge(ns, "fast", 0, 8)
    lc_adapter.acknowledge(ns, "fast", 1, 8)
    limit = backlog_bytes(lc_adapter, ns, "slow") // 2
    with_quota(lc_adapter, ns, backlog_quota_bytes=limit, backlog_quota_policy="consumer_backlog_eviction")
    one = backlog_bytes(lc_adapter, ns, "fast") // 2  # one record on each shard
    fill(lc_adapter, ns, 1)  # proceeds after evicting
    assert lc_adapter.shard_stats(ns, 0).end_offset == 11
    assert backlog_bytes(lc_adapter, ns, "slow") - one <= 0.9 * limit  # then the new record came
    assert backlog_bytes(lc_adapter, ns, "slow") > 0.5 * limit  # moved only as far as needed
    fast = {b.shard: b.cursor for b in lc_adapter.backlog(ns, "fast")}
    assert fast == {0: 8, 1: 8}  # only the slow cursor moved
    assert counters(lc_adapter)["backlog_evictions_total"] >= 1


def test_eviction_by_age(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, backlog_quota_seconds=10, backlog_quota_policy="consumer_backlog_eviction")
    lc_adapter.create_subscription(ns, "s")
    for _ in range(5):
        fill(lc_adapter, ns, 1)
        clock.advance(4_000)  # records aged 20, 16, 12, 8, 4 s
    fill(lc_adapter, ns, 1)
    rows = lc_adapter.backlog(ns, "s")
    assert rows[0].age_ms <= 9_000
    assert rows[0].cursor == 2  # the records older than 9 s were evicted
    assert lc_adapter.shard_stats(ns, 0).end_offset == 6


def test_enforce_backlog_quota(lc_adapter: StorageAdapter) -> None:
    ns = make_ns(lc_adapter)
    lc_adapter.create_subscription(ns, "s")
    fill(lc_adapter, ns, 10)
    limit = backlog_bytes(lc_adapter, ns, "s") // 2
    with_quota(lc_adapter, ns, backlog_quota_bytes=limit, backlog_quota_policy="consumer_backlog_eviction")
    result = lc_adapter.enforce_backlog_quota(ns)
    assert result.operation == "backlog_quota" and result.messages_acknowledged > 0 and result.cursors_moved == 1
    assert backlog_bytes(lc_adapter, ns, "s") <= 0.9 * limit
    assert lc_adapter.enforce_backlog_quota(ns).messages_acknowledged == 0
    # Other policies act on the append path only.
    with_quota(lc_adapter, ns, backlog_quota_bytes=1, backlog_quota_policy="producer_exception")
    assert lc_adapter.enforce_backlog_quota(ns).cursors_moved == 0
