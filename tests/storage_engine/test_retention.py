"""Kafka retention (DESIGN §3) on every adapter; ``.deleted`` files on the segment adapter."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage_engine.api import NewRecord, SegmentState, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.errors import OffsetOutOfRangeError
from storage_engine.policies.policy import DAY_MS, NamespacePolicy, NodePolicy
from storage_engine.rules.retention import deletable_segments
from tests.storage_engine.conftest import OpenAdapter
from tests.storage_engine.lifecycle_util import append_one, assert_verified, make_ns, offsets

VALUE = b"x" * 300


def fill(adapter: StorageAdapter, ns: str, count: int, **fields: object) -> None:
    for _ in range(count):
        append_one(adapter, ns, VALUE, **fields)  # type: ignore[arg-type]


def test_size_retention_deletes_the_oldest_segments_down_to_the_limit(lc_adapter: StorageAdapter) -> None:
    ns = make_ns(lc_adapter, segment_bytes=1024)
    fill(lc_adapter, ns, 30)
    before = lc_adapter.list_segments(ns, 0)
    limit = sum(s.size_bytes for s in before) // 2
    lc_adapter.update_namespace(ns, NamespacePolicy(retention_ms=None, segment_bytes=1024, retention_bytes=limit))
    result = lc_adapter.apply_retention(ns)
    after = lc_adapter.list_segments(ns, 0)
    assert result.segments_deleted == len(before) - len(after) > 0
    assert [s.base_offset for s in after] == [s.base_offset for s in before[result.segments_deleted :]]
    total = sum(s.size_bytes for s in after)
    assert total >= limit  # what stays is at least retention_bytes ...
    assert total - after[0].size_bytes < limit  # ... and one more deletion would go below it
    # Freed now, or still on disk as .deleted files waiting for file_delete_delay_ms (see test_freed_bytes).
    dropped = sum(s.size_bytes for s in before[: result.segments_deleted])
    assert result.bytes_reclaimed + result.pending_delete_bytes == dropped
    assert offsets(lc_adapter, ns) == list(range(after[0].base_offset, 30))
    assert lc_adapter.apply_retention(ns).segments_deleted == 0  # safe to call again
    assert_verified(lc_adapter)


def test_nothing_is_deleted_under_the_size_limit(lc_adapter: StorageAdapter) -> None:
    ns = make_ns(lc_adapter, segment_bytes=1024)
    fill(lc_adapter, ns, 12)
    total = lc_adapter.shard_stats(ns, 0).size_bytes
    lc_adapter.update_namespace(ns, NamespacePolicy(retention_ms=None, segment_bytes=1024, retention_bytes=total + 1))
    assert lc_adapter.apply_retention(ns).segments_deleted == 0
    assert offsets(lc_adapter, ns) == list(range(12))
    assert_verified(lc_adapter)


def test_time_retention_stops_at_a_segment_that_is_not_old_enough(
    lc_adapter: StorageAdapter, clock: ManualClock
) -> None:
    ns = make_ns(lc_adapter, segment_bytes=1024, retention_ms=DAY_MS)
    now = clock.now_ms()
    fill(lc_adapter, ns, 4, timestamp=now - 2 * DAY_MS)  # old
    fill(lc_adapter, ns, 4, timestamp=now)  # a young segment ...
    fill(lc_adapter, ns, 4, timestamp=now - 2 * DAY_MS)  # ... blocks these old ones
    segments = lc_adapter.list_segments(ns, 0)
    old_prefix = [s for s in segments if s.last_offset < 4]
    result = lc_adapter.apply_retention(ns)
    assert result.segments_deleted == len(old_prefix) > 0
    assert lc_adapter.shard_stats(ns, 0).log_start_offset == segments[len(old_prefix)].base_offset
    assert offsets(lc_adapter, ns)[0] == lc_adapter.shard_stats(ns, 0).log_start_offset
    assert 8 in offsets(lc_adapter, ns)  # old records behind the young segment survive
    assert_verified(lc_adapter)


def test_compact_only_deletes_nothing_by_time(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, segment_bytes=1024, retention_ms=1000, cleanup_policy="compact")
    old = clock.now_ms() - DAY_MS
    for i in range(8):
        append_one(lc_adapter, ns, VALUE, key=b"k%d" % i, timestamp=old)
    assert lc_adapter.apply_retention(ns).segments_deleted == 0
    assert len(offsets(lc_adapter, ns)) == 8
    policy = NamespacePolicy(segment_bytes=1024, retention_ms=1000, cleanup_policy="compact,delete")
    lc_adapter.update_namespace(ns, policy)
    assert lc_adapter.apply_retention(ns).segments_deleted > 0
    assert_verified(lc_adapter)


def test_deleting_everything_keeps_the_end_offset(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, segment_bytes=1024, retention_ms=1000)
    for i in range(7):
        append_one(lc_adapter, ns, VALUE, key=b"k%d" % i, tags=("t",))
    clock.advance(1001)
    result = lc_adapter.apply_retention(ns, shard=0)
    assert (result.rolled, result.log_start_offset) == (1, 7)
    stats = lc_adapter.shard_stats(ns, 0)
    assert (stats.log_start_offset, stats.end_offset, stats.record_count, stats.segment_count) == (7, 7, 0, 1)
    [active] = lc_adapter.list_segments(ns, 0)
    assert (active.base_offset, active.state, active.record_count) == (7, SegmentState.ACTIVE, 0)
    assert lc_adapter.read_key(ns, 0, b"k1") is None
    assert lc_adapter.read_tag(ns, 0, "t").records == ()
    assert lc_adapter.apply_retention(ns).segments_deleted == 0  # an empty active segment is never deleted
    assert append_one(lc_adapter, ns, b"next") == 7
    assert [r.value for r in lc_adapter.read(ns, 0, 7).records] == [b"next"]
    assert_verified(lc_adapter)


def test_a_read_below_the_log_start_is_out_of_range(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, segment_bytes=1024, retention_ms=1000)
    fill(lc_adapter, ns, 6)
    clock.advance(1001)
    fill(lc_adapter, ns, 1)
    lc_adapter.apply_retention(ns)
    start = lc_adapter.shard_stats(ns, 0).log_start_offset
    assert start == 6
    with pytest.raises(OffsetOutOfRangeError) as err:
        lc_adapter.read(ns, 0, 0)
    assert (err.value.log_start_offset, err.value.end_offset) == (6, 7)
    assert offsets(lc_adapter, ns) == [6]
    assert_verified(lc_adapter)


def test_zero_retention_deletes_every_segment_older_than_now(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    """``retention_ms = 0`` (Kafka accepts it): a segment is due as soon as ``now − max_timestamp > 0``."""
    ns = make_ns(lc_adapter, segment_bytes=1024, retention_ms=0)
    now = clock.now_ms()
    fill(lc_adapter, ns, 8, timestamp=now - 1)
    fill(lc_adapter, ns, 4, timestamp=now)  # 0 ms old: not yet past a retention of 0
    segments = lc_adapter.list_segments(ns, 0)
    past = [s for s in segments if s.max_timestamp is not None and s.max_timestamp < now]
    assert 0 < len(past) < len(segments)
    result = lc_adapter.apply_retention(ns)
    assert result.segments_deleted == len(past) and result.rolled == 0
    assert lc_adapter.shard_stats(ns, 0).log_start_offset == segments[len(past)].base_offset
    clock.advance(1)  # now every record is 1 ms old: everything goes, the end offset stays
    result = lc_adapter.apply_retention(ns, shard=0)
    assert result.rolled == 1 and result.log_start_offset == 12
    stats = lc_adapter.shard_stats(ns, 0)
    assert (stats.log_start_offset, stats.end_offset, stats.record_count) == (12, 12, 0)
    assert_verified(lc_adapter)


def test_zero_retention_in_the_plan(clock: ManualClock) -> None:
    from storage_engine.api import SegmentInfo

    def seg(base: int, ts: int, state: SegmentState = SegmentState.SEALED) -> SegmentInfo:
        return SegmentInfo("n", 0, base, base, 1, 1, 100, ts, ts, None, True, state, 0, 0)

    policy = NamespacePolicy(retention_ms=0)
    plan = deletable_segments([seg(0, 9_999), seg(1, 10_000), seg(2, 10_000, SegmentState.ACTIVE)], policy, 10_000)
    assert (plan.count, plan.reasons, plan.roll) == (1, ("time",), False)
    everything = [seg(0, 9_998), seg(1, 9_999, SegmentState.ACTIVE)]
    plan = deletable_segments(everything, policy, 10_000)
    assert (plan.count, plan.roll) == (2, True)  # the active one too: roll first, keep the end offset


def test_the_plan_is_a_contiguous_prefix(clock: ManualClock) -> None:
    from storage_engine.api import SegmentInfo

    def seg(base: int, size: int, ts: int | None, state: SegmentState = SegmentState.SEALED) -> SegmentInfo:
        count = 0 if ts is None else 1
        return SegmentInfo("n", 0, base, base + count - 1, count, count, size, ts, ts, None, True, state, 0, 0)

    now = 10_000
    policy = NamespacePolicy(retention_ms=1000, retention_bytes=250)
    segments = [seg(0, 100, 0), seg(1, 100, 9_500), seg(2, 100, 0), seg(3, 0, None, SegmentState.ACTIVE)]
    plan = deletable_segments(segments, policy, now)
    assert (plan.count, plan.reasons, plan.roll) == (1, ("time",), False)  # size: 300 - 100 < 250 after one
    everything = [seg(0, 100, 0), seg(1, 100, 0, SegmentState.ACTIVE)]
    assert deletable_segments(everything, policy, now).roll
    assert deletable_segments(everything, NamespacePolicy(retention_ms=1000, cleanup_policy="compact"), now).count == 0


def test_deleted_files_are_renamed_and_removed_after_the_delay(tmp_path: Path, clock: ManualClock) -> None:
    from storage_engine import open_engine
    from storage_engine.config import EngineConfig

    config = EngineConfig(
        data_dir=tmp_path / "data",
        adapter="segment",
        lifecycle_worker=False,
        disk_capacity_bytes=1 << 40,
        node_policy=NodePolicy(file_delete_delay_ms=60_000),
    )
    engine = open_engine(config, clock)
    try:
        ns = make_ns(engine, segment_bytes=1024, retention_ms=100_000)
        for _ in range(6):
            engine.append(ns, 0, [NewRecord(VALUE)])
        clock.advance(100_001)
        engine.append(ns, 0, [NewRecord(VALUE)])  # young, and in a segment of its own
        directory = tmp_path / "data" / "segments" / ns / "0"
        result = engine.apply_retention(ns)
        names = sorted(p.name for p in directory.iterdir())
        assert result.segments_deleted == 3 and result.files_removed == 0
        assert [n for n in names if n.endswith(".log.deleted")] == [f"{b:020d}.log.deleted" for b in (0, 2, 4)]
        assert [n for n in names if n.endswith(".log")] == [f"{6:020d}.log"]
        clock.advance(59_999)
        assert engine.apply_retention(ns).files_removed == 0
        clock.advance(1)
        assert engine.apply_retention(ns).files_removed == 3  # a later call removes them
        assert sorted(p.name for p in directory.iterdir()) == [f"{6:020d}.log"]
        assert engine.stats().counters["files_removed_total"] == 3
        assert_verified(engine)
    finally:
        engine.close()


def test_leftover_deleted_files_are_removed_on_open(
    persistent_adapter_name: str, open_adapter: OpenAdapter, clock: ManualClock
) -> None:
    adapter = open_adapter(lifecycle_worker=False)
    ns = make_ns(adapter, segment_bytes=1024, retention_ms=1000)
    fill(adapter, ns, 6)
    clock.advance(1001)
    fill(adapter, ns, 1)
    adapter.apply_retention(ns)
    adapter.close()
    adapter = open_adapter(lifecycle_worker=False)
    assert offsets(adapter, ns) == [6]
    assert adapter.shard_stats(ns, 0).log_start_offset == 6
    data = Path(adapter.config.data_dir)  # type: ignore[attr-defined]
    assert not list(data.rglob("*.deleted"))
    assert_verified(adapter)
