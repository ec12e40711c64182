"""Disk pressure never deletes live data by mistake (DESIGN §3, file cleaning and watermarks).

Segments that retention deleted are renamed ``.deleted`` and wait
``file_delete_delay_ms`` before their files go; they still take disk space
meanwhile. The cleaner must treat them as gone: above a watermark it removes
them first, and decides on forced deletion of live segments by what remains.
``bytes_reclaimed`` of a cleaner run is what left the disk, checked here
against the files that actually disappeared.

The segment adapter runs against a disk quota (``EngineConfig.disk_capacity_bytes``:
used = every byte under the data directory); watermarks are set from a
measurement, as in ``test_file_cleaning``, because RocksDB's own files vary.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from storage_engine import open_engine
from storage_engine.adapters.segment import SegmentAdapter
from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.config import EngineConfig
from storage_engine.policies.policy import HOUR_MS, NodePolicy
from storage_engine.rules.cleaning import forced_cleaning
from tests.storage_engine.lifecycle_util import QuotaEngines, append_one, assert_verified, make_ns, offsets, other_hour

BIG = b"b" * 60_000  # four records fill a 256 KiB segment
SEGMENT_BYTES = 256 * 1024
RESERVED = 100 * HOUR_MS  # no file gets old enough to be "expired" for the cleaner in these tests
RETENTION = HOUR_MS
CAPACITY = 8 << 20


@pytest.fixture
def engine(tmp_path: Path, clock: ManualClock) -> Iterator[QuotaEngines]:
    engines = QuotaEngines(tmp_path / "data", clock, capacity=CAPACITY, reserved_ms=RESERVED)
    yield engines
    engines.close()


def segment_files(e: SegmentAdapter) -> dict[str, int]:
    """Segment file (by base offset, whatever its suffix) → its size on disk now."""
    root = e.data_dir.segments_dir
    return {f"{p.parent}/{p.name[:20]}": p.stat().st_size for p in root.rglob("*.log*")}


def deleted_bytes_on_disk(e: SegmentAdapter) -> int:
    return sum(p.stat().st_size for p in e.data_dir.segments_dir.rglob("*.deleted"))


def freed_between(before: dict[str, int], after: dict[str, int]) -> int:
    """Bytes of the segment files present before and gone (under any name) after."""
    return sum(size for name, size in before.items() if name not in after)


def sealed(e: StorageAdapter, ns: str) -> list[int]:
    return [s.base_offset for s in e.list_segments(ns, 0)[:-1]]


def set_watermark(e: SegmentAdapter, ratio: float) -> None:
    """One watermark for both cleaning decisions, writes refused only near a full quota."""
    e.set_node_policy(
        replace(e.node_policy(), disk_max_used_ratio=ratio, disk_clean_forcibly_ratio=ratio, disk_warning_ratio=0.99)
    )


def old_and_young(e: SegmentAdapter, clock: ManualClock) -> str:
    """Four sealed segments past retention (0, 4, 8, 12), four within it (16..28), an active one (32)."""
    ns = make_ns(e, segment_bytes=SEGMENT_BYTES, retention_ms=RETENTION)
    for _ in range(16):
        e.append(ns, 0, [NewRecord(BIG)])
    clock.advance(2 * RETENTION)
    for _ in range(16):
        e.append(ns, 0, [NewRecord(BIG)])
    append_one(e, ns, BIG)
    assert sealed(e, ns) == [0, 4, 8, 12, 16, 20, 24, 28]
    return ns


def retain(e: SegmentAdapter, ns: str) -> int:
    """Run retention: the four old segments become pending ``.deleted`` files; their bytes."""
    result = e.apply_retention(ns)
    assert result.segments_deleted == 4 and result.files_removed == 0  # file_delete_delay_ms not passed
    assert sealed(e, ns) == [16, 20, 24, 28]
    pending = deleted_bytes_on_disk(e)
    assert pending > 0 and e.check_disk().pending_delete_bytes == pending
    return pending


def test_pending_files_are_purged_instead_of_forcing_live_segments(
    engine: Callable[..., SegmentAdapter], clock: ManualClock
) -> None:
    e = engine()
    ns = old_and_young(e, clock)
    pending = retain(e, ns)
    live = offsets(e, ns)
    status = e.check_disk()
    # Above the watermark only because of the pending files: without them use is well below.
    without_pending = (status.used_bytes - pending) / status.capacity_bytes
    mark = (without_pending + status.used_ratio) / 2
    set_watermark(e, mark)
    status = e.check_disk()
    assert status.clean_forcibly and status.pending_delete_bytes == pending  # the disk *is* above it now
    assert not forced_cleaning(status, e.node_policy())  # but nothing live needs to go
    before = segment_files(e)

    result = e.clean_files()

    assert (result.segments_deleted, result.forced_deletes, result.skipped) == (0, 0, "not_due")
    assert result.files_removed == 4
    assert result.bytes_reclaimed == freed_between(before, segment_files(e)) == pending
    assert result.pending_delete_bytes == 0 == deleted_bytes_on_disk(e)
    assert offsets(e, ns) == live and sealed(e, ns) == [16, 20, 24, 28]  # every unexpired record is there
    after = e.check_disk()
    assert after.used_ratio <= mark and after.pending_delete_bytes == 0
    assert e.stats().counters["cleaner_forced_deletes_total"] == 0
    assert e.stats().counters["disk_pending_delete_bytes"] == 0
    assert_verified(e)


def test_when_the_purge_is_not_enough_only_what_remains_is_forced(
    engine: Callable[..., SegmentAdapter], clock: ManualClock
) -> None:
    e = engine()
    ns = old_and_young(e, clock)
    pending = retain(e, ns)
    status = e.check_disk()
    segment_share = 4 * len(BIG) / status.capacity_bytes
    # After the purge, use is one and a half segments above the mark: two live segments must go.
    mark = (status.used_bytes - pending) / status.capacity_bytes - 1.5 * segment_share
    set_watermark(e, mark)
    before = segment_files(e)

    result = e.clean_files()

    assert (result.segments_deleted, result.forced_deletes) == (2, 2)
    assert sealed(e, ns) == [24, 28]  # the oldest live ones, and no more
    assert result.files_removed == 4 + 2
    assert result.bytes_reclaimed == freed_between(before, segment_files(e)) > pending
    assert result.pending_delete_bytes == 0
    assert e.check_disk().used_ratio <= mark
    assert_verified(e)


def test_a_pending_file_held_by_a_reader_counts_as_gone_for_the_forced_decision(
    engine: Callable[..., SegmentAdapter], clock: ManualClock
) -> None:
    e = engine(destroy_forcibly_after_ms=120_000)
    ns = old_and_young(e, clock)
    log = e._shard(ns, 0)
    reader = log.iter_records(log.view, 0)
    assert next(reader).offset == 0  # holds segment 0 through its deletion
    pending = retain(e, ns)
    held = segment_files(e)[f"{e.data_dir.segments_dir / ns / '0'}/{0:020d}"]
    status = e.check_disk()
    # The held file alone keeps the disk above the mark; the files around it do not count.
    mark = (status.used_bytes - pending + held // 2) / status.capacity_bytes
    set_watermark(e, mark)
    live = offsets(e, ns)
    before = segment_files(e)

    result = e.clean_files()

    assert (result.segments_deleted, result.forced_deletes, result.files_removed) == (0, 0, 3)
    assert result.bytes_reclaimed == freed_between(before, segment_files(e)) == pending - held
    assert result.pending_delete_bytes == held == deleted_bytes_on_disk(e)
    status = e.check_disk()
    assert status.clean_forcibly and status.pending_delete_bytes == held  # truly above, yet nothing live went
    assert offsets(e, ns) == live
    assert [r.offset for r in itertools.islice(reader, 3)] == [1, 2, 3]  # the reader still reads its file
    reader.close()  # released: above the watermark the file goes at the next run, delay or not
    released = e.clean_files()
    assert (released.files_removed, released.bytes_reclaimed, released.segments_deleted) == (1, held, 0)
    assert deleted_bytes_on_disk(e) == 0
    assert_verified(e)


def test_a_calm_disk_keeps_pending_files_for_their_delay(
    engine: Callable[..., SegmentAdapter], clock: ManualClock
) -> None:
    e = engine(file_delete_delay_ms=60_000)
    ns = old_and_young(e, clock)
    pending = retain(e, ns)
    calm = e.clean_files()  # far below every watermark: the delay is honoured
    assert (calm.files_removed, calm.bytes_reclaimed, calm.pending_delete_bytes) == (0, 0, pending)
    clock.advance(60_000)
    due = e.clean_files()
    assert (due.files_removed, due.bytes_reclaimed, due.pending_delete_bytes) == (4, pending, 0)


def test_pending_bytes_on_every_adapter(lc_adapter: StorageAdapter, adapter_name: str, clock: ManualClock) -> None:
    """Only the segment adapter has files waiting for removal; the others report none, and a
    cleaner run on them counts what it dropped as reclaimed."""
    lc_adapter.set_node_policy(NodePolicy(file_reserved_ms=1000, delete_when=other_hour(clock)))
    ns = make_ns(lc_adapter, segment_bytes=1024, retention_ms=1000)
    for _ in range(9):
        append_one(lc_adapter, ns, b"x" * 300)
    clock.advance(2000)
    retention = lc_adapter.apply_retention(ns)
    assert retention.segments_deleted > 0
    pending = lc_adapter.check_disk().pending_delete_bytes
    if adapter_name == "segment":
        assert isinstance(lc_adapter, SegmentAdapter)
        assert pending == deleted_bytes_on_disk(lc_adapter) > 0
    else:
        assert pending == 0
    for _ in range(4):
        append_one(lc_adapter, ns, b"y" * 300)
    clock.advance(1000)
    dropped = sum(s.size_bytes for s in lc_adapter.list_segments(ns, 0)[:-1])
    result = lc_adapter.clean_files(manual=True)  # file_delete_delay_ms (60 s) has not passed
    assert result.segments_deleted > 0 and result.pending_delete_bytes == pending
    assert result.bytes_reclaimed == dropped  # removed at once (no reader), pending ones untouched
    clock.advance(60_000)
    assert lc_adapter.clean_files().bytes_reclaimed == pending
    assert lc_adapter.check_disk().pending_delete_bytes == 0


def files_under(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.mark.parametrize("adapter", ["segment", "rocksdb"])
def test_quota_use_counts_every_file_under_the_data_dir_rocksdb_included(
    tmp_path: Path, clock: ManualClock, adapter: str
) -> None:
    root = tmp_path / "data"
    config = EngineConfig(data_dir=root, adapter=adapter, lifecycle_worker=False, disk_capacity_bytes=64 << 20)
    e = open_engine(config, clock)
    try:
        make_ns(e, segment_bytes=SEGMENT_BYTES)
        empty = e.check_disk().used_bytes
        e.append("ns", 0, [NewRecord(os.urandom(50_000)) for _ in range(20)])  # incompressible: 1 MB
        status = e.check_disk()
        index = files_under(root / "index")
        segments = files_under(root / "segments")
        assert status.source == "quota" and status.used_bytes == files_under(root)
        assert index > 0 and status.used_bytes >= segments + index  # RocksDB's files count
        assert status.used_bytes - empty >= 1_000_000  # the records count wherever the store keeps them
        if adapter == "rocksdb":
            assert segments == 0 and index >= 1_000_000  # only RocksDB holds them: its files are the use
    finally:
        e.close()


def test_filesystem_use_is_what_df_shows(tmp_path: Path, clock: ManualClock) -> None:
    config = EngineConfig(data_dir=tmp_path / "data", adapter="segment", lifecycle_worker=False)
    e = open_engine(config, clock)
    try:
        status = e.check_disk()
        usage = shutil.disk_usage(tmp_path)
        df_ratio = usage.used / (usage.used + usage.free)  # blocks reserved for root are neither
        assert status.source == "filesystem"
        assert status.used_ratio == pytest.approx(df_ratio, abs=0.01)  # other writers move it a little
        assert status.capacity_bytes == pytest.approx(usage.used + usage.free, rel=0.01)
    finally:
        e.close()
