"""Node-wide lifecycle steps (``namespace=None``), on every adapter: one call works on every
namespace, with the same per-namespace rules as a call naming each one."""

from __future__ import annotations

import pytest

from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.errors import InvalidArgumentError
from storage_engine.policies.policy import NodePolicy
from storage_engine.rules.cleaning import hour_of
from tests.storage_engine.lifecycle_util import append_one, assert_verified, make_ns


def test_one_pass_over_the_ttl_index_expires_every_namespace(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    now = clock.now_ms()
    names = [make_ns(lc_adapter, f"ns{i}", shards=2) for i in range(5)]
    for i, ns in enumerate(names):
        for shard in (0, 1):
            lc_adapter.append(ns, shard, [NewRecord(b"x", expire_at=now + 10 + i)] * (i + 1))
            append_one(lc_adapter, ns, b"kept", shard=shard)
    clock.advance(100)
    result = lc_adapter.expire_scan(None)
    assert (result.operation, result.namespace, result.more) == ("expire_scan", None, False)
    assert result.expired_records == sum(2 * (i + 1) for i in range(5))
    assert result.scanned == result.expired_records  # one pass: every due entry looked at once
    for ns in names:
        for shard in (0, 1):
            assert [r.value for r in lc_adapter.read(ns, shard, 0).records] == [b"kept"]
            assert (
                lc_adapter.shard_stats(ns, shard).expired_records == lc_adapter.shard_stats(ns, shard).record_count - 1
            )
    assert lc_adapter.expire_scan(None).expired_records == 0
    assert_verified(lc_adapter)


def test_the_sweep_stops_at_its_limit_and_resumes(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    now = clock.now_ms()
    for name in ("a", "b", "c"):
        lc_adapter.append(make_ns(lc_adapter, name), 0, [NewRecord(b"x", expire_at=now + 1)] * 40)
    clock.advance(10)
    first = lc_adapter.expire_scan(None, limit=50)
    assert (first.expired_records, first.more) == (50, True)
    second = lc_adapter.expire_scan(None, limit=100)
    assert (second.expired_records, second.more) == (70, False)
    with pytest.raises(InvalidArgumentError) as err:
        lc_adapter.expire_scan(None, shard=0)
    assert err.value.field == "shard"


def test_the_sweep_skips_namespaces_outside_off_peak_hours(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    hour = hour_of(clock.now_ms())
    lc_adapter.set_node_policy(NodePolicy(off_peak_hours=f"{(hour + 2) % 24:02d}", urgent_expired_ratio=0.5))
    now = clock.now_ms()
    urgent, calm = make_ns(lc_adapter, "urgent"), make_ns(lc_adapter, "calm")
    lc_adapter.append(urgent, 0, [NewRecord(b"x", expire_at=now + 1)] * 3 + [NewRecord(b"y")])
    lc_adapter.append(calm, 0, [NewRecord(b"x", expire_at=now + 1)] + [NewRecord(b"y")] * 3)
    lc_adapter.expire_scan(urgent, limit=2, manual=True)  # not due yet: nothing
    clock.advance(1)
    lc_adapter.expire_scan(urgent, limit=2, manual=True)  # 2 of 4 dead: now urgent (> 0.5 once the 3rd goes)
    lc_adapter.expire_scan(urgent, limit=1, manual=True)
    lc_adapter.append(urgent, 0, [NewRecord(b"x", expire_at=now + 1)])  # due at once, in an urgent namespace
    swept = lc_adapter.expire_scan(None)
    assert swept.expired_records == 1  # urgent's new entry; calm waits for off-peak hours
    # calm's expired record counts in its figures, but is still waiting for its scan:
    assert lc_adapter.shard_stats(calm, 0).expired_records == 1
    assert lc_adapter.expire_scan(None, manual=True).expired_records == 1  # an operator's request runs
    assert lc_adapter.expire_scan(None, manual=True).expired_records == 0


def test_node_wide_reclaim_retention_and_subscription_ttl(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    now = clock.now_ms()
    for name in ("r1", "r2"):
        make_ns(lc_adapter, name, ttl_ms=1_000, segment_ms=500)
        lc_adapter.append(name, 0, [NewRecord(b"x" * 100, timestamp=now)] * 20)
        clock.advance(600)
        append_one(lc_adapter, name, b"rolls")  # seals the first segment (older than segment_ms)
    clock.advance(5_000)
    reclaimed = lc_adapter.reclaim(None, manual=True)
    assert reclaimed.segments_deleted >= 2 and reclaimed.namespace is None
    for name in ("r1", "r2"):
        assert lc_adapter.shard_stats(name, 0).log_start_offset >= 20
    retention = lc_adapter.apply_retention(None)
    assert retention.operation == "retention" and not retention.more

    subs = make_ns(lc_adapter, "subs")
    lc_adapter.create_subscription(subs, "slow")
    lc_adapter.append(subs, 0, [NewRecord(b"m", expire_at=clock.now_ms() + 5)] * 5 + [NewRecord(b"live")])
    clock.advance(5)
    expired = lc_adapter.expire_subscriptions(None)
    assert (expired.messages_acknowledged, expired.cursors_moved) == (5, 1)
    assert lc_adapter.list_subscriptions(subs)[0].cursors == (4,)
    assert_verified(lc_adapter)


def test_a_bounded_sweep_gives_every_namespace_its_turn(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    now = clock.now_ms()
    names = ["a", "b", "c"]
    for name in names:
        make_ns(lc_adapter, name, ttl_ms=1_000, segment_ms=500)
        lc_adapter.append(name, 0, [NewRecord(b"x", timestamp=now)] * 3)
    clock.advance(600)
    for name in names:
        append_one(lc_adapter, name, b"rolls")  # seals the first segment
    clock.advance(401)  # the sealed segments are expired; the active ones neither expired nor idle

    def dropped() -> list[str]:
        return [n for n in names if lc_adapter.shard_stats(n, 0).log_start_offset >= 3]

    first = lc_adapter.reclaim(None, limit=1, manual=True)
    assert (first.segments_deleted, first.more, dropped()) == (1, True, ["a"])
    second = lc_adapter.reclaim(None, limit=1, manual=True)
    assert (second.segments_deleted, dropped()) == (1, ["a", "b"])  # resumes after "a", not from the top
    third = lc_adapter.reclaim(None, limit=1, manual=True)
    assert dropped() == names and third.more is False  # the pass ended at the last namespace
    assert lc_adapter.reclaim(None, limit=5, manual=True).segments_deleted == 0


def test_a_sweep_defers_rocksdb_compaction_of_dropped_ranges(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    now = clock.now_ms()
    for name in ("a", "b"):
        make_ns(lc_adapter, name, ttl_ms=1_000, segment_ms=500)
        lc_adapter.append(name, 0, [NewRecord(b"x", timestamp=now)] * 3)
    clock.advance(600)
    for name in ("a", "b"):
        append_one(lc_adapter, name, b"rolls")
    clock.advance(401)  # the sealed segments are expired; the active ones neither expired nor idle
    assert lc_adapter.reclaim(None, manual=True).segments_deleted == 2
    compactions = lc_adapter.runtime.range_compactions  # type: ignore[attr-defined]
    assert compactions.waiting() == 2  # both shards wait for their compaction
    assert_verified(lc_adapter)  # range tombstones not yet compacted: reads and indexes are still right
    clock.advance(60_000)
    lc_adapter.reclaim(None, manual=True)
    assert compactions.waiting() == 0
    lc_adapter.reclaim("a", manual=True)  # a per-namespace call compacts at once, as before
    assert compactions.waiting() == 0
