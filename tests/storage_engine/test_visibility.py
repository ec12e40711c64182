"""Layer 1 of expiry (DESIGN §3): reads never return an expired record; the read path
only decides and queues the index clean-up on a bounded queue. Runs on every adapter."""

from __future__ import annotations

import time

import pytest

from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.rules.expiry import effective_expiry, is_expired, segment_deadline
from tests.storage_engine.lifecycle_util import FAR_FUTURE, append_one, assert_verified, make_ns, offsets


def test_effective_expiry_is_the_earlier_deadline() -> None:
    assert effective_expiry(1000, None, None) is None
    assert effective_expiry(1000, 5000, None) == 5000
    assert effective_expiry(1000, None, 100) == 1100
    assert effective_expiry(1000, 5000, 100) == 1100  # the namespace TTL is shorter
    assert effective_expiry(1000, 1050, 100) == 1050  # the explicit TTL is shorter
    assert is_expired(1000, 1050, None, 1050) and not is_expired(1000, 1050, None, 1049)
    assert is_expired(1000, None, 100, 1100) and not is_expired(1000, None, 100, 1099)


def test_segment_deadline_bounds_every_record() -> None:
    assert segment_deadline(0, None, None, False, None) == 0  # empty: nothing left to expire
    assert segment_deadline(3, 900, None, True, None) is None  # unbounded records never expire
    assert segment_deadline(3, 900, 2000, False, None) == 2000
    assert segment_deadline(3, 900, 2000, True, 100) == 1000
    assert segment_deadline(3, 900, 950, False, 100) == 950


def test_reads_skip_expired_records_and_return_the_next_visible(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter)
    now = clock.now_ms()
    append_one(lc_adapter, ns, b"a")
    append_one(lc_adapter, ns, b"b", expire_at=now + 1000)
    append_one(lc_adapter, ns, b"c", expire_at=now + 1000)
    append_one(lc_adapter, ns, b"d", expire_at=now + 5000)
    assert offsets(lc_adapter, ns) == [0, 1, 2, 3]
    clock.advance(1000)  # expire_at ≤ now: hidden
    assert offsets(lc_adapter, ns) == [0, 3]
    page = lc_adapter.read(ns, 0, 1, max_records=1)  # a read at an expired offset
    assert [r.value for r in page.records] == [b"d"] and page.next_offset == 4
    clock.advance(4000)
    page = lc_adapter.read(ns, 0, 1)
    assert page.records == () and page.next_offset == page.end_offset == 4
    assert_verified(lc_adapter)


def test_explicit_ttl_shorter_and_longer_than_the_namespace_ttl(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, ttl_ms=10_000)
    now = clock.now_ms()
    append_one(lc_adapter, ns, b"ns-ttl")  # expires at now + 10 s
    append_one(lc_adapter, ns, b"shorter", expire_at=now + 2_000)
    append_one(lc_adapter, ns, b"longer", expire_at=now + 60_000)  # the namespace TTL still wins
    clock.advance(2_000)
    assert [r.value for r in lc_adapter.read(ns, 0, 0).records] == [b"ns-ttl", b"longer"]
    clock.advance(8_000)
    assert lc_adapter.read(ns, 0, 0).records == ()
    assert lc_adapter.shard_stats(ns, 0).record_count == 3  # hidden, not yet reclaimed
    assert_verified(lc_adapter)


def test_producer_timestamps_count_for_the_namespace_ttl(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, ttl_ms=1_000)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(b"old", timestamp=now - 1_000), NewRecord(b"new", timestamp=now)])
    assert [r.value for r in lc_adapter.read(ns, 0, 0).records] == [b"new"]


def test_read_key_and_read_tag_hide_expired_records(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter)
    now = clock.now_ms()
    for i in range(6):
        append_one(lc_adapter, ns, b"%d" % i, key=b"k", tags=("t",), expire_at=now + 100 if i >= 3 else FAR_FUTURE)
    assert lc_adapter.read_key(ns, 0, b"k").offset == 5  # type: ignore[union-attr]
    clock.advance(100)
    assert lc_adapter.read_key(ns, 0, b"k") is None  # the latest record with the key expired
    page = lc_adapter.read_tag(ns, 0, "t", 0, max_records=2)
    assert [r.offset for r in page.records] == [0, 1]
    page = lc_adapter.read_tag(ns, 0, "t", page.next_offset, max_records=2)
    assert [r.offset for r in page.records] == [2]
    assert lc_adapter.read_tag(ns, 0, "t", 3).records == ()
    assert_verified(lc_adapter)


def test_read_tag_keeps_searching_past_expired_records(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter)
    now = clock.now_ms()
    for i in range(10):
        append_one(lc_adapter, ns, tags=("t",), expire_at=now + 10 if i < 8 else None)
    clock.advance(10)
    assert [r.offset for r in lc_adapter.read_tag(ns, 0, "t", 0, max_records=2).records] == [8, 9]


def test_read_time_check_off_returns_expired_records(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, read_time_check=False, ttl_ms=1_000)
    append_one(lc_adapter, ns)
    clock.advance(5_000)
    assert offsets(lc_adapter, ns) == [0]


def test_reads_queue_index_clean_up_and_the_drain_marks_records_dead(
    lc_adapter: StorageAdapter, clock: ManualClock
) -> None:
    ns = make_ns(lc_adapter)
    now = clock.now_ms()
    append_one(lc_adapter, ns, key=b"a", expire_at=now + 10)
    append_one(lc_adapter, ns, tags=("x",), expire_at=now + 10)
    append_one(lc_adapter, ns)  # never expires, no indexes
    clock.advance(10)
    assert offsets(lc_adapter, ns) == [2]
    assert lc_adapter.stats().counters["read_check_queue_length"] == 2
    # The read only decided (the drain below marks them dead), but the figures count what readers get.
    before = lc_adapter.shard_stats(ns, 0)
    assert (before.live_count, before.expired_records) == (1, 2)
    result = lc_adapter.drain_read_checks()
    assert (result.expired_records, result.index_entries_deleted) == (2, 4)  # key + ttl, tag + ttl
    stats = lc_adapter.shard_stats(ns, 0)
    assert (stats.record_count, stats.live_count, stats.expired_records) == (3, 1, 2)
    assert stats.expired_ratio == pytest.approx(2 / 3)
    assert lc_adapter.stats().counters["read_check_queue_length"] == 0
    assert lc_adapter.drain_read_checks().expired_records == 0  # idempotent
    assert lc_adapter.expire_scan(ns).expired_records == 0  # nothing left for the scan
    assert_verified(lc_adapter)


def test_a_full_read_check_queue_drops_and_counts(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, read_check_queue_size=2)
    now = clock.now_ms()
    for _ in range(5):
        append_one(lc_adapter, ns, expire_at=now + 1)
    append_one(lc_adapter, ns)  # keeps the segment from expiring whole (a read would skip it)
    clock.advance(1)
    assert offsets(lc_adapter, ns) == [5]
    counters = lc_adapter.stats().counters
    assert (counters["read_check_queue_length"], counters["read_check_drops_total"]) == (2, 3)
    assert lc_adapter.drain_read_checks().expired_records == 2
    assert lc_adapter.expire_scan(ns).expired_records == 3  # the scan catches what was dropped
    assert lc_adapter.shard_stats(ns, 0).live_count == 1
    assert_verified(lc_adapter)


def test_the_background_worker_drains_the_queue(open_adapter, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    adapter = open_adapter(disk_capacity_bytes=1 << 40)  # with its worker
    ns = make_ns(adapter)
    append_one(adapter, ns, key=b"k", expire_at=clock.now_ms() + 1)
    append_one(adapter, ns)
    clock.advance(1)
    assert offsets(adapter, ns) == [1]
    for _ in range(500):  # the worker runs on its own thread: wait for it (not for engine time)
        if adapter.stats().counters["read_check_expired_records_total"] == 1:
            break
        time.sleep(0.01)
    assert adapter.stats().counters["read_check_expired_records_total"] == 1  # marked dead by the worker
    assert adapter.shard_stats(ns, 0).live_count == 1
    assert_verified(adapter)
