"""Key compaction's dry run and estimate predict the real run exactly (DESIGN §3 "Dry runs").

On random keyed data (updates of a few keys, tombstones, records with and without a deadline)
spread over sealed segments and the active one: ``compact(dry_run=True)`` reports the counts
``compact()`` then reports on the same state (records removed and written, segments deleted and
rewritten, bytes reclaimed and after); ``compaction_estimate`` counts the active segment as rolled
and says which part of its figures waits for that roll, and the rest equals the real run's counts
(all of it when the real run rolls the active segment itself, by the idle-segment rule). Every
adapter, the injected clock, no sleeping.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage_engine import open_engine
from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.config import Durability, EngineConfig
from storage_engine.policies.policy import NamespacePolicy
from tests.storage_engine.conftest import ADAPTER_MODULES

LAG_MS = 60_000
COUNTS = ("records_removed", "records_written", "segments_deleted", "segments_rewritten", "bytes_reclaimed")

record = st.tuples(
    st.integers(0, 7),  # key
    st.integers(0, 80),  # value size; 0: a tombstone
    st.sampled_from([None, 400, 10**12]),  # lives this long (None: no deadline)
)
batches = st.lists(st.lists(record, min_size=1, max_size=12), min_size=1, max_size=10)


@contextmanager
def engine(adapter_name: str) -> Iterator[tuple[StorageAdapter, ManualClock]]:
    clock = ManualClock()
    with tempfile.TemporaryDirectory() as tmp:
        config = EngineConfig(
            data_dir=Path(tmp) / "data",
            adapter=adapter_name,
            durability=Durability.NONE,
            lifecycle_worker=False,
            disk_capacity_bytes=1 << 40,
        )
        adapter = open_engine(config, clock=clock)
        try:
            yield adapter, clock
        finally:
            adapter.close()


def fill(adapter: StorageAdapter, clock: ManualClock, data: list[list[tuple[int, int, int | None]]]) -> None:
    policy = NamespacePolicy(
        cleanup_policy="compact",
        retention_ms=None,
        segment_bytes=1024,  # a few batches a segment: sealed segments and an active one
        max_compaction_lag_ms=LAG_MS,
        delete_retention_ms=0,  # tombstones go at the clean after the one that kept them
        segment_expired_roll_ratio=None,  # only the lag rolls the active segment here
    )
    adapter.create_namespace("c", 1, policy)
    for batch in data:
        now = clock.now_ms()
        adapter.append(
            "c",
            0,
            [
                NewRecord(
                    b"v" * size if size else None,
                    key=b"k%d" % key,
                    expire_at=None if lives is None else now + lives,
                )
                for key, size, lives in batch
            ],
        )
        clock.advance(50)


@pytest.mark.parametrize("adapter_name", list(ADAPTER_MODULES))
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=batches, idle=st.booleans(), wait=st.integers(0, 1_000))
def test_the_dry_run_and_the_estimate_report_what_compaction_then_does(
    adapter_name: str, data: list[list[tuple[int, int, int | None]]], idle: bool, wait: int
) -> None:
    with engine(adapter_name) as (adapter, clock):
        fill(adapter, clock, data)
        clock.advance(wait + (LAG_MS + 1 if idle else 0))  # idle: the active segment is due to roll
        active_records = adapter.list_segments("c", 0)[-1].record_count

        def layout() -> list[tuple[int, int, int, str]]:
            return [(g.base_offset, g.record_count, g.size_bytes, g.state.value) for g in adapter.list_segments("c", 0)]

        before = layout()
        estimate = adapter.compaction_estimate("c")
        dry = adapter.compact("c", dry_run=True, manual=True)
        assert layout() == before  # neither changed anything
        real = adapter.compact("c", manual=True)
        # The dry run counted what the real run then did.
        assert dry.rolled == real.rolled
        assert [getattr(dry, n) for n in COUNTS] == [getattr(real, n) for n in COUNTS]
        assert dry.bytes_after == real.bytes_after
        # The estimate counts the active segment as rolled; less the part that waits for the roll, it is
        # exactly what compaction does now.
        assert estimate.records_removable - estimate.active_records_removable == real.records_removed
        assert estimate.reclaimable_bytes - estimate.active_bytes_reclaimable == real.bytes_reclaimed
        assert estimate.bytes_before == real.bytes_before
        if real.rolled or active_records == 0:  # the real run sealed the active segment itself: nothing waits
            assert (estimate.active_records_removable, estimate.active_bytes_reclaimable) == (0, 0)
            assert estimate.bytes_after == real.bytes_after
        else:
            assert estimate.active_records_removable >= 0 and estimate.active_bytes_reclaimable >= 0


@pytest.mark.parametrize("adapter_name", list(ADAPTER_MODULES))
def test_the_estimate_counts_an_active_segment_of_repeated_keys(adapter_name: str) -> None:
    """The reported case: 500 records over 10 keys, all in the active segment, which the idle-segment
    rule later compacts to 10: the estimate said 0 removable."""
    with engine(adapter_name) as (adapter, clock):
        adapter.create_namespace("c", 1, NamespacePolicy(cleanup_policy="compact", max_compaction_lag_ms=LAG_MS))
        for i in range(50):
            adapter.append("c", 0, [NewRecord(b"v%d" % i, key=b"k%d" % k) for k in range(10)])
        estimate = adapter.compaction_estimate("c")
        assert (estimate.records_removable, estimate.active_records_removable) == (490, 490)
        assert 0 < estimate.active_bytes_reclaimable == estimate.reclaimable_bytes
        assert adapter.list_segments("c", 0)[-1].record_count == 500  # nothing changed
        clock.advance(LAG_MS + 1)  # the idle-segment rule rolls it now: the compaction removes what was said
        real = adapter.compact("c", manual=True)
        assert (real.rolled, real.records_removed) == (1, estimate.records_removable)
