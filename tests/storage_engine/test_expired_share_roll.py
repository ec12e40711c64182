"""Expired data in an active segment leaves on time (DESIGN §3 "Idle shards", last sentences).

An active segment more than ``segment_expired_roll_ratio`` of whose records are expired, and at
least ``EXPIRED_ROLL_MIN_AGE_MS`` old, is rolled by the next lifecycle step so that reclamation
drops or rewrites it, on an idle shard and on one that keeps receiving appends; the node's next
due time puts the reclaim sweep at that moment; a dry run counts it as the real run does.
Every adapter, the injected clock, no sleeping.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from storage_engine.api import NewRecord, SegmentInfo, SegmentState, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.errors import PolicyValidationError
from storage_engine.policies.policy import NamespacePolicy, namespace_policy_from
from storage_engine.rules.rolling import EXPIRED_ROLL_MIN_AGE_MS, expired_roll_count, idle_segment_due
from tests.storage_engine.lifecycle_util import assert_verified, make_ns, read_all

FAR = 4_000_000_000_000
COUNTS = ("rolled", "segments_deleted", "segments_rewritten", "records_removed", "bytes_reclaimed")


def counts(result: Any, adapter: StorageAdapter) -> tuple[int, ...]:
    # RocksDB hands a rewritten range's space back only when it compacts it (as test_dry_runs says).
    names = COUNTS[:-1] if adapter.name == "rocksdb" else COUNTS
    return tuple(getattr(result, name) for name in names)


def active(adapter: StorageAdapter, ns: str, shard: int = 0) -> SegmentInfo:
    last = adapter.list_segments(ns, shard)[-1]
    assert last.state is SegmentState.ACTIVE
    return last


def expiring(now: int, n: int, lives_ms: int, step_ms: int = 0) -> list[NewRecord]:
    return [NewRecord(b"e%03d" % i, expire_at=now + lives_ms + i * step_ms) for i in range(n)]


def kept(n: int) -> list[NewRecord]:
    return [NewRecord(b"k%03d" % i, expire_at=FAR) for i in range(n)]


# -- the rule -------------------------------------------------------------------------------------
def segment(count: int = 10, expired: int = 0, created_at: int = 0, **fields: Any) -> SegmentInfo:
    values: dict[str, Any] = {
        "namespace": "n",
        "shard": 0,
        "base_offset": 0,
        "last_offset": count - 1,
        "record_count": count,
        "live_count": count - expired,
        "size_bytes": 100 * count,
        "min_timestamp": 0,
        "max_timestamp": 0,
        "max_expire_at": FAR,
        "has_unbounded": False,
        "state": SegmentState.ACTIVE,
        "created_at": created_at,
        "modified_at": 0,
        "expired_records": expired,
        "first_timestamp": 0,
    }
    values.update(fields)
    return SegmentInfo(**values)


def test_the_share_must_pass_the_ratio_in_a_segment_old_enough() -> None:
    policy = NamespacePolicy()  # ratio 0.5
    old = EXPIRED_ROLL_MIN_AGE_MS
    assert not idle_segment_due(segment(expired=5), policy, old)  # exactly half: not above it
    assert idle_segment_due(segment(expired=6), policy, old)
    assert not idle_segment_due(segment(expired=6), policy, old - 1)  # too young: no tiny segments rolled
    assert not idle_segment_due(segment(expired=6, state=SegmentState.SEALED), policy, old)
    assert not idle_segment_due(segment(count=0, expired=0), policy, old)
    low = replace(policy, segment_expired_roll_ratio=0.1)
    assert (idle_segment_due(segment(expired=1), low, old), idle_segment_due(segment(expired=2), low, old)) == (
        False,
        True,
    )
    for off in (None, 1.0):  # off: only a wholly expired segment (its deadline) rolls
        assert not idle_segment_due(segment(expired=9), replace(policy, segment_expired_roll_ratio=off), old)
    assert expired_roll_count(policy, 10) == 6
    assert expired_roll_count(replace(policy, segment_expired_roll_ratio=0.3), 10) == 4
    assert expired_roll_count(replace(policy, segment_expired_roll_ratio=1.0), 10) is None


@pytest.mark.parametrize(
    ("value", "ok"), [(0.5, True), (1.0, True), (None, True), (0, False), (-0.1, False), (1.5, False)]
)
def test_the_policy_field_is_a_ratio_in_0_1(value: Any, ok: bool) -> None:
    if ok:
        assert namespace_policy_from({"segment_expired_roll_ratio": value}).segment_expired_roll_ratio == value
    else:
        with pytest.raises(PolicyValidationError) as err:
            namespace_policy_from({"segment_expired_roll_ratio": value})
        assert "segment_expired_roll_ratio" in err.value.errors


# -- idle shards -------------------------------------------------------------------------------------
def test_an_idle_shard_rolls_and_rewrites_its_mostly_expired_active_segment(
    lc_adapter: StorageAdapter, clock: ManualClock
) -> None:
    ns = make_ns(lc_adapter)  # segment_ms 7 days, segment_bytes 1 GiB: neither comes
    clock.advance(EXPIRED_ROLL_MIN_AGE_MS)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, expiring(now, 6, 1_000) + kept(4))
    clock.advance(1_000)
    assert active(lc_adapter, ns).expired_records == 6
    dry = lc_adapter.reclaim(ns, dry_run=True)
    assert active(lc_adapter, ns).record_count == 10  # the dry run sealed nothing
    real = lc_adapter.reclaim(ns)
    assert counts(real, lc_adapter) == counts(dry, lc_adapter)
    assert (real.rolled, real.segments_deleted, real.segments_rewritten, real.records_removed) == (1, 0, 1, 6)
    assert lc_adapter.shard_stats(ns, 0).expired_records == 0
    assert [r.value for r in read_all(lc_adapter, ns)] == [b"k%03d" % i for i in range(4)]
    assert (active(lc_adapter, ns).base_offset, active(lc_adapter, ns).record_count) == (10, 0)
    assert lc_adapter.reclaim(ns).rolled == 0  # nothing more to do: the empty active segment stays
    assert_verified(lc_adapter, ns)


def test_at_or_below_the_ratio_and_with_the_rule_off_the_segment_stays(
    lc_adapter: StorageAdapter, clock: ManualClock
) -> None:
    half = make_ns(lc_adapter, "half")
    off = make_ns(lc_adapter, "off", segment_expired_roll_ratio=None)
    clock.advance(EXPIRED_ROLL_MIN_AGE_MS)
    now = clock.now_ms()
    lc_adapter.append(half, 0, expiring(now, 5, 1_000) + kept(5))
    lc_adapter.append(off, 0, expiring(now, 9, 1_000) + kept(1))
    clock.advance(1_000)
    for ns in (half, off):
        assert lc_adapter.reclaim(ns).rolled == 0
        assert active(lc_adapter, ns).record_count == 10


# -- busy shards ------------------------------------------------------------------------------------
def test_a_busy_shard_is_rolled_at_its_due_time_and_its_expired_data_leaves(
    lc_adapter: StorageAdapter, clock: ManualClock
) -> None:
    """Appends every 100 ms with a 5 s TTL: the segment never fills or ages out, yet the deadline-driven
    reclaim comes exactly when more than half of it is expired, and afterwards the shard holds at most
    half expired data, however long the appends go on."""
    ns = make_ns(lc_adapter, segment_bytes=1 << 30)
    start = clock.now_ms()
    rolls = rewrites = 0
    roll_times = []
    for _ in range(600):  # a minute of appends
        clock.advance(100)
        lc_adapter.append(ns, 0, expiring(clock.now_ms(), 1, 5_000))
        due = lc_adapter.next_due().due["reclaim"]
        assert due is not None
        before = active(lc_adapter, ns)
        if idle_segment_due(before, NamespacePolicy(), clock.now_ms()):
            assert due <= clock.now_ms()  # the share passed 0.5: due now, appends or not
        if due <= clock.now_ms():  # that, or a sealed segment wholly expired
            result = lc_adapter.sweep_due("reclaim")
            if result.rolled:
                rolls += result.rolled
                rewrites += result.segments_rewritten
                roll_times.append(clock.now_ms() - start)
        stats = lc_adapter.shard_stats(ns, 0)
        assert stats.expired_records * 2 <= stats.record_count + 2  # at most half, and a record's step
    assert rolls >= 5 and rewrites == rolls  # each rolled segment rewritten in the same sweep
    # The first roll: not before the segment is EXPIRED_ROLL_MIN_AGE_MS old, and right then (10 s of
    # records of which the first 5 s expired: more than half once one more expires).
    assert EXPIRED_ROLL_MIN_AGE_MS <= roll_times[0] <= EXPIRED_ROLL_MIN_AGE_MS + 200
    assert_verified(lc_adapter, ns)


def test_the_due_time_is_exactly_when_the_share_passes(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter)
    clock.advance(EXPIRED_ROLL_MIN_AGE_MS)
    now = clock.now_ms()
    # 10 records expiring at now+1000, +1100, …, +1900 and 10 that never do: the share passes 0.5 with
    # the 11th expired record, which never comes; with 0.25 at the 6th (now + 1500).
    lc_adapter.update_namespace(ns, NamespacePolicy(retention_ms=None, segment_expired_roll_ratio=0.25))
    lc_adapter.append(ns, 0, expiring(now, 10, 1_000, 100) + kept(10))
    assert lc_adapter.next_due().due["reclaim"] == now + 1_000  # nothing expired yet: the first deadline
    clock.advance(1_000)
    assert lc_adapter.next_due().due["reclaim"] == now + 1_500  # from the records' expiries, exactly
    clock.advance(499)
    assert lc_adapter.sweep_due("reclaim").rolled == 0
    clock.advance(1)
    assert lc_adapter.sweep_due("reclaim").rolled == 1
    lc_adapter.update_namespace(ns, NamespacePolicy(retention_ms=None))
    lc_adapter.append(ns, 0, expiring(clock.now_ms(), 3, 1_000) + kept(7))
    clock.advance(5_000)
    later = lc_adapter.next_due().due["reclaim"]  # 3 of 10 expired: below 0.5, nothing due now
    assert later is None or later > clock.now_ms()


def test_a_young_segment_is_due_once_old_enough(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter)
    created = clock.now_ms()
    lc_adapter.append(ns, 0, expiring(created, 8, 10) + kept(2))
    clock.advance(100)
    assert lc_adapter.next_due().due["reclaim"] == created + EXPIRED_ROLL_MIN_AGE_MS
    assert lc_adapter.reclaim(ns).rolled == 0
    clock.advance(EXPIRED_ROLL_MIN_AGE_MS)
    assert lc_adapter.reclaim(ns).rolled == 1


def test_node_wide_dry_runs_count_the_roll_as_the_real_runs_do(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, shards=2)
    clock.advance(EXPIRED_ROLL_MIN_AGE_MS)
    now = clock.now_ms()
    for shard in (0, 1):
        lc_adapter.append(ns, shard, expiring(now, 7, 1_000) + kept(3))
    clock.advance(1_000)
    dry = lc_adapter.reclaim(None, dry_run=True)
    assert [active(lc_adapter, ns, s).record_count for s in (0, 1)] == [10, 10]
    real = lc_adapter.reclaim(None)
    assert counts(dry, lc_adapter) == counts(real, lc_adapter)
    assert (real.rolled, real.segments_rewritten, real.records_removed) == (2, 2, 14)


# -- compaction's dry run counts segments as the real run does -----------------------------------------
def test_the_compaction_dry_run_counts_the_segments_the_real_run_deletes_and_rewrites(
    lc_adapter: StorageAdapter, clock: ManualClock
) -> None:
    ns = make_ns(lc_adapter, cleanup_policy="compact", segment_bytes=1024, segment_expired_roll_ratio=None)
    for round_ in range(6):
        lc_adapter.append(ns, 0, [NewRecord(b"v%d-%d" % (round_, i) * 20, key=b"k%d" % i) for i in range(10)])
    clock.advance(1)
    names = ("records_removed", "segments_deleted", "segments_rewritten", "records_written")
    dry = lc_adapter.compact(ns, dry_run=True)
    real = lc_adapter.compact(ns)
    assert real.segments_deleted + real.segments_rewritten > 0
    assert [getattr(dry, n) for n in names] == [getattr(real, n) for n in names]


def test_the_deadline_driven_reclaim_rolls_and_rewrites_every_due_shard_at_once(
    lc_adapter: StorageAdapter, clock: ManualClock
) -> None:
    """The due sweep works on several shards at once (threads): each due shard rolled and rewritten."""
    ns = make_ns(lc_adapter, shards=5)
    clock.advance(EXPIRED_ROLL_MIN_AGE_MS)
    now = clock.now_ms()
    for shard in range(5):
        lc_adapter.append(ns, shard, expiring(now, 6 + shard % 2, 1_000) + kept(4))  # 6 or 7 of 10-11 expire
    lc_adapter.append(ns, 4, kept(20))  # shard 4: 6 of 30 expired, below the ratio
    clock.advance(1_000)
    result = lc_adapter.sweep_due("reclaim")
    assert (result.rolled, result.segments_rewritten, result.records_removed) == (4, 4, 6 + 7 + 6 + 7)
    assert [lc_adapter.shard_stats(ns, s).expired_records for s in range(5)] == [0, 0, 0, 0, 6]
    assert [len(read_all(lc_adapter, ns, s)) for s in range(5)] == [4, 4, 4, 4, 24]
    assert_verified(lc_adapter, ns)
