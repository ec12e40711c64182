"""RocketMQ file cleaning and disk watermarks (DESIGN §3).

The segment adapter runs against a disk quota (``EngineConfig.disk_capacity_bytes``:
used = bytes under the data directory), so the watermarks are crossed for real by
filling it; ratios are set from a measurement because RocksDB's own files vary.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from storage_engine.adapters.segment import SegmentAdapter
from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.errors import DiskFullError, SegmentDeletedError
from storage_engine.policies.policy import HOUR_MS, NodePolicy
from storage_engine.rules.cleaning import clean_trigger, disk_status, hour_of, parse_hours
from tests.storage_engine.lifecycle_util import QuotaEngines, append_one, assert_verified, make_ns, offsets, other_hour

BIG = b"b" * 60_000  # four records fill a 256 KiB segment: files dwarf RocksDB's own
RESERVED = 10 * HOUR_MS


def this_hour(clock: ManualClock) -> str:
    return f"{hour_of(clock.now_ms()):02d}"


@pytest.fixture
def engine(tmp_path: Path, clock: ManualClock) -> Iterator[QuotaEngines]:
    engines = QuotaEngines(tmp_path / "data", clock, capacity=1 << 40, reserved_ms=RESERVED)
    yield engines
    engines.close()


def fill_segments(e: StorageAdapter, ns: str, segments: int, shard: int = 0) -> None:
    for _ in range(segments * 4):
        e.append(ns, shard, [NewRecord(BIG)])


def sealed(e: StorageAdapter, ns: str, shard: int = 0) -> list[int]:
    return [s.base_offset for s in e.list_segments(ns, shard)[:-1]]


def test_hours_and_triggers() -> None:
    assert parse_hours("04") == {4} and parse_hours("03;04") == {3, 4}
    assert parse_hours("22-01") == {22, 23, 0, 1}
    policy = NodePolicy(delete_when="04")
    calm = disk_status(10, 100, policy, "quota")
    four = 4 * HOUR_MS
    assert clean_trigger(four, calm, policy, manual=False) == "schedule"
    assert clean_trigger(five := 5 * HOUR_MS, calm, policy, manual=False) is None
    assert clean_trigger(five, calm, policy, manual=True) == "manual"
    assert clean_trigger(five, disk_status(80, 100, policy, "quota"), policy, manual=False) == "disk"
    assert clean_trigger(five, disk_status(86, 100, policy, "quota"), policy, manual=False) == "forced"
    status = disk_status(91, 100, policy, "quota")
    assert (status.over_max_used, status.clean_forcibly, status.disk_full) == (True, True, True)
    # Bytes of .deleted files waiting for removal are part of use, but no reason to delete more:
    # the flags say where the disk is, the trigger decides on what remains without them.
    pending = disk_status(91, 100, policy, "quota", pending=20)
    assert (pending.clean_forcibly, pending.pending_delete_bytes) == (True, 20)
    assert clean_trigger(five, pending, policy, manual=False) is None  # 71 % once they are gone
    assert clean_trigger(five, disk_status(91, 100, policy, "quota", pending=10), policy, manual=False) == "disk"
    assert clean_trigger(five, disk_status(91, 100, policy, "quota", pending=5), policy, manual=False) == "forced"


def test_scheduled_runs_delete_at_most_a_batch_of_expired_files(
    engine: Callable[..., SegmentAdapter], clock: ManualClock
) -> None:
    e = engine(delete_batch_max=3, delete_interval_ms=100)
    ns = make_ns(e, segment_bytes=256 * 1024)
    fill_segments(e, ns, 8)
    append_one(e, ns, BIG)  # seals the eighth: 8 sealed + an active segment with records
    assert len(sealed(e, ns)) == 8
    e.set_node_policy(replace_node(e, delete_when=this_hour(clock)))
    assert e.clean_files().segments_deleted == 0  # nothing is old enough yet
    clock.advance(RESERVED)
    e.set_node_policy(replace_node(e, delete_when=f"{this_hour(clock)};{other_hour(clock)}"))
    started = clock.now_ms()
    first = e.clean_files()
    assert (first.segments_deleted, first.files_removed, first.forced_deletes, first.more) == (3, 3, 0, True)
    assert clock.now_ms() - started == 200  # delete_interval_ms between two deletions, none after the last
    second = e.clean_files()
    third = e.clean_files()
    assert (second.segments_deleted, third.segments_deleted, third.more) == (3, 2, False)
    assert sealed(e, ns) == [] and offsets(e, ns) == [32]  # the active segment stays
    assert e.stats().counters["cleaner_segments_deleted_total"] == 8
    assert_verified(e)


def replace_node(e: StorageAdapter, **changes: Any) -> NodePolicy:
    from dataclasses import replace

    return replace(e.node_policy(), **changes)


def test_outside_delete_hours_nothing_goes_unless_asked(
    engine: Callable[..., SegmentAdapter], clock: ManualClock
) -> None:
    e = engine()
    ns = make_ns(e, segment_bytes=256 * 1024)
    fill_segments(e, ns, 3)
    clock.advance(RESERVED)
    skipped = e.clean_files()
    assert (skipped.skipped, skipped.segments_deleted) == ("not_due", 0)
    manual = e.clean_files(manual=True)
    assert (manual.segments_deleted, manual.forced_deletes) == (2, 0)  # the sealed ones
    assert_verified(e)


def test_cleaning_stops_at_the_first_file_that_is_not_expired(
    engine: Callable[..., SegmentAdapter], clock: ManualClock
) -> None:
    e = engine()
    ns = make_ns(e, segment_bytes=256 * 1024)
    fill_segments(e, ns, 2)  # segments 0 and 4, last written now
    clock.advance(RESERVED)
    fill_segments(e, ns, 1)  # segment 8: young, sealed by the next append
    clock.advance(1)
    append_one(e, ns, BIG)
    old = sealed(e, ns)
    assert old == [0, 4, 8]
    clock.advance(RESERVED // 2)  # 0 and 4 are expired, 8 is not
    result = e.clean_files(manual=True)
    assert result.segments_deleted == 2 and sealed(e, ns) == [8]
    assert_verified(e)


def test_pressure_above_max_used_takes_only_expired_files(
    engine: Callable[..., SegmentAdapter], clock: ManualClock
) -> None:
    e = engine(capacity=8 << 20)
    ns = make_ns(e, segment_bytes=256 * 1024)
    fill_segments(e, ns, 3)
    clock.advance(RESERVED)
    fill_segments(e, ns, 3)
    append_one(e, ns, BIG)
    ratio = e.check_disk().used_ratio
    e.set_node_policy(
        replace_node(e, disk_max_used_ratio=ratio * 0.8, disk_clean_forcibly_ratio=0.97, disk_warning_ratio=0.98)
    )
    status = e.check_disk()
    assert status.over_max_used and not status.clean_forcibly
    result = e.clean_files()
    assert (result.segments_deleted, result.forced_deletes) == (3, 0)  # the three expired ones, no more
    assert sealed(e, ns) == [12, 16, 20]
    assert_verified(e)


def test_above_the_forcible_ratio_files_go_regardless_of_age(
    engine: Callable[..., SegmentAdapter], clock: ManualClock
) -> None:
    e = engine(capacity=8 << 20)
    ns = make_ns(e, segment_bytes=256 * 1024)
    fill_segments(e, ns, 6)
    append_one(e, ns, BIG)
    measured = e.check_disk()
    segment_share = 4 * len(BIG) / measured.capacity_bytes
    # Forcible deletion until use falls to the watermark: about two segments' worth.
    forcibly = measured.used_ratio - 1.5 * segment_share
    e.set_node_policy(
        replace_node(e, disk_max_used_ratio=forcibly, disk_clean_forcibly_ratio=forcibly, disk_warning_ratio=0.99)
    )
    result = e.clean_files()
    assert result.segments_deleted == result.forced_deletes == 2
    assert e.check_disk().used_ratio <= forcibly
    assert sealed(e, ns) == [8, 12, 16, 20]
    assert e.stats().counters["cleaner_forced_deletes_total"] == 2
    e.set_node_policy(replace_node(e, clean_forcibly_enabled=False))
    assert e.clean_files().segments_deleted == 0
    assert_verified(e)


def test_disk_full_rejects_appends_until_use_falls_back(
    engine: Callable[..., SegmentAdapter], clock: ManualClock
) -> None:
    e = engine(capacity=4 << 20)
    ns = make_ns(e, segment_bytes=256 * 1024)
    ratio = e.check_disk().used_ratio
    # Warn once two more MiB are written; clean forcibly from one segment below that.
    warning = ratio + (2 << 20) / (4 << 20)
    e.set_node_policy(
        replace_node(
            e, disk_max_used_ratio=warning - 0.07, disk_clean_forcibly_ratio=warning - 0.07, disk_warning_ratio=warning
        )
    )
    acked: list[int] = []
    with pytest.raises(DiskFullError) as err:
        for _ in range(200):
            acked.append(e.append(ns, 0, [NewRecord(BIG)]).base_offset)
    assert err.value.used_ratio > warning
    assert e.check_disk().disk_full
    assert e.stats().counters["appends_rejected_disk_full_total"] >= 1
    with pytest.raises(DiskFullError):
        append_one(e, ns)
    assert offsets(e, ns) == acked  # nothing acknowledged was lost, nothing rejected was written
    result = e.clean_files()  # forced: oldest files go even though young
    assert result.forced_deletes > 0
    assert not e.check_disk().disk_full
    assert append_one(e, ns) == acked[-1] + 1
    assert_verified(e)


def test_a_file_held_by_a_reader_survives_until_released(
    engine: Callable[..., SegmentAdapter], clock: ManualClock
) -> None:
    e = engine(destroy_forcibly_after_ms=120_000)
    ns = make_ns(e, segment_bytes=256 * 1024)
    fill_segments(e, ns, 2)
    clock.advance(RESERVED)
    log = e._shard(ns, 0)
    reader = log.iter_records(log.view, 0)
    assert next(reader).offset == 0  # holds segment 0
    directory = Path(e.config.data_dir) / "segments" / ns / "0"  # type: ignore[arg-type]
    result = e.clean_files(manual=True)
    assert (result.segments_deleted, result.files_removed) == (1, 0)
    assert (directory / f"{0:020d}.log.deleted").exists()
    assert [r.offset for r in itertools.islice(reader, 3)] == [1, 2, 3]  # it still reads its file
    clock.advance(60_000)
    assert e.clean_files().files_removed == 0  # still held
    reader.close()  # released
    assert e.clean_files().files_removed == 1
    assert not (directory / f"{0:020d}.log.deleted").exists()
    assert_verified(e)


def test_a_held_file_is_removed_forcibly_after_the_timeout(
    engine: Callable[..., SegmentAdapter], clock: ManualClock
) -> None:
    e = engine(destroy_forcibly_after_ms=120_000)
    ns = make_ns(e, segment_bytes=1 << 20)
    for i in range(40):  # segment 0 spans several read chunks: the reader comes back for more
        e.append(ns, 0, [NewRecord(BIG[:1000] + b"%d" % i) for _ in range(30)])
    clock.advance(RESERVED)
    log = e._shard(ns, 0)
    reader = log.iter_records(log.view, 0)
    next(reader)
    e.clean_files(manual=True)
    directory = Path(e.config.data_dir) / "segments" / ns / "0"  # type: ignore[arg-type]
    assert list(directory.glob("*.deleted"))
    clock.advance(120_000)
    assert e.clean_files().files_removed >= 1
    assert not list(directory.glob("*.deleted"))
    with pytest.raises(SegmentDeletedError):
        for _ in reader:
            pass
    assert e.stats().counters["segments_destroyed_forcibly_total"] >= 1
    assert_verified(e)


def test_cleaning_on_every_adapter(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    lc_adapter.set_node_policy(NodePolicy(file_reserved_ms=1000, delete_when=other_hour(clock)))
    ns = make_ns(lc_adapter, segment_bytes=1024)
    for _ in range(9):
        append_one(lc_adapter, ns, b"x" * 300, key=b"k", tags=("t",))
    clock.advance(1000)
    result = lc_adapter.clean_files(manual=True)
    segments = lc_adapter.list_segments(ns, 0)
    assert result.segments_deleted > 0 and len(segments) == 1
    assert lc_adapter.shard_stats(ns, 0).log_start_offset == segments[0].base_offset
    assert_verified(lc_adapter)
