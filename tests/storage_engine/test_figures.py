"""Exact expired figures and backlog on every adapter (DESIGN §3 "Figures"), with an injected clock.

The scenarios the issue names: a namespace half expired by its TTL alone,
records expiring inside the active segment and inside partly expired sealed
segments, a segment's deadline that includes the namespace TTL, and a
subscription's backlog in live records after compaction removed most of them.
"""

from __future__ import annotations

from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.figures import ExpiryProfile, FiguresCache, SegmentFacts
from tests.storage_engine.lifecycle_util import make_ns, offsets, read_all

TTL = 60_000


def test_namespace_ttl_alone_counts_in_partly_expired_and_active_segments(
    lc_adapter: StorageAdapter, clock: ManualClock
) -> None:
    ns = make_ns(lc_adapter, ttl_ms=TTL, segment_bytes=1024)
    start = clock.now_ms()
    for i in range(40):  # one record a second over 40 s: several sealed segments and an active one
        lc_adapter.append(ns, 0, [NewRecord(b"x" * 40, timestamp=start + i * 1000)])
    clock.set(start + TTL + 19_500)  # records 0..19 are past their TTL, 20..39 are not
    stats = lc_adapter.shard_stats(ns, 0)
    assert (stats.record_count, stats.expired_records, stats.live_count) == (40, 20, 20)
    assert stats.expired_ratio == 0.5
    assert stats.live_count == len(read_all(lc_adapter, ns))
    segments = lc_adapter.list_segments(ns, 0)
    assert len(segments) > 1
    assert sum(s.expired_records for s in segments) == 20
    assert sum(s.expired_bytes for s in segments) == stats.expired_bytes
    partial = [s for s in segments if 0 < s.expired_records < s.record_count]
    assert len(partial) == 1  # the segment straddling "now" is counted record by record
    clock.set(start + TTL + 39_000)  # every record expired, the active segment's included
    stats = lc_adapter.shard_stats(ns, 0)
    assert (stats.expired_records, stats.live_count, stats.expired_ratio) == (40, 0, 1.0)
    assert stats.expired_bytes == stats.size_bytes and stats.expired_bytes_ratio == 1.0


def test_deadline_includes_the_namespace_ttl(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    with_ttl = make_ns(lc_adapter, "with-ttl", ttl_ms=TTL)
    without = make_ns(lc_adapter, "without")
    now = clock.now_ms()
    for ns in (with_ttl, without):
        lc_adapter.append(ns, 0, [NewRecord(b"a", timestamp=now - 5), NewRecord(b"b", expire_at=now + 10)])
    [segment] = lc_adapter.list_segments(with_ttl, 0)
    assert segment.deadline == now + TTL  # the record without its own TTL expires by the namespace's
    assert segment.min_expire_at == segment.max_expire_at == now + 10
    [segment] = lc_adapter.list_segments(without, 0)
    assert segment.deadline is None  # one record never expires


def test_a_policy_ttl_change_recounts(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, ttl_ms=TTL)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(b"v", timestamp=now - i * 10_000) for i in range(6)])
    assert lc_adapter.shard_stats(ns, 0).expired_records == 0
    lc_adapter.update_namespace(ns, NamespacePolicy(retention_ms=None, ttl_ms=25_000))
    assert lc_adapter.shard_stats(ns, 0).expired_records == 3  # 30, 40 and 50 s old
    lc_adapter.update_namespace(ns, NamespacePolicy(retention_ms=None))
    assert lc_adapter.shard_stats(ns, 0).expired_records == 0


def test_backlog_in_live_records_after_compaction(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, cleanup_policy="compact", segment_bytes=1024, min_compaction_lag_ms=0, shards=2)
    lc_adapter.create_subscription(ns, "s")
    for shard in (0, 1):
        for round_ in range(6):  # 6 writes of each of 10 keys: compaction leaves 1 in 6
            lc_adapter.append(ns, shard, [NewRecord(b"%d" % round_, key=b"k%d" % k) for k in range(10)])
        lc_adapter.append(ns, shard, [NewRecord(b"tail", key=b"tail")])  # rolls past the last full segment
    lc_adapter.compact(ns, manual=True)
    backlog = lc_adapter.backlog(ns, "s")
    for b in backlog:
        stats = lc_adapter.shard_stats(ns, b.shard)
        assert b.messages == stats.end_offset - stats.log_start_offset  # the offset distance
        assert b.live_messages == len(read_all(lc_adapter, ns, b.shard))  # what a consumer receives
        assert b.live_messages < b.messages  # compaction removed records between the cursor and the end
    lc_adapter.acknowledge(ns, "s", 0, 30)  # a cursor inside a segment
    b0 = next(b for b in lc_adapter.backlog(ns, "s") if b.shard == 0)
    assert b0.live_messages == len([o for o in offsets(lc_adapter, ns, 0) if o > 30])


def test_profile_counts_out_of_order_and_extends() -> None:
    profile = ExpiryProfile(ttl_ms=100)
    profile.extend([(50, None, 10, False), (10, None, 20, False), (0, 500, 5, True)], last_offset=2)
    assert profile.expired(109) == (1, 5)  # only the dead one
    assert profile.expired(110) == (2, 25)
    assert profile.expired(150) == (3, 35)
    profile.extend([(0, 120, 7, False)], last_offset=3)
    assert profile.expired(120) == (3, 32)


def test_cache_rebuilds_after_a_rewrite() -> None:
    rows = {0: (0, None, 10, False), 1: (100, None, 10, False), 2: (200, None, 10, False)}

    def read(first: int, last: int) -> list[tuple[int, int | None, int, bool]]:
        return [rows[o] for o in range(first, last + 1) if o in rows]

    def facts(count: int) -> SegmentFacts:
        return SegmentFacts(0, 2, count, count, 30, 0, 0, 200, None, None, True)

    cache = FiguresCache()
    assert (cache.figures(facts(3), 50, 150, read).records, cache.figures(facts(3), 50, 150, read).bytes) == (2, 20)
    del rows[0]  # a rewrite removed offset 0: the record count tells the cache
    assert cache.figures(facts(2), 50, 150, read).records == 1
