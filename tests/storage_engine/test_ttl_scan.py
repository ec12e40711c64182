"""Layer 2 of expiry (DESIGN §3): the TTL-index scan, on every adapter."""

from __future__ import annotations

from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.policies.policy import NodePolicy
from storage_engine.rules.cleaning import hour_of
from tests.storage_engine.conftest import OpenAdapter
from tests.storage_engine.lifecycle_util import FAR_FUTURE, append_one, assert_verified, make_ns, offsets


def test_scan_unindexes_expired_records_and_marks_them_dead(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter)
    now = clock.now_ms()
    append_one(lc_adapter, ns, b"a", key=b"a", tags=("x", "y"), expire_at=now + 10)
    append_one(lc_adapter, ns, b"b", tags=("x",), expire_at=now + 10)
    append_one(lc_adapter, ns, b"c", key=b"c", tags=("x",))
    clock.advance(10)
    result = lc_adapter.expire_scan(ns)
    assert (result.operation, result.expired_records, result.more) == ("expire_scan", 2, False)
    assert result.index_entries_deleted == 6  # a: 2 tags + key + ttl; b: tag + ttl
    assert lc_adapter.read_key(ns, 0, b"a") is None
    assert [r.offset for r in lc_adapter.read_tag(ns, 0, "x").records] == [2]
    stats = lc_adapter.shard_stats(ns, 0)
    assert (stats.record_count, stats.live_count, stats.expired_records) == (3, 1, 2)
    assert [s.live_count for s in lc_adapter.list_segments(ns, 0)] == [1]
    assert lc_adapter.expire_scan(ns).expired_records == 0  # safe to call again
    counters = lc_adapter.stats().counters
    assert counters["ttl_scan_expired_records_total"] == 2 and counters["ttl_scan_runs_total"] == 2
    assert_verified(lc_adapter)


def test_scan_stops_at_the_first_unexpired_entry(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter)
    now = clock.now_ms()
    for deadline in (now + 1000, now + 10, now + 30, now + 10, now + 2000):
        append_one(lc_adapter, ns, expire_at=deadline)
    for _ in range(50):
        append_one(lc_adapter, ns)  # stored, never expiring: the scan never looks at them
    clock.advance(30)
    result = lc_adapter.expire_scan(ns)
    assert (result.expired_records, result.scanned) == (3, 3)  # cost follows the expired entries
    assert lc_adapter.shard_stats(ns, 0).live_count == 52
    assert_verified(lc_adapter)
    clock.advance(970)
    result = lc_adapter.expire_scan(ns)
    assert (result.expired_records, result.scanned) == (1, 1)
    assert offsets(lc_adapter, ns)[:1] == [4]
    assert_verified(lc_adapter)


def test_key_entry_is_kept_when_it_points_at_a_newer_record(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter)
    now = clock.now_ms()
    append_one(lc_adapter, ns, b"old", key=b"k", expire_at=now + 10)
    append_one(lc_adapter, ns, b"new", key=b"k", expire_at=now + 20)
    clock.advance(10)
    assert lc_adapter.expire_scan(ns).index_entries_deleted == 1  # only its TTL entry
    record = lc_adapter.read_key(ns, 0, b"k")
    assert record is not None and record.value == b"new"
    assert_verified(lc_adapter)
    clock.advance(10)
    assert lc_adapter.expire_scan(ns).index_entries_deleted == 2  # key (points here) + ttl
    assert lc_adapter.read_key(ns, 0, b"k") is None
    assert_verified(lc_adapter)


def test_scan_works_in_batches_up_to_its_cap(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, scan_batch_size=3, max_delete_per_scan=5)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(b"%d" % i, expire_at=now + 1 + i % 4) for i in range(12)])
    lc_adapter.append(ns, 0, [NewRecord(b"keep")])
    clock.advance(10)
    first = lc_adapter.expire_scan(ns)
    assert (first.expired_records, first.more) == (5, True)
    second = lc_adapter.expire_scan(ns, limit=2)
    assert (second.expired_records, second.more) == (2, True)
    third = lc_adapter.expire_scan(ns, limit=1000)  # the policy cap still applies
    assert (third.expired_records, third.more) == (5, False)
    assert lc_adapter.shard_stats(ns, 0).live_count == 1
    assert_verified(lc_adapter)


def test_scan_of_one_shard_leaves_the_others(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, shards=2)
    other = make_ns(lc_adapter, "other")
    now = clock.now_ms()
    for shard in (0, 1):
        append_one(lc_adapter, ns, shard=shard, expire_at=now + 1)
        append_one(lc_adapter, ns, shard=shard)
    append_one(lc_adapter, other, expire_at=now + 1)
    clock.advance(1)
    assert lc_adapter.expire_scan(ns, shard=1).expired_records == 1
    # Expired records are not live whether the scan marked them dead yet or not (DESIGN §3 "Figures").
    assert [lc_adapter.shard_stats(ns, s).live_count for s in (0, 1)] == [1, 1]
    assert lc_adapter.expire_scan(ns).expired_records == 1  # shard 0's record was left for its own scan
    assert lc_adapter.shard_stats(other, 0).expired_records == 1
    assert lc_adapter.expire_scan(other).expired_records == 1
    assert_verified(lc_adapter)


def test_outside_off_peak_hours_only_urgent_work_runs(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    hour = hour_of(clock.now_ms())
    lc_adapter.set_node_policy(NodePolicy(off_peak_hours=f"{(hour + 2) % 24:02d}", urgent_expired_ratio=0.5))
    ns = make_ns(lc_adapter)
    now = clock.now_ms()
    append_one(lc_adapter, ns, expire_at=now + 1)
    append_one(lc_adapter, ns)
    append_one(lc_adapter, ns)
    clock.advance(1)
    skipped = lc_adapter.expire_scan(ns)
    assert (skipped.skipped, skipped.expired_records, skipped.more) == ("off_peak", 0, True)
    assert lc_adapter.expire_scan(ns, manual=True).expired_records == 1  # an operator's request runs
    append_one(lc_adapter, ns, expire_at=now + 2)
    clock.advance(1)
    assert lc_adapter.expire_scan(ns).skipped == "off_peak"  # 2 of 4 expired: not above 0.5
    lc_adapter.set_node_policy(NodePolicy(off_peak_hours=f"{hour:02d}"))
    assert lc_adapter.expire_scan(ns).expired_records == 1
    assert_verified(lc_adapter)


def test_urgent_expired_ratio_overrides_off_peak(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    hour = hour_of(clock.now_ms())
    lc_adapter.set_node_policy(NodePolicy(off_peak_hours=f"{(hour + 2) % 24:02d}", urgent_expired_ratio=0.5))
    ns = make_ns(lc_adapter)
    now = clock.now_ms()
    for _ in range(3):
        append_one(lc_adapter, ns, expire_at=now + 1)
    append_one(lc_adapter, ns)
    clock.advance(1)
    lc_adapter.drain_read_checks()
    assert offsets(lc_adapter, ns) == [3]
    lc_adapter.drain_read_checks()  # the read marked 3 of 4 dead: 0.75 > 0.5 is urgent now
    assert lc_adapter.shard_stats(ns, 0).expired_ratio == 0.75
    append_one(lc_adapter, ns, expire_at=now + 2)
    clock.advance(1)
    assert lc_adapter.expire_scan(ns).expired_records == 1
    assert_verified(lc_adapter)


def test_scan_is_paced_by_delete_rate(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    lc_adapter.set_node_policy(NodePolicy(delete_rate_per_s=4))
    ns = make_ns(lc_adapter, scan_batch_size=4)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(b"x", expire_at=now + 1) for _ in range(10)] + [NewRecord(b"keep")])
    clock.advance(1)
    first = lc_adapter.expire_scan(ns)
    assert (first.expired_records, first.more) == (4, True)  # one second's worth of deletions
    assert lc_adapter.expire_scan(ns).expired_records == 0  # no tokens until time passes
    clock.advance(1000)
    assert lc_adapter.expire_scan(ns).expired_records == 4
    clock.advance(1000)
    last = lc_adapter.expire_scan(ns)
    assert (last.expired_records, last.more) == (2, False)
    assert_verified(lc_adapter)


def test_dead_marks_survive_a_reopen(
    persistent_adapter_name: str, open_adapter: OpenAdapter, clock: ManualClock
) -> None:
    adapter = open_adapter(lifecycle_worker=False)
    ns = make_ns(adapter, segment_bytes=1024)
    now = clock.now_ms()
    for i in range(30):
        append_one(
            adapter, ns, b"x" * 100, key=b"k%d" % (i % 4), tags=("t",), expire_at=now + 5 if i % 3 else FAR_FUTURE
        )
    clock.advance(5)
    assert adapter.expire_scan(ns).expired_records == 20
    before = adapter.shard_stats(ns, 0)
    adapter.close()
    adapter = open_adapter(lifecycle_worker=False)
    assert adapter.shard_stats(ns, 0) == before
    assert adapter.expire_scan(ns).expired_records == 0
    assert offsets(adapter, ns) == list(range(0, 30, 3))
    assert_verified(adapter)
