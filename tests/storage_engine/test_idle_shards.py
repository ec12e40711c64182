"""Idle shards (DESIGN §3): a shard nobody writes to still expires, retains and compacts.

Appends roll segments, so every lifecycle step first seals an active segment the next
append would roll (older than ``segment_ms`` by its first record's time; for a compacted
namespace ``max_compaction_lag_ms`` when smaller) or whose every record is past its
deadline; the end offset is kept and an empty active segment is never sealed or dropped.
Every adapter, the injected clock, no sleeping.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from storage_engine.api import LifecycleResult, NewRecord, SegmentInfo, SegmentState, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.policies.policy import DAY_MS, HOUR_MS, NamespacePolicy, NodePolicy
from storage_engine.rules.rolling import idle_segment_due, roll_after_ms
from tests.storage_engine.conftest import OpenAdapter
from tests.storage_engine.lifecycle_util import append_one, assert_verified, make_ns, read_all

TTL_MS = 60_000
SEGMENT_MS = 30_000
LAG_MS = 60_000


def only_active(adapter: StorageAdapter, ns: str, shard: int = 0) -> SegmentInfo:
    [active] = adapter.list_segments(ns, shard)
    assert active.state is SegmentState.ACTIVE
    return active


def assert_emptied_keeping_end(adapter: StorageAdapter, ns: str, end: int, shard: int = 0) -> None:
    """Everything gone, the end offset kept, and the next append gets the old end offset."""
    stats = adapter.shard_stats(ns, shard)
    assert (stats.record_count, stats.expired_records, stats.expired_bytes) == (0, 0, 0)
    assert (stats.log_start_offset, stats.end_offset) == (end, end)
    active = only_active(adapter, ns, shard)
    assert (active.base_offset, active.record_count) == (end, 0)
    assert append_one(adapter, ns, b"next", shard=shard) == end
    assert [r.value for r in adapter.read(ns, shard, end).records] == [b"next"]
    assert_verified(adapter, ns)


def fill(adapter: StorageAdapter, ns: str, batches: int, per_batch: int, shard: int = 0, **fields: Any) -> int:
    for _ in range(batches):
        adapter.append(ns, shard, [NewRecord(b"x" * 50, **fields)] * per_batch)
    return adapter.shard_stats(ns, shard).end_offset


# -- the predicate ---------------------------------------------------------------------------------
def segment(state: SegmentState = SegmentState.ACTIVE, count: int = 10, **fields: Any) -> SegmentInfo:
    values: dict[str, Any] = {
        "namespace": "n",
        "shard": 0,
        "base_offset": 0,
        "last_offset": count - 1,
        "record_count": count,
        "live_count": count,
        "size_bytes": 100 * count,
        "min_timestamp": 1_000 if count else None,
        "max_timestamp": 2_000 if count else None,
        "max_expire_at": None,
        "has_unbounded": True,
        "state": state,
        "created_at": 0,
        "modified_at": 0,
        "first_timestamp": 1_500 if count else None,
    }
    values.update(fields)
    return SegmentInfo(**values)


def test_the_idle_rule() -> None:
    policy = NamespacePolicy(segment_ms=SEGMENT_MS, ttl_ms=TTL_MS)
    # Age by the first record's time (not the smallest timestamp), strictly past segment_ms.
    assert not idle_segment_due(segment(), policy, 1_500 + SEGMENT_MS)
    assert idle_segment_due(segment(), policy, 1_500 + SEGMENT_MS + 1)
    # Every record past its deadline (max_timestamp + ttl_ms), whatever the age rule says.
    late = NamespacePolicy(segment_ms=7 * DAY_MS, ttl_ms=TTL_MS)
    assert not idle_segment_due(segment(), late, 2_000 + TTL_MS - 1)
    assert idle_segment_due(segment(), late, 2_000 + TTL_MS)
    # Explicit deadlines on every record: the largest one decides.
    explicit = segment(max_expire_at=5_000, has_unbounded=False)
    assert not idle_segment_due(explicit, NamespacePolicy(), 4_999)
    assert idle_segment_due(explicit, NamespacePolicy(), 5_000)
    assert not idle_segment_due(segment(max_expire_at=5_000), NamespacePolicy(), 6 * DAY_MS)  # one never expires
    # Never an empty or an already sealed segment.
    assert not idle_segment_due(segment(count=0), policy, 100 * DAY_MS)
    assert not idle_segment_due(segment(SegmentState.SEALED), policy, 100 * DAY_MS)


def test_a_compacted_namespace_rolls_by_its_max_lag() -> None:
    """Kafka's maxSegmentMs: dirty data never waits in the active segment past max_compaction_lag_ms."""
    assert roll_after_ms(NamespacePolicy(segment_ms=DAY_MS)) == DAY_MS
    assert roll_after_ms(NamespacePolicy(segment_ms=DAY_MS, max_compaction_lag_ms=LAG_MS)) == DAY_MS  # delete only
    compacted = NamespacePolicy(cleanup_policy="compact", segment_ms=DAY_MS, max_compaction_lag_ms=LAG_MS)
    assert roll_after_ms(compacted) == LAG_MS
    assert roll_after_ms(replace(compacted, segment_ms=1_000)) == 1_000  # the smaller of the two
    assert roll_after_ms(replace(compacted, max_compaction_lag_ms=0)) == DAY_MS  # 0 (always due) does not roll
    assert idle_segment_due(segment(), compacted, 1_500 + LAG_MS + 1)
    assert not idle_segment_due(segment(), compacted, 1_500 + LAG_MS)


# -- TTL ---------------------------------------------------------------------------------------------
def test_ttl_only_an_idle_shard_is_reclaimed(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    """The reported case: 1,242 records, a 1-minute TTL, 30 s segments, then no writes."""
    ns = make_ns(lc_adapter, ttl_ms=TTL_MS, segment_ms=SEGMENT_MS)
    end = fill(lc_adapter, ns, 9, 138)
    assert end == 1_242
    only_active(lc_adapter, ns)
    clock.advance(TTL_MS + 1)
    stats = lc_adapter.shard_stats(ns, 0)
    assert stats.expired_records == stats.record_count == end
    result = lc_adapter.reclaim(ns)  # as scheduled: no manual flag
    assert (result.skipped, result.rolled, result.segments_deleted, result.records_removed) == (None, 1, 1, end)
    assert result.log_start_offset is None  # a whole namespace was named
    assert lc_adapter.reclaim(ns).rolled == 0  # the empty active segment stays as it is
    assert_emptied_keeping_end(lc_adapter, ns, end)


def test_every_record_past_its_deadline_seals_a_young_segment(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter)  # segment_ms: 7 days, far away
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(b"x", expire_at=now + 1_000 + i) for i in range(20)])
    clock.advance(1_018)  # the last record's deadline is 1 ms away
    assert lc_adapter.reclaim(ns).rolled == 0
    assert only_active(lc_adapter, ns).record_count == 20
    clock.advance(1)
    result = lc_adapter.reclaim(ns)
    assert (result.rolled, result.segments_deleted) == (1, 1)
    assert_emptied_keeping_end(lc_adapter, ns, 20)


def test_a_record_that_never_expires_keeps_a_young_segment_active(
    lc_adapter: StorageAdapter, clock: ManualClock
) -> None:
    # The deadline rule alone: 5 of 6 expired would pass the expired-share rule (test_expired_share_roll.py).
    ns = make_ns(lc_adapter, segment_expired_roll_ratio=None)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(b"x", expire_at=now + 10)] * 5 + [NewRecord(b"forever")])
    clock.advance(DAY_MS)
    for result in (lc_adapter.expire_scan(ns), lc_adapter.reclaim(ns), lc_adapter.apply_retention(ns)):
        assert result.rolled == 0
    assert only_active(lc_adapter, ns).record_count == 6
    assert [r.value for r in read_all(lc_adapter, ns)] == [b"forever"]


def test_a_busy_shard_is_left_alone(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, ttl_ms=TTL_MS, segment_ms=SEGMENT_MS, retention_ms=TTL_MS)
    fill(lc_adapter, ns, 1, 10)
    clock.advance(SEGMENT_MS)  # not older than segment_ms yet (strictly), nothing expired
    results = [
        lc_adapter.expire_scan(ns),
        lc_adapter.reclaim(ns),
        lc_adapter.apply_retention(ns),
        lc_adapter.clean_files(manual=True),
    ]
    assert [r.rolled for r in results] == [0, 0, 0, 0]
    assert only_active(lc_adapter, ns).record_count == 10


def test_the_ttl_scan_seals_and_reclaim_then_drops(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, segment_ms=SEGMENT_MS)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(b"x", key=b"k%d" % i, expire_at=now + 100) for i in range(30)])
    clock.advance(SEGMENT_MS + 1)
    scan = lc_adapter.expire_scan(ns)
    assert (scan.rolled, scan.expired_records) == (1, 30)
    [sealed, active] = lc_adapter.list_segments(ns, 0)
    assert (sealed.state, sealed.record_count, active.base_offset, active.record_count) == (
        SegmentState.SEALED,
        30,
        30,
        0,
    )
    result = lc_adapter.reclaim(ns)  # reclaim after sealing: an ordinary sealed segment
    assert (result.rolled, result.segments_deleted) == (0, 1)
    assert_emptied_keeping_end(lc_adapter, ns, 30)


# -- retention ----------------------------------------------------------------------------------------
def test_retention_only_an_idle_shard_is_retained(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, retention_ms=TTL_MS, segment_ms=SEGMENT_MS)
    end = fill(lc_adapter, ns, 3, 40)
    clock.advance(TTL_MS)
    early = lc_adapter.apply_retention(ns)  # older than segment_ms: sealed, not past retention_ms yet
    assert (early.rolled, early.segments_deleted) == (1, 0)
    assert [s.record_count for s in lc_adapter.list_segments(ns, 0)] == [end, 0]
    clock.advance(1)
    result = lc_adapter.apply_retention(ns, shard=0)
    assert (result.rolled, result.segments_deleted, result.log_start_offset) == (0, 1, end)
    assert_emptied_keeping_end(lc_adapter, ns, end)


# -- compaction ---------------------------------------------------------------------------------------
def make_compacted(adapter: StorageAdapter, name: str = "c", **policy: Any) -> str:
    values: dict[str, Any] = {"cleanup_policy": "compact", "max_compaction_lag_ms": LAG_MS, **policy}
    return make_ns(adapter, name, **values)


def put_versions(adapter: StorageAdapter, ns: str, keys: int, versions: int) -> int:
    for v in range(versions):
        adapter.append(ns, 0, [NewRecord(b"v%d-" % v + b"x" * 60, key=b"k%d" % k) for k in range(keys)])
    return adapter.shard_stats(ns, 0).end_offset


def test_compaction_only_an_idle_dirty_segment_is_sealed_and_cleaned(
    lc_adapter: StorageAdapter, clock: ManualClock
) -> None:
    ns = make_compacted(lc_adapter)  # segment_ms: 7 days; only the lag can seal it
    end = put_versions(lc_adapter, ns, 10, 5)
    clock.advance(LAG_MS)
    young = lc_adapter.compact(ns)
    assert (young.skipped, young.rolled) == ("not_due", 0)
    waiting = lc_adapter.compaction_estimate(ns)  # what rolling the active segment will let compaction remove
    assert (waiting.records_removable, waiting.active_records_removable) == (40, 40)
    clock.advance(1)  # the dirty data in the active segment is now older than max_compaction_lag_ms
    estimate = lc_adapter.compaction_estimate(ns)
    assert estimate.records_removable == 40 and estimate.reclaimable_bytes > 0
    assert only_active(lc_adapter, ns).record_count == end  # an estimate seals nothing
    assert lc_adapter.compaction_ranges(ns)[0]["due"]
    result = lc_adapter.compact(ns)  # as scheduled: no manual flag
    assert (result.skipped, result.rolled) == (None, 1)
    assert (result.records_removed, result.bytes_reclaimed) == (
        estimate.records_removable,
        estimate.reclaimable_bytes,
    )
    assert result.bytes_after == estimate.bytes_after
    kept = read_all(lc_adapter, ns)
    assert [(r.key, r.offset) for r in kept] == [(b"k%d" % k, 40 + k) for k in range(10)]
    assert all(r.value is not None and r.value.startswith(b"v4-") for r in kept)
    stats = lc_adapter.shard_stats(ns, 0)
    assert stats.end_offset == end
    assert append_one(lc_adapter, ns, b"next", key=b"k0") == end
    assert_verified(lc_adapter, ns)


def test_the_background_cleaner_picks_an_idle_shard(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_compacted(lc_adapter, max_compaction_lag_ms=None, segment_ms=SEGMENT_MS)
    end = put_versions(lc_adapter, ns, 4, 3)
    assert lc_adapter.compact_dirtiest().skipped == "not_due"
    clock.advance(SEGMENT_MS + 1)
    result = lc_adapter.compact_dirtiest()
    assert (result.skipped, result.namespace, result.rolled, result.records_removed) == (None, ns, 1, 8)
    assert lc_adapter.shard_stats(ns, 0).end_offset == end
    assert append_one(lc_adapter, ns, b"next", key=b"k9") == end
    assert_verified(lc_adapter, ns)


# -- node-wide sweeps and the file cleaner --------------------------------------------------------------
def test_node_wide_steps_seal_every_idle_shard(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    names = [make_ns(lc_adapter, f"ns{i}", shards=2, ttl_ms=TTL_MS, segment_ms=SEGMENT_MS) for i in range(3)]
    for ns in names:
        for shard in (0, 1):
            fill(lc_adapter, ns, 1, 5 + shard, shard=shard)
    clock.advance(TTL_MS + 1)
    scan = lc_adapter.expire_scan(None)
    assert (scan.namespace, scan.rolled) == (None, 6)
    reclaimed = lc_adapter.reclaim(None)  # the sweep's reclaim finds them sealed
    assert (reclaimed.rolled, reclaimed.segments_deleted, reclaimed.more) == (0, 6, False)
    for ns in names:
        for shard in (0, 1):
            assert_emptied_keeping_end(lc_adapter, ns, 5 + shard, shard=shard)


def test_node_wide_reclaim_and_retention_seal_idle_shards(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ttl = make_ns(lc_adapter, "ttl", ttl_ms=TTL_MS, segment_ms=SEGMENT_MS)
    kept = make_ns(lc_adapter, "kept", retention_ms=TTL_MS, segment_ms=SEGMENT_MS)
    fill(lc_adapter, ttl, 2, 10)
    fill(lc_adapter, kept, 2, 7)
    clock.advance(TTL_MS + 1)
    reclaimed = lc_adapter.reclaim(None)
    assert (reclaimed.rolled, reclaimed.segments_deleted) == (2, 1)  # "kept" is sealed but has no TTL
    retained = lc_adapter.apply_retention(None)
    assert (retained.rolled, retained.segments_deleted) == (0, 1)
    assert_emptied_keeping_end(lc_adapter, ttl, 20)
    assert_emptied_keeping_end(lc_adapter, kept, 14)


def test_the_file_cleaner_deletes_an_idle_active_file(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, segment_ms=SEGMENT_MS)
    end = fill(lc_adapter, ns, 2, 9)
    clock.advance(NodePolicy().file_reserved_ms + HOUR_MS)
    result = lc_adapter.clean_files(manual=True)
    assert (result.rolled, result.segments_deleted) == (1, 1)
    assert_emptied_keeping_end(lc_adapter, ns, end)


def test_a_dropped_idle_tail_survives_a_reopen(
    persistent_adapter_name: str, open_adapter: OpenAdapter, clock: ManualClock
) -> None:
    """The sealed tail goes while older segments stay: reopened, the index still reaches the end."""
    engine = open_adapter(lifecycle_worker=False, disk_capacity_bytes=1 << 40)
    ns = make_ns(engine, segment_ms=SEGMENT_MS)
    fill(engine, ns, 1, 5)  # never expire
    clock.advance(SEGMENT_MS + 1)
    engine.append(ns, 0, [NewRecord(b"gone", expire_at=clock.now_ms() + 100)] * 3)  # rolls: a new active segment
    clock.advance(100)
    result = engine.reclaim(ns)
    assert (result.rolled, result.segments_deleted) == (1, 1)
    engine.close()
    engine = open_adapter(lifecycle_worker=False, disk_capacity_bytes=1 << 40)
    assert_verified(engine, ns)
    stats = engine.shard_stats(ns, 0)
    assert (stats.log_start_offset, stats.end_offset, stats.record_count) == (0, 8, 5)
    assert [r.offset for r in read_all(engine, ns)] == [0, 1, 2, 3, 4]
    assert append_one(engine, ns, b"next") == 8
    assert_verified(engine, ns)


# -- an empty active segment ------------------------------------------------------------------------------
def steps(adapter: StorageAdapter, ns: str, compacted: str) -> list[LifecycleResult]:
    return [
        adapter.expire_scan(ns),
        adapter.expire_scan(None),
        adapter.reclaim(ns),
        adapter.reclaim(None, manual=True),
        adapter.apply_retention(ns),
        adapter.apply_retention(None),
        adapter.clean_files(manual=True),
        adapter.compact(compacted, manual=True),
        adapter.compact_dirtiest(),
    ]


@pytest.mark.parametrize("written", [0, 12])
def test_an_empty_active_segment_is_never_sealed_or_dropped(
    lc_adapter: StorageAdapter, clock: ManualClock, written: int
) -> None:
    """A new shard, and a shard emptied by reclamation: every step leaves its empty active segment."""
    ns = make_ns(lc_adapter, ttl_ms=1_000, segment_ms=1_000, retention_ms=1_000)
    compacted = make_compacted(lc_adapter, segment_ms=1_000, max_compaction_lag_ms=1_000)
    if written:
        fill(lc_adapter, ns, 1, written)
        clock.advance(2_000)
        assert lc_adapter.reclaim(ns).rolled == 1
    clock.advance(100 * DAY_MS)
    assert [r.rolled for r in steps(lc_adapter, ns, compacted)] == [0] * 9
    for name, end in ((ns, written), (compacted, 0)):
        active = only_active(lc_adapter, name)
        assert (active.base_offset, active.record_count) == (end, 0)
        assert lc_adapter.shard_stats(name, 0).end_offset == end
        assert append_one(lc_adapter, name, b"next", key=b"k") == end
