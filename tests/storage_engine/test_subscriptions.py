"""Subscriptions, cursors, backlog and message TTL (Pulsar semantics, DESIGN §2 and §3), on every adapter."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.errors import (
    AlreadyRunningError,
    InvalidArgumentError,
    SubscriptionExistsError,
    UnknownNamespaceError,
    UnknownShardError,
    UnknownSubscriptionError,
)
from storage_engine.policies.policy import NamespacePolicy
from tests.storage_engine.conftest import OpenAdapter
from tests.storage_engine.lifecycle_util import make_ns

MIN = 60_000


def fill(adapter: StorageAdapter, ns: str, n: int, shard: int = 0, **fields: Any) -> list[int]:
    return [adapter.append(ns, shard, [NewRecord(b"x" * 10, **fields)]).base_offset for _ in range(n)]


# -- create / delete / list ----------------------------------------------------------------------------------
def test_create_list_delete(lc_adapter: StorageAdapter) -> None:
    ns = make_ns(lc_adapter, shards=2)
    fill(lc_adapter, ns, 3)
    a = lc_adapter.create_subscription(ns, "b-sub")
    assert a.cursors == (-1, -1)
    latest = lc_adapter.create_subscription(ns, "a-sub", initial="latest")
    assert latest.cursors == (2, -1)
    assert [s.name for s in lc_adapter.list_subscriptions(ns)] == ["a-sub", "b-sub"]
    with pytest.raises(SubscriptionExistsError) as exc:
        lc_adapter.create_subscription(ns, "a-sub")
    assert exc.value.code == "subscription_exists"
    lc_adapter.delete_subscription(ns, "a-sub")
    assert [s.name for s in lc_adapter.list_subscriptions(ns)] == ["b-sub"]
    with pytest.raises(UnknownSubscriptionError) as missing:
        lc_adapter.delete_subscription(ns, "a-sub")
    assert missing.value.code == "unknown_subscription"
    assert "a-sub" in str(missing.value)


def test_bad_arguments(lc_adapter: StorageAdapter) -> None:
    ns = make_ns(lc_adapter)
    with pytest.raises(InvalidArgumentError, match="name"):
        lc_adapter.create_subscription(ns, "bad name!")
    with pytest.raises(InvalidArgumentError, match="initial"):
        lc_adapter.create_subscription(ns, "s", initial="middle")
    with pytest.raises(UnknownNamespaceError):
        lc_adapter.create_subscription("nope", "s")
    lc_adapter.create_subscription(ns, "s")
    with pytest.raises(UnknownShardError):
        lc_adapter.acknowledge(ns, "s", 3, 0)
    with pytest.raises(UnknownSubscriptionError):
        lc_adapter.read_subscription(ns, "other", 0)


def test_delete_namespace_drops_subscriptions(lc_adapter: StorageAdapter) -> None:
    ns = make_ns(lc_adapter)
    lc_adapter.create_subscription(ns, "s")
    lc_adapter.delete_namespace(ns)
    make_ns(lc_adapter)
    assert lc_adapter.list_subscriptions(ns) == []


# -- read and acknowledge ------------------------------------------------------------------------------------
def test_read_from_cursor_and_cumulative_ack(lc_adapter: StorageAdapter) -> None:
    ns = make_ns(lc_adapter)
    fill(lc_adapter, ns, 5)
    lc_adapter.create_subscription(ns, "s")
    assert [r.offset for r in lc_adapter.read_subscription(ns, "s", 0).records] == [0, 1, 2, 3, 4]
    assert lc_adapter.acknowledge(ns, "s", 0, 2) == 2
    assert [r.offset for r in lc_adapter.read_subscription(ns, "s", 0, max_records=2).records] == [3, 4]
    assert lc_adapter.acknowledge(ns, "s", 0, 1) == 2  # never backward
    assert lc_adapter.list_subscriptions(ns)[0].cursors == (2,)
    with pytest.raises(InvalidArgumentError, match="offset") as exc:
        lc_adapter.acknowledge(ns, "s", 0, 5)  # past the end
    assert "5" in str(exc.value)
    assert lc_adapter.acknowledge(ns, "s", 0, 4) == 4
    page = lc_adapter.read_subscription(ns, "s", 0)
    assert page.records == () and page.next_offset == 5


def test_read_subscription_skips_expired(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(b"a", expire_at=now + 10), NewRecord(b"b")])
    lc_adapter.create_subscription(ns, "s")
    clock.advance(10)
    assert [r.offset for r in lc_adapter.read_subscription(ns, "s", 0).records] == [1]


def test_subscriptions_persist_across_reopen(persistent_adapter_name: str, open_adapter: OpenAdapter) -> None:
    from storage_engine.config import Durability

    engine = open_adapter(Durability.FSYNC, lifecycle_worker=False)
    ns = make_ns(engine, shards=2)
    fill(engine, ns, 4)
    fill(engine, ns, 2, shard=1)
    engine.create_subscription(ns, "s1")
    engine.create_subscription(ns, "s2", initial="latest")
    engine.create_subscription(ns, "gone")
    engine.acknowledge(ns, "s1", 0, 2)
    engine.acknowledge(ns, "s1", 1, 0)
    engine.delete_subscription(ns, "gone")
    other = make_ns(engine, name="other")
    engine.create_subscription(other, "x")
    engine.delete_namespace(other)
    engine.close()
    engine = open_adapter(Durability.FSYNC, lifecycle_worker=False)
    subs = {s.name: s.cursors for s in engine.list_subscriptions(ns)}
    assert subs == {"s1": (2, 0), "s2": (3, 1)}
    assert [r.offset for r in engine.read_subscription(ns, "s1", 0).records] == [3]
    make_ns(engine, name="other")
    assert engine.list_subscriptions("other") == []


# -- seek (Pulsar's resetCursor): the one call that may move a cursor backward ------------------------------
def test_seek_moves_a_cursor_backward_and_forward(lc_adapter: StorageAdapter) -> None:
    ns = make_ns(lc_adapter, shards=2)
    fill(lc_adapter, ns, 6)
    fill(lc_adapter, ns, 2, shard=1)
    lc_adapter.create_subscription(ns, "s")
    lc_adapter.acknowledge(ns, "s", 0, 4)
    lc_adapter.acknowledge(ns, "s", 1, 1)
    assert lc_adapter.seek_subscription(ns, "s", 0, -1) == -1  # earliest: everything is backlog again
    assert [r.offset for r in lc_adapter.read_subscription(ns, "s", 0).records] == [0, 1, 2, 3, 4, 5]
    assert lc_adapter.backlog(ns, "s")[0].messages == 6
    assert lc_adapter.list_subscriptions(ns)[0].cursors == (-1, 1)  # only that shard moved
    assert lc_adapter.seek_subscription(ns, "s", 0, 2) == 2  # forward works too
    assert lc_adapter.seek_subscription(ns, "s", 0, 1) == 1  # and back again
    assert lc_adapter.acknowledge(ns, "s", 0, 0) == 1  # acknowledge still never goes backward
    assert lc_adapter.seek_subscription(ns, "s", 0, 5) == 5  # latest: nothing left
    assert lc_adapter.backlog(ns, "s")[0].messages == 0


def test_seek_to_a_time(lc_adapter: StorageAdapter) -> None:
    ns = make_ns(lc_adapter)
    for ts in (1_000, 2_000, 3_000, 4_000):
        lc_adapter.append(ns, 0, [NewRecord(b"v", timestamp=ts)])
    lc_adapter.create_subscription(ns, "s", initial="latest")
    assert lc_adapter.seek_subscription(ns, "s", 0, timestamp=2_500) == 1  # next read: offset 2 (t=3000)
    assert [r.timestamp for r in lc_adapter.read_subscription(ns, "s", 0).records] == [3_000, 4_000]
    assert lc_adapter.seek_subscription(ns, "s", 0, timestamp=0) == -1
    assert lc_adapter.seek_subscription(ns, "s", 0, timestamp=9_000) == 3  # nothing that late: the end


def test_seek_bad_arguments(lc_adapter: StorageAdapter) -> None:
    ns = make_ns(lc_adapter)
    fill(lc_adapter, ns, 3)
    lc_adapter.create_subscription(ns, "s")
    with pytest.raises(InvalidArgumentError, match="past the end") as past:
        lc_adapter.seek_subscription(ns, "s", 0, 3)
    assert past.value.field == "position"
    for bad in (-2, True, "1", 1.0):
        with pytest.raises(InvalidArgumentError) as exc:
            lc_adapter.seek_subscription(ns, "s", 0, bad)  # type: ignore[arg-type]
        assert exc.value.field == "position"
    with pytest.raises(InvalidArgumentError) as both:
        lc_adapter.seek_subscription(ns, "s", 0, 1, timestamp=5)
    assert both.value.field == "position"
    with pytest.raises(InvalidArgumentError):
        lc_adapter.seek_subscription(ns, "s", 0)
    with pytest.raises(InvalidArgumentError) as ts:
        lc_adapter.seek_subscription(ns, "s", 0, timestamp=-5)
    assert ts.value.field == "timestamp"
    with pytest.raises(UnknownShardError):
        lc_adapter.seek_subscription(ns, "s", 1, 0)
    with pytest.raises(UnknownSubscriptionError):
        lc_adapter.seek_subscription(ns, "nope", 0, 0)
    assert lc_adapter.list_subscriptions(ns)[0].cursors == (-1,)  # nothing refused changed anything


@contextlib.contextmanager
def expiry_held_in_a_read(adapter: StorageAdapter, clock: ManualClock) -> Iterator[tuple[str, list[Any]]]:
    """A namespace of three records past a one-minute TTL with a subscription ``s``, and a message-TTL check
    of it running in another thread, held inside its read until the block ends (its result is then in the
    list)."""
    ns = make_ns(adapter, ttl_ms=MIN)
    fill(adapter, ns, 3)
    adapter.create_subscription(ns, "s")
    clock.advance(MIN)
    inside, release = threading.Event(), threading.Event()
    real_read = adapter.read

    def slow_read(*args: Any, **kwargs: Any) -> Any:
        inside.set()
        assert release.wait(10)
        return real_read(*args, **kwargs)

    adapter.read = slow_read  # type: ignore[method-assign]
    results: list[Any] = []
    t = threading.Thread(target=lambda: results.append(adapter.expire_subscriptions(ns)))
    t.start()
    try:
        assert inside.wait(10)
        yield ns, results
    finally:
        release.set()
        t.join(10)
        adapter.read = real_read  # type: ignore[method-assign]


def test_seek_waits_for_no_message_ttl_check(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    """A TTL check read the old cursor and moves it forward: a seek meanwhile is refused, not undone."""
    with expiry_held_in_a_read(lc_adapter, clock) as (ns, _), pytest.raises(AlreadyRunningError):
        lc_adapter.seek_subscription(ns, "s", 0, -1)
    assert lc_adapter.list_subscriptions(ns)[0].cursors == (2,)
    assert lc_adapter.seek_subscription(ns, "s", 0, -1) == -1  # free again


def test_seek_persists_across_reopen(persistent_adapter_name: str, open_adapter: OpenAdapter) -> None:
    from storage_engine.config import Durability

    engine = open_adapter(Durability.FSYNC, lifecycle_worker=False)
    ns = make_ns(engine, shards=2)
    fill(engine, ns, 4)
    engine.create_subscription(ns, "s", initial="latest")
    engine.seek_subscription(ns, "s", 0, 0)
    engine.close()
    engine = open_adapter(Durability.FSYNC, lifecycle_worker=False)
    assert engine.list_subscriptions(ns)[0].cursors == (0, -1)
    assert [r.offset for r in engine.read_subscription(ns, "s", 0).records] == [1, 2, 3]


# -- backlog -------------------------------------------------------------------------------------------------
def test_backlog_messages_bytes_age(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, shards=2)
    t0 = clock.now_ms()
    fill(lc_adapter, ns, 4)
    clock.advance(5_000)
    lc_adapter.create_subscription(ns, "s")
    rows = lc_adapter.backlog(ns, "s")
    assert [(b.shard, b.messages, b.age_ms) for b in rows] == [(0, 4, 5_000), (1, 0, 0)]
    stored = lc_adapter.shard_stats(ns, 0).size_bytes
    assert rows[0].bytes == stored and rows[1].bytes == 0
    lc_adapter.acknowledge(ns, "s", 0, 1)
    row = lc_adapter.backlog(ns, "s")[0]
    assert row.messages == 2 and row.cursor == 1
    assert 0 < row.bytes < stored
    assert row.age_ms == clock.now_ms() - t0
    lc_adapter.acknowledge(ns, "s", 0, 3)
    row = lc_adapter.backlog(ns)[0]
    assert (row.messages, row.bytes, row.age_ms) == (0, 0, 0)
    assert row.to_dict()["subscription"] == "s"


def test_backlog_counts_only_stored_records(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, segment_ms=1_000)
    fill(lc_adapter, ns, 3)
    clock.advance(2_000)
    fill(lc_adapter, ns, 2)  # a second segment
    lc_adapter.create_subscription(ns, "s")
    lc_adapter.update_namespace(ns, NamespacePolicy(segment_ms=1_000, retention_ms=1_500))
    lc_adapter.apply_retention(ns)
    assert lc_adapter.shard_stats(ns, 0).log_start_offset == 3
    assert lc_adapter.backlog(ns, "s")[0].messages == 2
    assert [r.offset for r in lc_adapter.read_subscription(ns, "s", 0).records] == [3, 4]


# -- message TTL (Pulsar's PersistentMessageExpiryMonitor cases) ---------------------------------------------
def test_expiry_by_ttl_moves_cursor_past_expired(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, ttl_ms=MIN)
    fill(lc_adapter, ns, 3)
    clock.advance(30_000)
    fill(lc_adapter, ns, 2)
    lc_adapter.create_subscription(ns, "s")
    lc_adapter.create_subscription(ns, "ahead")
    lc_adapter.acknowledge(ns, "ahead", 0, 3)
    clock.advance(30_000)  # the first three expire
    result = lc_adapter.expire_subscriptions(ns)
    assert (result.messages_acknowledged, result.cursors_moved, result.expired_records) == (3, 1, 0)
    cursors = {s.name: s.cursors for s in lc_adapter.list_subscriptions(ns)}
    assert cursors == {"s": (2,), "ahead": (3,)}  # never backward
    clock.advance(30_000)  # everything expired: never past the end
    assert lc_adapter.expire_subscriptions(ns, 0, name="s").messages_acknowledged == 2
    assert lc_adapter.list_subscriptions(ns)[1].cursors == (4,)
    assert lc_adapter.stats().counters["subscription_ttl_expired_total"] == 5  # "ahead" was not named


def test_expiry_by_explicit_expire_at(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter)
    now = clock.now_ms()
    lc_adapter.append(ns, 0, [NewRecord(b"a", expire_at=now + 5), NewRecord(b"b", expire_at=now + 5), NewRecord(b"c")])
    lc_adapter.create_subscription(ns, "s")
    assert lc_adapter.expire_subscriptions(ns).messages_acknowledged == 0
    clock.advance(5)
    assert lc_adapter.expire_subscriptions(ns).messages_acknowledged == 2
    assert lc_adapter.list_subscriptions(ns)[0].cursors == (1,)


def test_expire_to_position(lc_adapter: StorageAdapter) -> None:
    ns = make_ns(lc_adapter)
    fill(lc_adapter, ns, 10)
    lc_adapter.create_subscription(ns, "s")
    assert lc_adapter.expire_subscriptions(ns, 0, position=5).messages_acknowledged == 6
    assert lc_adapter.list_subscriptions(ns)[0].cursors == (5,)
    # A later call with an earlier position changes nothing.
    assert lc_adapter.expire_subscriptions(ns, 0, position=3).messages_acknowledged == 0
    assert lc_adapter.list_subscriptions(ns)[0].cursors == (5,)
    # A position past the end changes nothing.
    assert lc_adapter.expire_subscriptions(ns, 0, position=10).messages_acknowledged == 0
    assert lc_adapter.list_subscriptions(ns)[0].cursors == (5,)
    with pytest.raises(InvalidArgumentError, match="shard"):
        lc_adapter.expire_subscriptions(ns, position=3)


def test_future_publish_time_expires_by_seal_time(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, ttl_ms=MIN, segment_ms=1_000)
    future = clock.now_ms() + 3_600_000
    fill(lc_adapter, ns, 3, timestamp=future)  # producer clocks an hour ahead
    clock.advance(10)
    fill(lc_adapter, ns, 1, timestamp=future + 5_000)  # rolls: the first segment is sealed
    assert len(lc_adapter.list_segments(ns, 0)) == 2
    lc_adapter.create_subscription(ns, "s")
    assert lc_adapter.expire_subscriptions(ns).messages_acknowledged == 0
    clock.advance(MIN)
    result = lc_adapter.expire_subscriptions(ns)
    assert result.messages_acknowledged == 3  # the sealed segment, by its seal time
    assert lc_adapter.list_subscriptions(ns)[0].cursors == (2,)


def test_concurrent_expiry_runs_once(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    with expiry_held_in_a_read(lc_adapter, clock) as (ns, results), pytest.raises(AlreadyRunningError):
        lc_adapter.expire_subscriptions(ns, name="s")
    assert results[0].messages_acknowledged == 3
    assert lc_adapter.list_subscriptions(ns)[0].cursors == (2,)
    assert lc_adapter.expire_subscriptions(ns).messages_acknowledged == 0  # free again


# -- retention respects subscriptions ------------------------------------------------------------------------
def test_retention_respects_subscriptions(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, segment_ms=1_000)
    for _ in range(3):  # three sealed segments of two records, then the active one
        fill(lc_adapter, ns, 2)
        clock.advance(2_000)
    fill(lc_adapter, ns, 1)
    assert len(lc_adapter.list_segments(ns, 0)) == 4
    lc_adapter.create_subscription(ns, "slow")
    lc_adapter.create_subscription(ns, "fast")
    lc_adapter.acknowledge(ns, "fast", 0, 6)
    lc_adapter.acknowledge(ns, "slow", 0, 2)  # covers the first segment only
    policy = NamespacePolicy(segment_ms=1_000, retention_ms=1_000, retention_respects_subscriptions=True)
    lc_adapter.update_namespace(ns, policy)
    clock.advance(10_000)
    assert lc_adapter.apply_retention(ns).segments_deleted == 1
    assert lc_adapter.shard_stats(ns, 0).log_start_offset == 2
    lc_adapter.acknowledge(ns, "slow", 0, 6)  # everything acknowledged: all of it may go
    lc_adapter.apply_retention(ns)
    stats = lc_adapter.shard_stats(ns, 0)
    assert stats.log_start_offset == stats.end_offset == 7
    lc_adapter.update_namespace(ns, NamespacePolicy(segment_ms=1_000, retention_ms=1_000))
    assert lc_adapter.backlog(ns, "slow")[0].messages == 0


def test_retention_ignores_subscriptions_without_the_flag(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(lc_adapter, segment_ms=1_000)
    fill(lc_adapter, ns, 2)
    clock.advance(2_000)
    fill(lc_adapter, ns, 1)
    lc_adapter.create_subscription(ns, "s")
    lc_adapter.update_namespace(ns, NamespacePolicy(segment_ms=1_000, retention_ms=1_000))
    clock.advance(10_000)
    assert lc_adapter.apply_retention(ns).segments_deleted >= 1
    assert lc_adapter.backlog(ns, "s")[0].messages == 0
