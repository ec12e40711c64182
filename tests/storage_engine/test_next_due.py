"""When lifecycle work is next due (``next_due``, issue 15), on every adapter: the first TTL-index
entry, the earliest segment deadline, the oldest segment's retention breach; from metadata with
per-shard minima recomputed only when a shard's sealed segments change."""

from __future__ import annotations

import pytest

from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.errors import InvalidArgumentError
from tests.storage_engine.lifecycle_util import append_one, make_ns

KINDS = {"expire-scan", "reclaim", "retention"}


def test_nothing_stored_nothing_due(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    assert lc_adapter.next_due().due == dict.fromkeys(KINDS)
    make_ns(lc_adapter, "empty", shards=3, ttl_ms=1_000)
    due = lc_adapter.next_due()
    assert due.due == dict.fromkeys(KINDS) and due.shards == 3 and due.now == clock.now_ms()
    append_one(lc_adapter, "empty")  # no TTL of its own, the namespace's applies; retention is off (make_ns)
    assert lc_adapter.next_due().due == {"expire-scan": None, "reclaim": clock.now_ms() + 1_000, "retention": None}


def test_due_follows_the_first_ttl_entry_and_the_earliest_segment_deadline(
    lc_adapter: StorageAdapter, clock: ManualClock
) -> None:
    t0 = clock.now_ms()
    make_ns(lc_adapter, "a", shards=2, ttl_ms=60_000, segment_ms=1_000)
    make_ns(lc_adapter, "b", ttl_ms=60_000, segment_ms=1_000)
    lc_adapter.append("a", 1, [NewRecord(b"x", expire_at=t0 + 5_000)] * 3)
    lc_adapter.append("b", 0, [NewRecord(b"y", expire_at=t0 + 7_000), NewRecord(b"z")])
    due = lc_adapter.next_due().due
    # a/1: every record has expire_at t0+5s (earlier than the namespace TTL); b/0 has a record bounded by the TTL.
    assert due == {"expire-scan": t0 + 5_000, "reclaim": t0 + 5_000, "retention": None}
    clock.advance(2_000)
    lc_adapter.append("a", 1, [NewRecord(b"x", expire_at=clock.now_ms() + 1_000)])  # rolls: a/1 now has 2 segments
    due = lc_adapter.next_due().due
    assert due == {"expire-scan": t0 + 3_000, "reclaim": t0 + 3_000, "retention": None}  # the new segment
    clock.advance(4_000)  # t0+6s: both of a/1's segments are wholly expired, b/0's is not
    assert lc_adapter.reclaim(None).segments_deleted >= 1
    assert lc_adapter.expire_scan(None).expired_records >= 0
    due = lc_adapter.next_due().due
    # What is left: b/0 (deadline = its TTL-bounded record), b/0's TTL entry at t0+7s.
    assert due == {"expire-scan": t0 + 7_000, "reclaim": t0 + 60_000, "retention": None}
    clock.advance(60_000)
    lc_adapter.expire_scan(None)
    lc_adapter.reclaim(None)
    assert lc_adapter.next_due().due == dict.fromkeys(KINDS)


def test_retention_due_at_the_time_rule_breach_or_now_by_size(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    t0 = clock.now_ms()
    make_ns(lc_adapter, "kept", retention_ms=10_000)
    append_one(lc_adapter, "kept")
    clock.advance(500)
    append_one(lc_adapter, "kept")
    assert lc_adapter.next_due().due["retention"] == t0 + 500 + 10_001  # the segment's newest record decides
    make_ns(lc_adapter, "compacted", cleanup_policy="compact", retention_ms=1)
    lc_adapter.append("compacted", 0, [NewRecord(b"v", key=b"k")])
    assert lc_adapter.next_due().due["retention"] == t0 + 500 + 10_001  # a compacted namespace never retains
    make_ns(lc_adapter, "sized", retention_bytes=1, segment_bytes=1024)
    lc_adapter.append("sized", 0, [NewRecord(b"v" * 1000)])
    lc_adapter.append("sized", 0, [NewRecord(b"v" * 1000)])  # two segments, past the limit even without the oldest
    assert lc_adapter.next_due().due["retention"] == clock.now_ms()
    lc_adapter.apply_retention(None)
    assert lc_adapter.next_due().due["retention"] == t0 + 500 + 10_001


def test_sealed_minima_are_recomputed_only_when_a_shard_changes(
    lc_adapter: StorageAdapter, adapter_name: str, clock: ManualClock
) -> None:
    t0 = clock.now_ms()
    make_ns(lc_adapter, "many", shards=8, ttl_ms=30_000, segment_ms=100)
    for shard in range(8):
        for _ in range(5):  # five segments a shard
            clock.advance(150)
            append_one(lc_adapter, "many", shard=shard)
    first = lc_adapter.next_due()
    assert first.due["reclaim"] == t0 + 150 + 30_000
    assert first.recomputed == 8
    again = lc_adapter.next_due()
    assert again.due == first.due
    clock.advance(10)
    append_one(lc_adapter, "many", shard=7)  # 10 ms after its last one: into the active segment, no roll
    after_append = lc_adapter.next_due()
    clock.advance(150)
    append_one(lc_adapter, "many", shard=5)  # rolls shard 5
    after_roll = lc_adapter.next_due()
    if adapter_name == "memory":  # no layout token: recomputed every call (a test adapter)
        assert again.recomputed == after_append.recomputed == after_roll.recomputed == 8
    else:
        assert (again.recomputed, after_append.recomputed, after_roll.recomputed) == (0, 0, 1)
    clock.advance(t0 + 31_000 - clock.now_ms())  # records up to t0+1s expired: shard 0 and shard 1's first
    assert lc_adapter.reclaim(None).segments_deleted == 6
    assert lc_adapter.next_due().due["reclaim"] == t0 + 1_050 + 30_000
    lc_adapter.delete_namespace("many")
    assert lc_adapter.next_due().due == dict.fromkeys(KINDS)


def test_a_due_sweep_works_on_the_due_shards_only(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    t0 = clock.now_ms()
    make_ns(lc_adapter, "a", shards=3, ttl_ms=10_000, segment_ms=100)
    make_ns(lc_adapter, "b", shards=1, ttl_ms=10_000, segment_ms=100, retention_ms=20_000)
    append_one(lc_adapter, "a", shard=0)
    append_one(lc_adapter, "b", shard=0)
    clock.advance(5_000)
    append_one(lc_adapter, "a", shard=1)
    lc_adapter.append("a", 2, [NewRecord(b"x", expire_at=t0 + 1_000)])  # due at t0+1s: a/2 (before the TTL)
    clock.advance(6_000)  # t0+11s: a/0, b/0 (their TTL) and a/2 are due, a/1 is not
    result = lc_adapter.sweep_due("reclaim")
    assert (result.operation, result.namespace, result.more) == ("reclaim", None, False)
    assert result.segments_deleted == 3 and result.rolled == 3  # the idle active segments, sealed then dropped
    assert [lc_adapter.shard_stats("a", s).record_count for s in range(3)] == [0, 1, 0]
    assert lc_adapter.shard_stats("b", 0).record_count == 0
    assert lc_adapter.next_due().due["reclaim"] == t0 + 15_000  # a/1, not due yet: left alone
    assert lc_adapter.sweep_due("reclaim").segments_deleted == 0
    append_one(lc_adapter, "b")
    clock.advance(20_001)  # b's retention breached
    assert lc_adapter.next_due().due["retention"] <= clock.now_ms()
    assert lc_adapter.sweep_due("retention").segments_deleted == 1
    lc_adapter.append("a", 0, [NewRecord(b"y", expire_at=clock.now_ms() - 1)] * 2)
    assert lc_adapter.sweep_due("expire-scan").expired_records == 2  # the node-wide scan
    with pytest.raises(InvalidArgumentError):
        lc_adapter.sweep_due("compact")
    with pytest.raises(InvalidArgumentError):
        lc_adapter.sweep_due("reclaim", 0)
