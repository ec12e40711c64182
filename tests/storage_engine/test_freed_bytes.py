"""Freed and pending bytes (issue 26; storage_engine.rules.work.count_freed): a step that deletes reports as
``bytes_reclaimed`` only the bytes it actually freed, and as ``pending_delete_bytes`` those still on disk as
``.deleted`` files (``file_delete_delay_ms``, or a reader holding them); the step that later removes them counts
them freed then, once. Retention, reclamation and file cleaning follow the one definition, and each dry run
reports what the real step then does. Stores without files free what they drop at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from storage_engine.api import LifecycleResult, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.policies.policy import NamespacePolicy, NodePolicy
from tests.storage_engine.conftest import OpenAdapter
from tests.storage_engine.lifecycle_util import append_one, assert_verified, make_ns

DELAY = 60_000
VALUE = b"x" * 300
FIGURES = ("segments_deleted", "records_removed", "bytes_reclaimed", "pending_delete_bytes", "files_removed")


def figures(result: LifecycleResult) -> dict[str, Any]:
    return {name: getattr(result, name) for name in FIGURES}


def deleted_files(engine: StorageAdapter, ns: str) -> dict[str, int]:
    directory = Path(engine.config.data_dir) / "segments" / ns / "0"  # type: ignore[attr-defined]
    return {p.name: p.stat().st_size for p in directory.glob("*.deleted")}


def open_with_delay(open_adapter: OpenAdapter, delay_ms: int = DELAY) -> StorageAdapter:
    return open_adapter(
        lifecycle_worker=False,
        disk_capacity_bytes=1 << 40,
        node_policy=NodePolicy(file_delete_delay_ms=delay_ms, destroy_forcibly_after_ms=10 * DELAY),
    )


def retention_half(engine: StorageAdapter, records: int = 30) -> tuple[str, int]:
    """A namespace of ~1 KiB segments whose retention_bytes keeps about half: (name, bytes retention drops)."""
    ns = make_ns(engine, segment_bytes=1024)
    for _ in range(records):
        append_one(engine, ns, VALUE)
    before = engine.list_segments(ns, 0)
    limit = sum(s.size_bytes for s in before) // 2
    engine.update_namespace(ns, NamespacePolicy(retention_ms=None, segment_bytes=1024, retention_bytes=limit))
    dropped, total = 0, sum(s.size_bytes for s in before)
    for s in before[:-1]:
        if total - s.size_bytes < limit:
            break
        dropped += s.size_bytes
        total -= s.size_bytes
    assert dropped > 0
    return ns, dropped


@pytest.mark.parametrize("adapter_name", ["segment"], indirect=True)
def test_retention_frees_nothing_while_its_files_wait_then_the_step_that_removes_them_frees_them(
    open_adapter: OpenAdapter, clock: ManualClock
) -> None:
    engine = open_with_delay(open_adapter)
    ns, dropped = retention_half(engine)
    dry = engine.apply_retention(ns, dry_run=True)
    real = engine.apply_retention(ns)
    assert figures(dry) == figures(real)
    assert (real.bytes_reclaimed, real.pending_delete_bytes) == (0, dropped)
    assert real.segments_deleted > 0 and real.files_removed == 0
    waiting = deleted_files(engine, ns)
    assert len(waiting) == real.segments_deleted and sum(waiting.values()) == dropped  # still on disk
    # Node-wide, the same figures (one namespace here), and a dry run changes nothing.
    assert figures(engine.apply_retention(None, dry_run=True)) == {
        **figures(real),
        "segments_deleted": 0,
        "records_removed": 0,
    }
    assert deleted_files(engine, ns) == waiting

    clock.advance(DELAY - 1)  # not yet due: nothing freed, still pending
    assert figures(engine.apply_retention(ns)) == {**figures(real), "segments_deleted": 0, "records_removed": 0}
    clock.advance(1)
    dry = engine.apply_retention(ns, dry_run=True)
    assert deleted_files(engine, ns) == waiting
    later = engine.apply_retention(ns)
    assert figures(dry) == figures(later)
    assert (later.bytes_reclaimed, later.pending_delete_bytes, later.files_removed) == (dropped, 0, len(waiting))
    assert later.segments_deleted == 0 and deleted_files(engine, ns) == {}
    assert engine.apply_retention(ns).bytes_reclaimed == 0  # counted once
    assert_verified(engine)


@pytest.mark.parametrize("adapter_name", ["segment"], indirect=True)
def test_reclaimed_segments_wait_as_pending_and_the_cleaner_frees_them(
    open_adapter: OpenAdapter, clock: ManualClock
) -> None:
    engine = open_with_delay(open_adapter)
    ns = make_ns(engine, segment_bytes=1024, ttl_ms=1000)
    for _ in range(20):
        append_one(engine, ns, VALUE)
    clock.advance(1000)
    sealed = engine.list_segments(ns, 0)[:-1]
    whole = sum(s.size_bytes for s in sealed)
    dry = engine.reclaim(ns, manual=True, dry_run=True)
    real = engine.reclaim(ns, manual=True)
    assert figures(dry) == figures(real)
    assert real.segments_deleted >= len(sealed) > 0
    assert real.bytes_reclaimed == 0 and real.pending_delete_bytes == sum(deleted_files(engine, ns).values()) >= whole
    pending = real.pending_delete_bytes
    clock.advance(DELAY)
    dry = engine.clean_files(dry_run=True)
    cleaned = engine.clean_files()
    assert (dry.bytes_reclaimed, dry.pending_delete_bytes) == (cleaned.bytes_reclaimed, cleaned.pending_delete_bytes)
    assert (cleaned.bytes_reclaimed, cleaned.pending_delete_bytes) == (pending, 0)
    assert deleted_files(engine, ns) == {}


@pytest.mark.parametrize("adapter_name", ["segment"], indirect=True)
def test_a_file_a_reader_holds_stays_pending_until_released(open_adapter: OpenAdapter, clock: ManualClock) -> None:
    engine = open_with_delay(open_adapter, delay_ms=0)
    ns, dropped = retention_half(engine)
    log = engine._shard(ns, 0)  # type: ignore[attr-defined]
    reader = log.iter_records(log.view, 0)
    assert next(reader).offset == 0  # holds the first segment's file
    held = engine.list_segments(ns, 0)[0].size_bytes
    dry = engine.apply_retention(ns, dry_run=True)
    real = engine.apply_retention(ns)
    assert figures(dry) == figures(real)
    assert (real.bytes_reclaimed, real.pending_delete_bytes) == (dropped - held, held)
    assert sum(deleted_files(engine, ns).values()) == held
    assert engine.apply_retention(ns).bytes_reclaimed == 0  # still held: still pending
    reader.close()
    dry = engine.apply_retention(ns, dry_run=True)
    later = engine.apply_retention(ns)
    assert figures(dry) == figures(later)
    assert (later.bytes_reclaimed, later.pending_delete_bytes) == (held, 0)
    assert deleted_files(engine, ns) == {}


@pytest.mark.parametrize("adapter_name", ["memory", "rocksdb"], indirect=True)
def test_stores_without_files_free_what_they_drop_at_once(open_adapter: OpenAdapter, clock: ManualClock) -> None:
    engine = open_with_delay(open_adapter)
    ns, _ = retention_half(engine)
    before = engine.list_segments(ns, 0)
    dry = engine.apply_retention(ns, dry_run=True)
    real = engine.apply_retention(ns)
    assert figures(dry) == figures(real)
    gone = before[: real.segments_deleted]
    assert real.segments_deleted > 0 and real.pending_delete_bytes == 0
    assert real.bytes_reclaimed == sum(s.size_bytes for s in gone)


@pytest.mark.parametrize("adapter_name", ["segment"], indirect=True)
@pytest.mark.parametrize("operation", ["reclaim", "retention"])
def test_deadline_driven_sweeps_count_freed_and_pending_the_same_way(
    open_adapter: OpenAdapter, clock: ManualClock, operation: str
) -> None:
    engine = open_with_delay(open_adapter)
    ns = make_ns(engine, segment_bytes=1024, ttl_ms=1000, retention_ms=2000)
    for _ in range(20):
        append_one(engine, ns, VALUE)
    clock.advance(3000)  # every sealed segment expired (reclaim) and past retention_ms (retention)
    swept = engine.sweep_due(operation)
    assert swept.segments_deleted > 0
    assert swept.bytes_reclaimed == 0 and swept.pending_delete_bytes == sum(deleted_files(engine, ns).values()) > 0
    pending = swept.pending_delete_bytes
    clock.advance(DELAY)
    later = engine.apply_retention(ns)  # any deleting step on the shard removes them, and counts them freed
    assert (later.bytes_reclaimed, later.pending_delete_bytes) == (pending, 0)


@pytest.mark.parametrize("adapter_name", ["segment"], indirect=True)
def test_a_purge_under_disk_pressure_frees_what_no_reader_holds_and_its_dry_run_says_so(
    open_adapter: OpenAdapter, clock: ManualClock
) -> None:
    engine = open_adapter(
        lifecycle_worker=False,
        disk_capacity_bytes=1 << 40,
        node_policy=NodePolicy(
            file_delete_delay_ms=DELAY,
            destroy_forcibly_after_ms=10 * DELAY,
            # Above disk_max_used_ratio at once (a few KiB of 1 TiB), never forced or full.
            disk_max_used_ratio=1e-12,
            disk_clean_forcibly_ratio=0.98,
            disk_warning_ratio=0.99,
        ),
    )
    ns, dropped = retention_half(engine)
    log = engine._shard(ns, 0)  # type: ignore[attr-defined]
    reader = log.iter_records(log.view, 0)
    assert next(reader).offset == 0  # holds the first segment's file
    held = engine.list_segments(ns, 0)[0].size_bytes
    assert engine.apply_retention(ns).pending_delete_bytes == dropped
    dry = engine.clean_files(dry_run=True)
    real = engine.clean_files()
    assert figures(dry) == figures(real)
    # The purge removes every pending file but the held one, whatever its delay.
    assert (real.bytes_reclaimed, real.pending_delete_bytes) == (dropped - held, held)
    assert sum(deleted_files(engine, ns).values()) == held
    reader.close()
