"""Recovery of the segment adapter on open: torn tails, unindexed tails, index
entries past the data, damaged sealed segments, orphans and the data dir lock."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from storage_engine import open_engine
from storage_engine.adapters.segment import SegmentAdapter
from storage_engine.api import NewRecord, SegmentState
from storage_engine.clock import ManualClock
from storage_engine.config import Durability, EngineConfig
from storage_engine.errors import CorruptSegmentError, DataDirLockedError
from storage_engine.formats.codec import encode_records, scan_batches
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.segment import recovery as recovery_module
from storage_engine.segment.log import ShardLog


def open_segment(data_dir: Path, clock: ManualClock, **config: Any) -> SegmentAdapter:
    engine = open_engine(EngineConfig(data_dir=data_dir, adapter="segment", **config), clock)
    assert isinstance(engine, SegmentAdapter)
    return engine


def shard_dir(data_dir: Path, ns: str = "ns", shard: int = 0) -> Path:
    return data_dir / "segments" / ns / str(shard)


def seg_path(data_dir: Path, base: int, ns: str = "ns", shard: int = 0) -> Path:
    return shard_dir(data_dir, ns, shard) / f"{base:020d}.log"


def fill(data_dir: Path, clock: ManualClock, batches: int, pad: int = 0, **policy: Any) -> None:
    """Create ``ns`` and append ``batches`` one-record batches: value v<i> (+ ``pad`` bytes),
    key k<i % 3>, tag t<i % 2>."""
    engine = open_segment(data_dir, clock)
    engine.create_namespace("ns", 2, NamespacePolicy(retention_ms=None, **policy))
    for i in range(batches):
        clock.advance(1)
        engine.append("ns", 0, [NewRecord(b"v%d" % i + b"." * pad, key=b"k%d" % (i % 3), tags=(f"t{i % 2}",))])
    engine.close()


def assert_index_within(engine: SegmentAdapter, ns: str, shard: int) -> None:
    """No index entry of the shard points at or past its end offset."""
    log = engine._shard(ns, shard)
    assert isinstance(log, ShardLog)
    end = engine.shard_stats(ns, shard).end_offset
    prefix = log.index.prefix
    store = engine.store
    assert store.dangling_entries(prefix, end) == []
    assert log.index.checkpoint.next_offset == end
    for offset, seg_base, position in store.offset_entries(prefix):
        data = seg_path(engine.data_dir.root, seg_base, ns, shard).read_bytes()
        assert next(scan_batches(data, position))[1].base_offset == offset


def values(engine: SegmentAdapter, shard: int = 0) -> list[bytes | None]:
    return [r.value for r in engine.read("ns", shard, 0, max_records=10_000).records]


def test_torn_tail_is_truncated_at_the_last_valid_batch(tmp_path: Path, clock: ManualClock) -> None:
    data = tmp_path / "data"
    fill(data, clock, 5)
    path = seg_path(data, 0)
    size = path.stat().st_size
    with open(path, "r+b") as f:  # a crash in the middle of writing batch 4
        f.truncate(size - 10)
    with open(path, "ab") as f:
        f.write(b"\0" * 100)  # and garbage after it, as a filesystem may leave
    engine = open_segment(data, clock)
    try:
        assert values(engine) == [b"v0", b"v1", b"v2", b"v3"]
        batches = list(scan_batches(path.read_bytes()))
        assert path.stat().st_size == sum(h.length for _, h in batches)
        assert_index_within(engine, "ns", 0)
        assert engine.append("ns", 0, [NewRecord(b"new")]).base_offset == 4
        latest = engine.read_key("ns", 0, b"k1")
        assert latest is not None and latest.offset == 1  # k1's record at offset 4 was torn away
        assert engine.stats().counters["recovery_truncations_total"] == 1
    finally:
        engine.close()


def test_unindexed_tail_is_indexed_on_open(tmp_path: Path, clock: ManualClock) -> None:
    data = tmp_path / "data"
    fill(data, clock, 3)
    # A crash after the data reached the file but before its index WriteBatch.
    body = encode_records(
        [NewRecord(b"tail", key=b"kt", tags=("tt",), timestamp=9_000_000_000_000, expire_at=9_100_000_000_000)],
        timestamps=0,
    )
    with open(seg_path(data, 0), "ab") as f:
        f.write(body.seal(3))
    engine = open_segment(data, clock)
    try:
        assert values(engine) == [b"v0", b"v1", b"v2", b"tail"]
        found = engine.read_key("ns", 0, b"kt")
        assert found is not None and found.offset == 3
        assert [r.offset for r in engine.read_tag("ns", 0, "tt").records] == [3]
        assert engine.offset_for_timestamp("ns", 0, 9_000_000_000_000) == 3
        [segment] = engine.list_segments("ns", 0)
        assert (segment.last_offset, segment.record_count, segment.max_expire_at) == (3, 4, 9_100_000_000_000)
        assert segment.max_timestamp == 9_000_000_000_000
        assert_index_within(engine, "ns", 0)
        assert engine.stats().counters["recovery_reindexed_batches_total"] == 1
    finally:
        engine.close()


def test_unindexed_roll_gets_its_segment_metadata(tmp_path: Path, clock: ManualClock) -> None:
    data = tmp_path / "data"
    fill(data, clock, 4, segment_bytes=1024)
    before = open_segment(data, clock)
    bases = [s.base_offset for s in before.list_segments("ns", 0)]
    before.close()
    end = 4
    # A crash after a roll created the next segment file and wrote to it, before the index.
    with open(seg_path(data, end), "wb") as f:
        f.write(encode_records([NewRecord(b"rolled", key=b"k0")], timestamps=1).seal(end))
    engine = open_segment(data, clock)
    try:
        segments = engine.list_segments("ns", 0)
        assert [s.base_offset for s in segments] == [*bases, end]
        assert [s.state for s in segments] == [SegmentState.SEALED] * len(bases) + [SegmentState.ACTIVE]
        assert (segments[-1].record_count, segments[-1].last_offset) == (1, end)
        found = engine.read_key("ns", 0, b"k0")
        assert found is not None and found.value == b"rolled"
        assert engine.append("ns", 0, [NewRecord(b"next")]).base_offset == end + 1
        assert_index_within(engine, "ns", 0)
    finally:
        engine.close()


def test_index_entries_past_the_data_are_dropped(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    fill(data, clock, 6, pad=300, segment_bytes=1024)  # two records per segment
    before = open_segment(data, clock)
    segments = before.list_segments("ns", 0)
    before.close()
    assert [(s.base_offset, s.last_offset) for s in segments] == [(0, 1), (2, 3), (4, 5)]
    # Data lost below the checkpoint (an OS crash in interval/none mode): offsets 4 and 5.
    with open(seg_path(data, 4), "r+b") as f:
        f.truncate(0)
    monkeypatch.setattr(recovery_module, "_REINDEX_COMMIT_EVERY", 1)  # commit the re-index batch by batch
    engine = open_segment(data, clock, durability=Durability.NONE)
    try:
        assert [v[:2] for v in values(engine) if v] == [b"v0", b"v1", b"v2", b"v3"]
        assert_index_within(engine, "ns", 0)
        latest = engine.read_key("ns", 0, b"k1")  # its latest record (offset 4) is gone; 1 remains
        assert latest is not None and latest.offset == 1
        assert [r.offset for r in engine.read_tag("ns", 0, "t1").records] == [1, 3]
        assert engine.offset_for_timestamp("ns", 0, clock.now_ms()) is None
        strip = [replace(s, modified_at=0) for s in engine.list_segments("ns", 0)]
        assert strip[:2] == [replace(s, modified_at=0) for s in segments[:2]]
        assert (strip[2].base_offset, strip[2].record_count, strip[2].state) == (4, 0, SegmentState.ACTIVE)
        assert engine.append("ns", 0, [NewRecord(b"again")]).base_offset == 4
        assert engine.stats().counters["recovery_index_past_data_total"] == 2
    finally:
        engine.close()


def test_a_segment_that_does_not_follow_its_predecessor_is_dropped(tmp_path: Path, clock: ManualClock) -> None:
    data = tmp_path / "data"
    fill(data, clock, 3)
    with open(seg_path(data, 7), "wb") as f:  # offsets 3..6 would be missing
        f.write(encode_records([NewRecord(b"stray")], timestamps=1).seal(7))
    seg_path(data, 3).write_bytes(b"")  # and an empty next segment, as a crash right after a roll leaves
    engine = open_segment(data, clock)
    try:
        assert [(s.base_offset, s.record_count) for s in engine.list_segments("ns", 0)] == [(0, 3), (3, 0)]
        assert not seg_path(data, 7).exists()
        assert engine.append("ns", 0, [NewRecord(b"next")]).base_offset == 3
        assert_index_within(engine, "ns", 0)
    finally:
        engine.close()


def test_crc_mismatch_in_a_sealed_segment_fails_that_shard_only(tmp_path: Path, clock: ManualClock) -> None:
    data = tmp_path / "data"
    fill(data, clock, 8, pad=300, segment_bytes=1024)
    other = open_segment(data, clock)
    other.append("ns", 1, [NewRecord(b"fine")])
    other.create_namespace("other", 1)
    other.append("other", 0, [NewRecord(b"also fine")])
    assert other.list_segments("ns", 0)[0].state == SegmentState.SEALED
    other.close()
    path = seg_path(data, 0)
    damaged = bytearray(path.read_bytes())
    second_batch = next(iter(scan_batches(bytes(damaged))))[1].length
    damaged[second_batch + 70] ^= 0x01  # one bit, inside the second batch's records
    path.write_bytes(bytes(damaged))

    engine = open_segment(data, clock)
    try:
        for call in (
            lambda: engine.read("ns", 0, 0),
            lambda: engine.read("ns", 0, 5),
            lambda: engine.append("ns", 0, [NewRecord(b"x")]),
            lambda: engine.read_key("ns", 0, b"k1"),
            lambda: engine.read_tag("ns", 0, "t0"),
            lambda: engine.offset_for_timestamp("ns", 0, 0),
        ):
            with pytest.raises(CorruptSegmentError) as err:
                call()
            assert (err.value.path, err.value.position) == (str(path), second_batch)
            assert "CRC mismatch" in err.value.reason
        assert [r.value for r in engine.read("ns", 1, 0).records] == [b"fine"]
        assert [r.value for r in engine.read("other", 0, 0).records] == [b"also fine"]
        assert engine.append("ns", 1, [NewRecord(b"more")]).base_offset == 1
        assert len(engine.list_segments("ns", 0)) > 1  # metadata stays visible to operators
        assert engine.stats().counters["failed_shards"] == 1
    finally:
        engine.close()
    assert path.read_bytes() == bytes(damaged)  # left untouched for an operator


def test_orphans_of_an_interrupted_create_are_removed(tmp_path: Path, clock: ManualClock) -> None:
    data = tmp_path / "data"
    fill(data, clock, 1)
    orphan = shard_dir(data, "half-created", 0)
    orphan.mkdir(parents=True)
    (orphan / f"{0:020d}.log").write_bytes(b"")
    seg_path(data, 0).with_suffix(".tmp").write_bytes(b"junk")
    engine = open_segment(data, clock)
    try:
        assert not (data / "segments" / "half-created").exists()
        assert not seg_path(data, 0).with_suffix(".tmp").exists()
        assert [n.name for n in engine.list_namespaces()] == ["ns"]
        engine.create_namespace("half-created", 1)
        assert engine.append("half-created", 0, [NewRecord(b"x")]).base_offset == 0
    finally:
        engine.close()


def test_a_second_process_cannot_open_the_data_dir(tmp_path: Path, clock: ManualClock) -> None:
    data = tmp_path / "data"
    engine = open_segment(data, clock)
    script = textwrap.dedent(
        f"""
        from storage_engine import open_engine
        from storage_engine.config import EngineConfig
        from storage_engine.errors import DataDirLockedError
        try:
            open_engine(EngineConfig(data_dir={str(data)!r}, adapter="segment"))
        except DataDirLockedError as exc:
            print("locked", exc.path)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    try:
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
        assert out.stdout.strip() == f"locked {data}", out.stderr
        with pytest.raises(DataDirLockedError):  # a second open in this process is refused too
            open_segment(data, clock)
    finally:
        engine.close()
    open_segment(data, clock).close()  # released on close
