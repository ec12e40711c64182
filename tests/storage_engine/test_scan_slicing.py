"""The TTL scan gives way to appends (DESIGN §3 "Timeliness", issue 15): it runs in short
slices, applies a batch a bounded chunk per shard lock hold, waits while appends are in
flight, and (RocksDB-indexed adapters) starts where the last scan stopped instead of
walking the tombstones it left. None of this may change what a scan does."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.lifecycle import TTLEntry
from storage_engine.rules import pacing
from storage_engine.rules.pacing import Foreground, Slices
from tests.storage_engine.lifecycle_util import append_one, assert_verified, make_ns, offsets


def _shard(adapter: StorageAdapter, ns: str, index: int = 0) -> Any:
    return adapter.lifecycle_namespace(ns)[1][index]  # type: ignore[attr-defined]


def _spy_chunks(monkeypatch: pytest.MonkeyPatch, shard: Any) -> list[int]:
    sizes: list[int] = []
    original = shard.expire_entries

    def spy(entries: Sequence[TTLEntry], now: int) -> Any:
        sizes.append(len(entries))
        return original(entries, now)

    monkeypatch.setattr(shard, "expire_entries", spy)
    return sizes


def _store(adapter: StorageAdapter) -> Any:
    store = getattr(adapter, "store", None)
    if store is None:
        pytest.skip("only RocksDB-indexed adapters keep where a scan stopped")
    return store


def _ns_id(adapter: StorageAdapter, ns: str) -> int:
    return int(adapter._namespaces[ns].record.ns_id)  # type: ignore[attr-defined]


# -- pacing.Foreground and pacing.Slices ------------------------------------------------------------
def test_wait_turn_returns_at_once_without_calls_in_flight() -> None:
    assert Foreground().wait_turn(10) is False


def test_wait_turn_waits_for_the_calls_in_flight() -> None:
    fg = Foreground()
    fg.enter()
    left = threading.Event()
    seen: list[tuple[bool, bool]] = []
    waiter = threading.Thread(target=lambda: seen.append((fg.wait_turn(30), left.is_set())))
    waiter.start()
    time.sleep(0.05)
    left.set()
    fg.leave()
    waiter.join(10)
    assert seen == [(True, True)]
    assert fg.active == 0


def test_wait_turn_is_bounded() -> None:
    fg = Foreground()
    fg.enter()
    assert fg.wait_turn(0.001) is True  # it waited, and came back without the call finishing
    fg.leave()


def test_slices_pause_when_their_time_is_up_and_chunk_less_while_appends_run() -> None:
    fg = Foreground()
    slices = Slices(fg, slice_s=0.0, wait_s=0.001)
    assert slices.chunk() == pacing.SLICE_CHUNK
    slices.check()
    assert (slices.pauses, slices.waits) == (1, 0)  # no append: a rest, not a wait
    fg.enter()
    assert slices.chunk() == pacing.SLICE_CHUNK_BUSY < pacing.SLICE_CHUNK
    slices.check()
    assert (slices.pauses, slices.waits) == (2, 1)
    fg.leave()
    never = Slices(fg, slice_s=3600.0, busy_s=3600.0)
    never.check()
    assert never.pauses == 0


# -- the scan ---------------------------------------------------------------------------------------
def test_a_batch_is_applied_in_bounded_chunks(
    lc_adapter: StorageAdapter, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = make_ns(lc_adapter, scan_batch_size=1000)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(b"x", expire_at=now + 1 + i % 3) for i in range(700)])
    lc_adapter.append(ns, 0, [NewRecord(b"keep")])
    sizes = _spy_chunks(monkeypatch, _shard(lc_adapter, ns))
    clock.advance(10)
    result = lc_adapter.expire_scan(ns)
    assert (result.expired_records, result.more) == (700, False)
    assert sum(sizes) == 700 and max(sizes) <= pacing.SLICE_CHUNK and len(sizes) >= 3
    assert offsets(lc_adapter, ns) == [700]
    assert_verified(lc_adapter)


def test_the_scan_waits_while_an_append_is_in_flight(
    lc_adapter: StorageAdapter, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pacing, "SLICE_BUSY_S", 0.0)  # every check ends a slice
    monkeypatch.setattr(pacing, "SLICE_WAIT_S", 0.001)  # and a wait is short: the append never ends
    ns = make_ns(lc_adapter)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(b"x", key=b"k%d" % (i % 5), expire_at=now + 1) for i in range(300)])
    sizes = _spy_chunks(monkeypatch, _shard(lc_adapter, ns))
    clock.advance(1)
    foreground = lc_adapter.foreground  # type: ignore[attr-defined]
    foreground.enter()  # an append in flight, as far as the scan can tell
    try:
        result = lc_adapter.expire_scan(ns)
    finally:
        foreground.leave()
    assert result.expired_records == 300
    assert max(sizes) <= pacing.SLICE_CHUNK_BUSY  # smaller chunks while appends run
    assert lc_adapter.stats().counters["ttl_scan_waits_total"] >= len(sizes) - 1
    assert lc_adapter.read_key(ns, 0, b"k1") is None
    assert_verified(lc_adapter)


def test_appends_during_a_scan_are_not_blocked_by_it(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    """A scan started while another thread appends (to the scanned shard too) ends with every
    due record dead and every append in place."""
    ns = make_ns(lc_adapter, scan_batch_size=100)
    now = clock.now_ms()
    for _ in range(10):
        lc_adapter.append(ns, 0, [NewRecord(b"x", expire_at=now + 1) for _ in range(200)])
    clock.advance(1)
    stop = threading.Event()
    appended: list[int] = []

    def producer() -> None:
        while not stop.is_set():
            appended.append(append_one(lc_adapter, ns, b"live"))

    thread = threading.Thread(target=producer)
    thread.start()
    try:
        result = lc_adapter.expire_scan(ns)
    finally:
        stop.set()
        thread.join(30)
    assert result.expired_records == 2000
    assert offsets(lc_adapter, ns) == appended
    assert_verified(lc_adapter)


def test_read_checks_are_drained_in_bounded_chunks(
    lc_adapter: StorageAdapter, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = make_ns(lc_adapter, read_check_queue_size=10_000)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(b"x", tags=("t",), expire_at=now + 1) for _ in range(600)])
    lc_adapter.append(ns, 0, [NewRecord(b"keep")])
    shard = _shard(lc_adapter, ns)
    sizes: list[int] = []
    original = shard.expire_offsets

    def spy(found: Sequence[int], at: int) -> Any:
        sizes.append(len(found))
        return original(found, at)

    monkeypatch.setattr(shard, "expire_offsets", spy)
    clock.advance(1)
    assert offsets(lc_adapter, ns) == [600]  # the read hides them and queues their clean-up
    result = lc_adapter.drain_read_checks()
    assert result.expired_records == 600
    assert sum(sizes) == 600 and max(sizes) <= pacing.SLICE_CHUNK
    assert_verified(lc_adapter)


# -- where the next scan starts (RocksDB-indexed adapters) -----------------------------------------------
def test_the_next_scan_starts_where_the_last_one_stopped(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    store = _store(lc_adapter)
    ns = make_ns(lc_adapter, scan_batch_size=4, max_delete_per_scan=10)
    other = make_ns(lc_adapter, "other")
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(b"x", expire_at=now + 1 + i % 5) for i in range(25)])
    append_one(lc_adapter, other, expire_at=now + 1)
    clock.advance(10)
    ns_id, other_id = _ns_id(lc_adapter, ns), _ns_id(lc_adapter, other)
    first_key = (now + 1).to_bytes(8, "big")
    assert store.ttl_start([ns_id])[:8] == first_key  # no scan yet: its first entry
    first = lc_adapter.expire_scan(ns)
    assert (first.expired_records, first.more) == (10, True)
    stop = store.ttl_start([ns_id])
    assert stop > first_key and store.ttl_start([other_id])[:8] == first_key  # the other one's start stays
    due = sorted(e for e, o in store.ttl_entries_of(ns_id, 0))
    assert stop[:8] <= due[0].to_bytes(8, "big")  # nothing left below it
    second = lc_adapter.expire_scan(ns)
    assert second.scanned <= 11 + 10  # the 10 it deleted are not walked again (nor counted)
    third = lc_adapter.expire_scan(ns)
    assert (second.expired_records + third.expired_records, third.more) == (15, False)
    assert offsets(lc_adapter, ns) == []
    assert lc_adapter.expire_scan(None, manual=True).expired_records == 1  # the sweep still sees the other's
    assert store.ttl_start([ns_id, other_id]) == (clock.now_ms() + 1).to_bytes(8, "big")
    assert_verified(lc_adapter)


def test_an_entry_written_below_where_the_scan_stopped_is_found(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    store = _store(lc_adapter)
    ns = make_ns(lc_adapter)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(b"x", expire_at=now + 50) for _ in range(5)])
    clock.advance(100)
    assert lc_adapter.expire_scan(ns).expired_records == 5
    late = append_one(lc_adapter, ns, key=b"late", expire_at=now + 10)  # due long before where the scan stopped
    assert lc_adapter.expire_scan(ns).expired_records == 1
    assert lc_adapter.read_key(ns, 0, b"late") is None
    assert store.ttl_entries_of(_ns_id(lc_adapter, ns), 0) == []
    assert late == 5
    assert_verified(lc_adapter)


def test_an_entry_written_while_the_scan_runs_is_found_by_the_next(
    lc_adapter: StorageAdapter, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(lc_adapter)
    ns = make_ns(lc_adapter, scan_batch_size=10)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(b"x", expire_at=now + 20) for _ in range(50)])
    clock.advance(30)
    shard = _shard(lc_adapter, ns)
    original = shard.expire_entries
    written: list[int] = []

    def write_meanwhile(entries: Sequence[TTLEntry], at: int) -> Any:
        if not written:  # below every entry the scan has left, after its iterator began
            written.append(append_one(lc_adapter, ns, b"mid", expire_at=now + 1))
        return original(entries, at)

    monkeypatch.setattr(shard, "expire_entries", write_meanwhile)
    first = lc_adapter.expire_scan(ns).expired_records
    monkeypatch.setattr(shard, "expire_entries", original)
    assert first + lc_adapter.expire_scan(ns).expired_records == 51
    assert offsets(lc_adapter, ns) == []
    assert store.ttl_entries_of(_ns_id(lc_adapter, ns), 0) == []
    assert_verified(lc_adapter)


def test_a_failed_scan_leaves_the_next_one_everything(
    lc_adapter: StorageAdapter, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _store(lc_adapter)
    ns = make_ns(lc_adapter, scan_batch_size=5)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(b"x", expire_at=now + 5) for _ in range(10)])
    clock.advance(5)
    assert lc_adapter.expire_scan(ns).expired_records == 10  # a resume point exists now
    append_one(lc_adapter, ns, expire_at=now + 1)  # below it
    lc_adapter.append(ns, 0, [NewRecord(b"y", expire_at=now + 6) for _ in range(10)])
    clock.advance(1)
    shard = _shard(lc_adapter, ns)
    original = shard.expire_entries
    calls = [0]

    def fail_second(entries: Sequence[TTLEntry], at: int) -> Any:
        calls[0] += 1
        if calls[0] == 2:
            raise OSError("disk gone")
        return original(entries, at)

    monkeypatch.setattr(shard, "expire_entries", fail_second)
    with pytest.raises(OSError):
        lc_adapter.expire_scan(ns)
    monkeypatch.setattr(shard, "expire_entries", original)
    lc_adapter.expire_scan(ns)
    assert offsets(lc_adapter, ns) == []
    assert_verified(lc_adapter)


def test_a_shard_scan_moves_no_resume_point(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    store = _store(lc_adapter)
    ns = make_ns(lc_adapter, shards=2)
    now = clock.now_ms()
    for shard in (0, 1):
        lc_adapter.append(ns, shard, [NewRecord(b"x", expire_at=now + 1) for _ in range(3)])
    clock.advance(1)
    before = store.ttl_start([_ns_id(lc_adapter, ns)])
    assert lc_adapter.expire_scan(ns, shard=1).expired_records == 3
    assert store.ttl_start([_ns_id(lc_adapter, ns)]) == before  # shard 0's entries lie there
    assert lc_adapter.expire_scan(ns).expired_records == 3
    assert_verified(lc_adapter)


def test_a_new_namespace_adds_nothing_to_a_sweep(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    store = _store(lc_adapter)
    ns = make_ns(lc_adapter)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(b"x", expire_at=now + 1) for _ in range(20)])
    clock.advance(1)
    assert lc_adapter.expire_scan(None, manual=True).expired_records == 20
    swept = store.ttl_start([_ns_id(lc_adapter, ns)])
    fresh = make_ns(lc_adapter, "fresh")  # no entry yet: it does not send the next sweep back to the start
    assert store.ttl_start([_ns_id(lc_adapter, ns), _ns_id(lc_adapter, fresh)]) == swept
    append_one(lc_adapter, fresh, expire_at=now)  # long due: below where the sweep stopped
    assert lc_adapter.expire_scan(None, manual=True).expired_records == 1
    assert lc_adapter.expire_scan(fresh).expired_records == 0
    assert_verified(lc_adapter)


def test_a_produce_request_is_foreground_from_first_byte_to_last() -> None:
    import asyncio

    from starlette.concurrency import run_in_threadpool

    from storage_engine.node.app import ProduceIsForeground

    class Engine:
        foreground = Foreground()

    seen: list[tuple[int, int]] = []

    def append() -> int:  # what the engine's append does, in the thread pool
        with Engine.foreground.running():
            return Engine.foreground.active

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        seen.append((Engine.foreground.active, await run_in_threadpool(append)))

    middleware = ProduceIsForeground(inner, Engine())  # type: ignore[arg-type]

    async def requests() -> None:
        for method, path in (
            ("POST", "/v1/namespaces/a/shards/0/records"),
            ("POST", "/v1/namespaces/a/records"),
            ("GET", "/v1/namespaces/a/shards/0/records"),
            ("POST", "/v1/node/lifecycle/expire-scan"),
        ):
            await middleware({"type": "http", "method": method, "path": path}, None, None)  # type: ignore[arg-type]

    asyncio.run(requests())
    # A produce counts once, the engine's append within it too; other requests only by their append.
    assert seen == [(1, 1), (1, 1), (0, 1), (0, 1)]
    assert Engine.foreground.active == 0


def test_running_counts_once_and_idle_stretches_not_at_all() -> None:
    fg = Foreground()
    with fg.running():
        with fg.running():
            assert fg.active == 1
        with fg.idle():
            assert fg.active == 0
            assert fg.wait_turn(10) is False  # nothing to wait for while the call only waits
        assert fg.active == 1
    assert fg.active == 0
    with fg.idle():  # outside a call: nothing to take out
        assert fg.active == 0


def test_a_producer_held_by_its_backlog_quota_holds_no_scan_back(
    lc_adapter: StorageAdapter, clock: ManualClock
) -> None:
    ns = make_ns(
        lc_adapter,
        backlog_quota_bytes=1,
        backlog_quota_policy="producer_request_hold",
        backlog_hold_timeout_ms=100,
        retention_bytes=1 << 30,
    )
    lc_adapter.create_subscription(ns, "slow")  # type: ignore[attr-defined]
    append_one(lc_adapter, ns, b"x" * 100)
    foreground = lc_adapter.foreground  # type: ignore[attr-defined]
    seen: list[int] = []

    def sleep(seconds: float) -> None:  # the hold's wait: a scan would see this many appends in flight
        seen.append(foreground.active)
        clock.advance(int(seconds * 1000) or 1)

    lc_adapter.sleep = sleep  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="held"):
        append_one(lc_adapter, ns, b"y")
    assert seen and set(seen) == {0}
    assert foreground.active == 0
