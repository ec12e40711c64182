"""Layer 3 of expiry (DESIGN §3): whole-segment drops, rewrites of mostly dead sealed
segments and RocksDB compaction, on every adapter."""

from __future__ import annotations

from pathlib import Path

from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.policies.policy import NodePolicy
from storage_engine.rules.cleaning import hour_of
from tests.storage_engine.conftest import OpenAdapter
from tests.storage_engine.lifecycle_util import FAR_FUTURE, append_one, assert_verified, make_ns, offsets

VALUE = b"r" * 300


def test_a_fully_expired_sealed_segment_is_dropped_whole(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, segment_bytes=1024)
    now = clock.now_ms()
    for i in range(6):
        append_one(lc_adapter, ns, VALUE, key=b"k%d" % i, tags=("t",), expire_at=now + 100)
    for _ in range(3):
        append_one(lc_adapter, ns, VALUE)
    clock.advance(100)
    segments = lc_adapter.list_segments(ns, 0)
    expired = [s for s in segments[:-1] if s.last_offset < 6]
    result = lc_adapter.reclaim(ns)  # without a scan first: the drop unindexes them itself
    assert result.segments_deleted == len(expired) > 0
    assert result.records_removed == sum(s.record_count for s in expired)
    assert result.index_entries_deleted > 0
    start = lc_adapter.shard_stats(ns, 0).log_start_offset
    assert start == expired[-1].last_offset + 1
    assert offsets(lc_adapter, ns) == list(range(6, 9))
    assert lc_adapter.read_tag(ns, 0, "t").records == ()
    assert lc_adapter.reclaim(ns).segments_deleted == 0  # safe to call again
    assert_verified(lc_adapter)


def test_segments_expiring_by_the_namespace_ttl_go_whole(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, segment_bytes=1024, ttl_ms=10_000)
    for _ in range(6):
        append_one(lc_adapter, ns, VALUE, key=b"k")
    clock.advance(5_000)
    for _ in range(4):
        append_one(lc_adapter, ns, VALUE)
    clock.advance(5_000)  # the first six records are past timestamp + ttl_ms
    segments = lc_adapter.list_segments(ns, 0)
    old = [s for s in segments[:-1] if s.last_offset < 6]
    result = lc_adapter.reclaim(ns)
    assert result.segments_deleted == len(old) > 0
    assert lc_adapter.read_key(ns, 0, b"k") is None
    assert offsets(lc_adapter, ns) == list(range(6, 10))
    stats = lc_adapter.shard_stats(ns, 0)
    assert stats.expired_records == 0 or stats.log_start_offset > 0
    clock.advance(5_000)  # now everything is expired, but the active segment stays
    lc_adapter.reclaim(ns)
    assert len(lc_adapter.list_segments(ns, 0)) >= 1 and offsets(lc_adapter, ns) == []
    assert lc_adapter.shard_stats(ns, 0).end_offset == 10
    assert_verified(lc_adapter)


def test_a_fully_expired_segment_in_the_middle_leaves_a_gap(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, segment_bytes=1024)
    now = clock.now_ms()
    for _ in range(3):
        append_one(lc_adapter, ns, VALUE)
    for _ in range(6):
        append_one(lc_adapter, ns, VALUE, expire_at=now + 10)
    for _ in range(3):
        append_one(lc_adapter, ns, VALUE)
    clock.advance(10)
    assert lc_adapter.expire_scan(ns).expired_records == 6
    before = lc_adapter.list_segments(ns, 0)
    result = lc_adapter.reclaim(ns)
    middle = [s for s in before[:-1] if s.record_count and s.live_count == 0]
    assert result.segments_deleted == len(middle) > 0
    stats = lc_adapter.shard_stats(ns, 0)
    assert (stats.log_start_offset, stats.end_offset) == (0, 12)  # the log start does not move
    assert offsets(lc_adapter, ns) == [0, 1, 2, 9, 10, 11]
    assert [r.offset for r in lc_adapter.read(ns, 0, 4, max_records=1).records] == [9]
    assert_verified(lc_adapter)


def test_a_mostly_dead_segment_is_rewritten_with_offsets_unchanged(
    lc_adapter: StorageAdapter, clock: ManualClock
) -> None:
    ns = make_ns(lc_adapter, segment_bytes=4096, reclaim_dead_ratio=0.5)
    now = clock.now_ms()
    records = [
        NewRecord(VALUE, key=b"k%d" % i, tags=(f"t{i % 2}",), expire_at=FAR_FUTURE if i % 4 == 0 else now + 10)
        for i in range(10)
    ]
    lc_adapter.append(ns, 0, records)
    lc_adapter.append(ns, 0, [NewRecord(VALUE * 12)])  # seals the first segment
    clock.advance(10)
    assert lc_adapter.expire_scan(ns).expired_records == 7
    [first, _] = lc_adapter.list_segments(ns, 0)
    result = lc_adapter.reclaim(ns)
    assert (result.segments_rewritten, result.records_removed, result.segments_deleted) == (1, 7, 0)
    assert result.bytes_reclaimed > 0
    [rewritten, _] = lc_adapter.list_segments(ns, 0)
    assert (rewritten.base_offset, rewritten.last_offset) == (first.base_offset, first.last_offset)
    assert (rewritten.record_count, rewritten.live_count) == (3, 3)
    assert rewritten.size_bytes < first.size_bytes
    assert offsets(lc_adapter, ns) == [0, 4, 8, 10]
    assert [r.offset for r in lc_adapter.read(ns, 0, 1, max_records=1).records] == [4]
    assert lc_adapter.read_key(ns, 0, b"k4").offset == 4  # type: ignore[union-attr]
    assert [r.offset for r in lc_adapter.read_tag(ns, 0, "t0").records] == [0, 4, 8]
    assert lc_adapter.shard_stats(ns, 0).expired_records == 0
    assert lc_adapter.reclaim(ns).segments_rewritten == 0
    assert_verified(lc_adapter)


def test_a_rewrite_drops_expired_records_the_scan_has_not_seen(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, segment_bytes=4096, reclaim_dead_ratio=0.3)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(VALUE, expire_at=now + 10 if i < 5 else None) for i in range(8)])
    lc_adapter.append(ns, 0, [NewRecord(VALUE * 12)])
    clock.advance(10)
    assert lc_adapter.expire_scan(ns, limit=3).expired_records == 3  # 3 of 8 dead: above 0.3
    result = lc_adapter.reclaim(ns)
    assert (result.segments_rewritten, result.expired_records, result.records_removed) == (1, 2, 5)
    assert offsets(lc_adapter, ns) == [5, 6, 7, 8]
    assert lc_adapter.expire_scan(ns).expired_records == 0
    assert_verified(lc_adapter)


def test_dead_fraction_at_the_threshold_is_left_alone(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, segment_bytes=4096, reclaim_dead_ratio=0.5)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(VALUE, expire_at=now + 10 if i % 2 else None) for i in range(8)])
    lc_adapter.append(ns, 0, [NewRecord(VALUE * 12)])
    clock.advance(10)
    lc_adapter.expire_scan(ns)
    assert lc_adapter.reclaim(ns).segments_rewritten == 0
    assert_verified(lc_adapter)


def test_reclaim_is_bounded_and_paced(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, segment_bytes=1024)
    now = clock.now_ms()
    for _ in range(12):
        append_one(lc_adapter, ns, VALUE, expire_at=now + 1)
    append_one(lc_adapter, ns, VALUE)
    clock.advance(1)
    first = lc_adapter.reclaim(ns, limit=2)
    assert (first.segments_deleted, first.more) == (2, True)
    rest = lc_adapter.reclaim(ns)
    assert rest.segments_deleted > 0 and not rest.more
    assert offsets(lc_adapter, ns) == [12]
    hour = hour_of(clock.now_ms())
    lc_adapter.set_node_policy(NodePolicy(off_peak_hours=f"{(hour + 1) % 24:02d}"))
    assert lc_adapter.reclaim(ns).skipped == "off_peak"
    assert_verified(lc_adapter)


def test_rewrites_are_paced_by_reclaim_bytes(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    lc_adapter.set_node_policy(NodePolicy(reclaim_bytes_per_s=1024))
    ns = make_ns(lc_adapter, segment_bytes=4096)
    now = clock.now_ms()
    for _ in range(3):
        lc_adapter.append(ns, 0, [NewRecord(VALUE, expire_at=now + 1 if i else None) for i in range(8)])
    lc_adapter.append(ns, 0, [NewRecord(VALUE * 12)])
    clock.advance(1)
    lc_adapter.expire_scan(ns)
    first = lc_adapter.reclaim(ns)
    assert (first.segments_rewritten, first.more) == (1, True)  # one segment's bytes exhaust a second
    clock.advance(10_000)
    assert lc_adapter.reclaim(ns).segments_rewritten == 1
    assert_verified(lc_adapter)


def test_reclaimed_state_survives_a_reopen(
    persistent_adapter_name: str, open_adapter: OpenAdapter, clock: ManualClock, tmp_path: Path
) -> None:
    adapter = open_adapter(lifecycle_worker=False)
    ns = make_ns(adapter, segment_bytes=4096)
    now = clock.now_ms()
    for batch in range(4):
        adapter.append(
            ns, 0, [NewRecord(VALUE, key=b"k%d" % i, expire_at=now + 1 if (i + batch) % 3 else None) for i in range(8)]
        )
    adapter.append(ns, 0, [NewRecord(VALUE * 12)])
    clock.advance(1)
    adapter.expire_scan(ns)
    result = adapter.reclaim(ns)
    assert result.segments_rewritten + result.segments_deleted > 0
    expected = offsets(adapter, ns)
    before = adapter.list_segments(ns, 0)
    adapter.close()
    adapter = open_adapter(lifecycle_worker=False)
    assert offsets(adapter, ns) == expected
    assert [(s.base_offset, s.record_count, s.live_count) for s in adapter.list_segments(ns, 0)] == [
        (s.base_offset, s.record_count, s.live_count) for s in before
    ]
    assert adapter.append(ns, 0, [NewRecord(b"next")]).base_offset == 33
    assert not list(tmp_path.rglob("*.cleaned")) and not list(tmp_path.rglob("*.swap"))
    assert_verified(adapter)
