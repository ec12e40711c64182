"""A stateful property test of the whole lifecycle on every adapter: appends, reads,
TTL scans, read-check drains, retention, file cleaning, reclamation and clock jumps,
interleaved at random.

Invariants after every step:

- reads never return an expired record, and return every acknowledged, unexpired
  record at or after the log start, with its value;
- the log start only moves past unexpired records through retention or file
  cleaning (the operations whose job that is); expiry and reclamation never lose an
  unexpired acknowledged record;
- offsets are never reused; ``verify()`` is clean.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule, run_state_machine_as_test

from storage_engine.api import NewRecord
from storage_engine.policies.policy import NamespacePolicy, NodePolicy
from storage_engine.rules.expiry import is_expired
from tests.storage_engine.conftest import ADAPTER_MODULES
from tests.storage_engine.lifecycle_util import EngineMachine

TTL_MS = 6_000


class Lifecycle(EngineMachine):
    node_policy = NodePolicy(file_reserved_ms=30_000, file_delete_delay_ms=5_000)

    def __init__(self) -> None:
        super().__init__()
        policy = NamespacePolicy(
            ttl_ms=TTL_MS, retention_ms=40_000, segment_bytes=1024, reclaim_dead_ratio=0.3, scan_batch_size=4
        )
        self.engine.create_namespace("p", 1, policy)
        self.model: dict[int, tuple[int, int | None, bytes]] = {}  # offset → (timestamp, expire_at, value)
        self.end = 0
        self.start = 0
        self.seq = 0

    def expired(self, offset: int) -> bool:
        ts, exp, _ = self.model[offset]
        return is_expired(ts, exp, TTL_MS, self.clock.now_ms())

    def moved_start(self, allowed: bool) -> None:
        start = self.engine.shard_stats("p", 0).log_start_offset
        assert start >= self.start
        if not allowed:
            lost = [o for o in range(self.start, start) if o in self.model and not self.expired(o)]
            assert lost == [], f"unexpired records below the new log start {start}: {lost}"
        for o in range(self.start, start):
            self.model.pop(o, None)
        self.start = start

    @rule(
        count=st.integers(1, 4),
        ttl=st.one_of(st.none(), st.integers(1, 12_000)),
        keyed=st.booleans(),
        tagged=st.booleans(),
        big=st.booleans(),
    )
    def append(self, count: int, ttl: int | None, keyed: bool, tagged: bool, big: bool) -> None:
        now = self.clock.now_ms()
        records = []
        for _ in range(count):
            self.seq += 1
            value = b"%d:" % self.seq + (b"x" * 200 if big else b"")
            exp = None if ttl is None else now + ttl
            records.append(
                NewRecord(
                    value, key=b"k%d" % (self.seq % 5) if keyed else None, tags=("t",) if tagged else (), expire_at=exp
                )
            )
        result = self.engine.append("p", 0, records)
        assert result.base_offset == self.end
        for i, r in enumerate(records):
            self.model[self.end + i] = (now, r.expire_at, r.value or b"")
        self.end += count

    @rule(ms=st.integers(0, 9_000))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @precondition(lambda self: self.end > self.start)
    @rule(data=st.data())
    def read_at(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.start, self.end))
        page = self.engine.read("p", 0, offset, max_records=3)
        for r in page.records:
            assert not self.expired(r.offset)
            assert r.value == self.model[r.offset][2]
        visible = [o for o in sorted(self.model) if o >= offset and not self.expired(o)]
        assert [r.offset for r in page.records] == visible[:3]

    @rule(limit=st.one_of(st.none(), st.integers(1, 5)))
    def scan(self, limit: int | None) -> None:
        self.engine.expire_scan("p", limit=limit)
        self.moved_start(allowed=False)

    @rule()
    def drain(self) -> None:
        self.engine.drain_read_checks()
        self.moved_start(allowed=False)

    @rule(limit=st.one_of(st.none(), st.integers(1, 3)))
    def reclaim(self, limit: int | None) -> None:
        self.engine.reclaim("p", limit=limit, manual=True)
        self.moved_start(allowed=False)

    @rule()
    def retention(self) -> None:
        self.engine.apply_retention("p")
        self.moved_start(allowed=True)

    @rule()
    def clean(self) -> None:
        self.engine.clean_files(manual=True)
        self.moved_start(allowed=True)

    @invariant()
    def reads_and_indexes_agree(self) -> None:
        stats = self.engine.shard_stats("p", 0)
        assert stats.end_offset == self.end and stats.log_start_offset == self.start
        seen = []
        offset = self.start
        while True:
            page = self.engine.read("p", 0, offset, max_records=50)
            if not page.records:
                break
            seen += [r.offset for r in page.records]
            offset = page.next_offset
        assert seen == [o for o in sorted(self.model) if not self.expired(o)]
        report = self.engine.verify("p")
        assert report.ok, report.problems


@pytest.mark.parametrize("adapter_name", list(ADAPTER_MODULES))
def test_lifecycle_state_machine(adapter_name: str) -> None:
    machine = type(f"Lifecycle_{adapter_name}", (Lifecycle,), {"adapter_name": adapter_name})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=60 if adapter_name == "memory" else 30,
            stateful_step_count=50,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
