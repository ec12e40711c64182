"""A stateful property test of the expired figures (DESIGN §3 "Figures") on every adapter.

Appends with producer timestamps in the past, explicit TTLs or none, keys and
tombstones; clock moves; namespace TTL changes; TTL scans, read-check drains,
reclamation, key compaction and retention, interleaved at random. After every
step, each segment's ``expired_records`` / ``expired_bytes`` / ``live_count``
must equal a model computed from the records the engine really stores (every
stored record whose effective expiry has passed or that is marked dead), the
segments must add up to the shard, and the shard's live count must equal what
a reader actually receives.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule, run_state_machine_as_test

from storage_engine.api import NewRecord, Record
from storage_engine.formats.codec import encoded_size
from storage_engine.policies.policy import NamespacePolicy, NodePolicy
from storage_engine.rules.expiry import is_expired
from tests.storage_engine.conftest import ADAPTER_MODULES
from tests.storage_engine.lifecycle_util import EngineMachine

NS = "f"


def stored_records(engine: Any, adapter_name: str) -> Iterator[tuple[Record, int, bool]]:
    """(record, size as the adapter counts it, marked dead) of every record the shard stores.

    White-box on purpose: the figures must match what is really stored, dead marks
    and records a reader no longer sees included."""
    if adapter_name == "memory":
        shard = engine._namespace(NS).shards[0]
        with shard.lock:
            rows = [
                (r, seg.sizes[r.offset - seg.base_offset], r.offset in seg.dead)
                for seg in shard.segments
                for r in seg.present()
            ]
        yield from rows
        return
    log = engine._shard(NS, 0)
    dead = set(log.index.store.dead_offsets(log.index.prefix))
    with log.reading() as view:
        records = list(log.iter_records(view, view.log_start_offset))
    for r in records:
        yield r, encoded_size(r), r.offset in dead


class Figures(EngineMachine):
    node_policy = NodePolicy(file_delete_delay_ms=0)

    def __init__(self) -> None:
        super().__init__()
        self.policy = NamespacePolicy(
            ttl_ms=8_000,
            cleanup_policy="compact,delete",
            retention_ms=60_000,
            segment_bytes=1024,
            reclaim_dead_ratio=0.3,
            scan_batch_size=3,
            min_compaction_lag_ms=0,
        )
        self.engine.create_namespace(NS, 1, self.policy)
        self.seq = 0

    @rule(
        count=st.integers(1, 5),
        age=st.integers(0, 10_000),
        ttl=st.one_of(st.none(), st.integers(1, 15_000)),
        tombstone=st.booleans(),
        big=st.booleans(),
    )
    def append(self, count: int, age: int, ttl: int | None, tombstone: bool, big: bool) -> None:
        now = self.clock.now_ms()
        records = []
        for i in range(count):
            self.seq += 1
            value = None if tombstone and i == 0 else b"%d:" % self.seq + (b"x" * 150 if big else b"")
            records.append(
                NewRecord(
                    value,
                    key=b"k%d" % (self.seq % 6),
                    timestamp=max(0, now - age),
                    expire_at=None if ttl is None else now + ttl,
                )
            )
        self.engine.append(NS, 0, records)

    @rule(ms=st.integers(0, 9_000))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(ttl=st.one_of(st.none(), st.integers(1, 20_000)))
    def set_ttl(self, ttl: int | None) -> None:
        self.policy = NamespacePolicy(**{**self.policy.to_dict(), "ttl_ms": ttl})
        self.engine.update_namespace(NS, self.policy)

    @rule(limit=st.one_of(st.none(), st.integers(1, 5)))
    def scan(self, limit: int | None) -> None:
        self.engine.expire_scan(NS, limit=limit, manual=True)

    @rule()
    def drain(self) -> None:
        self.engine.drain_read_checks()

    @rule(limit=st.one_of(st.none(), st.integers(1, 3)))
    def reclaim(self, limit: int | None) -> None:
        self.engine.reclaim(NS, limit=limit, manual=True)

    @rule()
    def compact(self) -> None:
        self.engine.compact(NS, manual=True)

    @rule()
    def retention(self) -> None:
        self.engine.apply_retention(NS)

    @invariant()
    def figures_equal_the_model(self) -> None:
        now, ttl_ms = self.clock.now_ms(), self.policy.ttl_ms
        rows = list(stored_records(self.engine, self.adapter_name))
        segments = self.engine.list_segments(NS, 0)
        stats = self.engine.shard_stats(NS, 0)
        for seg in segments:
            mine = [(r, size, dead) for r, size, dead in rows if seg.base_offset <= r.offset <= seg.last_offset]
            expired = [(r, size) for r, size, dead in mine if dead or is_expired(r.timestamp, r.expire_at, ttl_ms, now)]
            assert seg.record_count == len(mine), seg
            assert seg.expired_records == len(expired), (seg, now, ttl_ms)
            assert seg.live_count == len(mine) - len(expired)
            whole = bool(mine) and len(expired) == len(mine)
            assert seg.expired_bytes == (seg.size_bytes if whole else sum(size for _, size in expired)), seg
        assert stats.record_count == sum(s.record_count for s in segments) == len(rows)
        assert stats.expired_records == sum(s.expired_records for s in segments)
        assert stats.expired_bytes == sum(s.expired_bytes for s in segments)
        assert stats.live_count == stats.record_count - stats.expired_records
        expected_ratio = stats.expired_records / stats.record_count if stats.record_count else 0.0
        assert stats.expired_ratio == pytest.approx(expected_ratio)
        # What a reader receives is exactly the live count.
        seen, offset = 0, stats.log_start_offset
        while True:
            page = self.engine.read(NS, 0, offset, max_records=100)
            if not page.records:
                break
            seen += len(page.records)
            offset = page.next_offset
        assert seen == stats.live_count


@pytest.mark.parametrize("adapter_name", list(ADAPTER_MODULES))
def test_expired_figures_are_exact(adapter_name: str) -> None:
    machine = type(f"Figures_{adapter_name}", (Figures,), {"adapter_name": adapter_name})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=50 if adapter_name == "memory" else 25,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
