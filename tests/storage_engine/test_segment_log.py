"""The segment adapter's files, rolling, indexes, metadata and I/O pool
(the behaviour every adapter shares is in test_contract.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from storage_engine import open_engine
from storage_engine.adapters.rocksdb import RocksDBAdapter
from storage_engine.adapters.segment import SegmentAdapter
from storage_engine.api import NewRecord, SegmentState
from storage_engine.clock import ManualClock
from storage_engine.config import Durability, EngineConfig
from storage_engine.errors import InvalidArgumentError
from storage_engine.formats.codec import EncodedRecords, decode_batch, encode_records, scan_batches
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.segment.iopool import IOPool
from storage_engine.segment.log import ShardLog

NS_POLICY = {"retention_ms": None}


def policy(**fields: Any) -> NamespacePolicy:
    return NamespacePolicy(**{**NS_POLICY, **fields})


def open_segment(data_dir: Path, clock: ManualClock, **config: Any) -> SegmentAdapter:
    engine = open_engine(EngineConfig(data_dir=data_dir, adapter="segment", **config), clock)
    assert isinstance(engine, SegmentAdapter)
    return engine


@pytest.fixture
def engine(tmp_path: Path, clock: ManualClock) -> Iterator[SegmentAdapter]:
    e = open_segment(tmp_path / "data", clock, durability=Durability.NONE)
    yield e
    e.close()


def shard_log(engine: SegmentAdapter, ns: str, shard: int = 0) -> ShardLog:
    log = engine._shard(ns, shard)
    assert isinstance(log, ShardLog)
    return log


def segment_files(data_dir: Path, ns: str, shard: int = 0) -> list[str]:
    return sorted(p.name for p in (data_dir / "segments" / ns / str(shard)).iterdir())


def test_data_dir_layout(engine: SegmentAdapter, tmp_path: Path) -> None:
    engine.create_namespace("orders", 2, policy())
    engine.append("orders", 1, [NewRecord(b"x")])
    data = tmp_path / "data"
    assert (data / "LOCK").exists() and (data / "index").is_dir()
    assert (data / "FORMAT").read_text() == "segment 1\n"
    assert segment_files(data, "orders", 0) == segment_files(data, "orders", 1) == ["00000000000000000000.log"]


def test_segments_roll_by_size_into_files_named_by_base_offset(engine: SegmentAdapter, tmp_path: Path) -> None:
    engine.create_namespace("ns", 1, policy(segment_bytes=1024))
    for i in range(10):
        engine.append("ns", 0, [NewRecord(bytes([i]) * 300)])  # 393-byte batches: two per segment
    segments = engine.list_segments("ns", 0)
    assert [s.base_offset for s in segments] == [0, 2, 4, 6, 8]
    assert segment_files(tmp_path / "data", "ns") == [f"{b:020d}.log" for b in (0, 2, 4, 6, 8)]
    for s in segments:
        path = tmp_path / "data" / "segments" / "ns" / "0" / f"{s.base_offset:020d}.log"
        assert path.stat().st_size == s.size_bytes <= 1024
        batches = list(scan_batches(path.read_bytes()))
        assert [h.base_offset for _, h in batches] == list(range(s.base_offset, s.last_offset + 1))
    assert [s.state for s in segments] == [SegmentState.SEALED] * 4 + [SegmentState.ACTIVE]


def test_segments_roll_by_record_time_never_when_empty(engine: SegmentAdapter, clock: ManualClock) -> None:
    engine.create_namespace("ns", 1, policy(segment_ms=1000))
    clock.advance(10_000)
    assert engine.append("ns", 0, []).count == 0  # an empty append never rolls
    engine.append("ns", 0, [NewRecord(b"a")])
    clock.advance(1000)
    engine.append("ns", 0, [NewRecord(b"b")])  # exactly segment_ms: not older than it yet
    clock.advance(1)
    engine.append("ns", 0, [NewRecord(b"c")])
    assert [(s.base_offset, s.last_offset) for s in engine.list_segments("ns", 0)] == [(0, 1), (2, 2)]


def test_segment_metadata_survives_reopen_exactly(tmp_path: Path, clock: ManualClock) -> None:
    first = open_segment(tmp_path / "data", clock)
    first.create_namespace("ns", 2, policy(segment_bytes=1024))
    for i in range(9):
        clock.advance(7)
        expire = {"expire_at": 5_000_000_000_000 + i} if i % 3 else {}
        first.append("ns", 1, [NewRecord(b"x" * 200, key=b"k%d" % i, tags=("t",), **expire)])
    segments, stats = first.list_segments("ns", 1), first.shard_stats("ns", 1)
    first.close()
    clock.advance(1000)
    second = open_segment(tmp_path / "data", clock)
    try:
        assert second.list_segments("ns", 1) == segments  # created_at and modified_at included
        assert second.shard_stats("ns", 1) == stats
        assert second.stats().counters.get("recovery_reindexed_batches_total", 0) == 0
    finally:
        second.close()


def test_sparse_offset_and_time_indexes(engine: SegmentAdapter, clock: ManualClock) -> None:
    engine.create_namespace("ns", 1, policy(segment_bytes=8192, index_interval_bytes=1000))
    for _ in range(60):
        clock.advance(1)
        engine.append("ns", 0, [NewRecord(b"v" * 100) for _ in range(3)])  # 60 + 3×134 = 462-byte batches
    log = shard_log(engine, "ns")
    entries = engine.store.offset_entries(log.index.prefix)
    segments = engine.list_segments("ns", 0)
    # Sparse: the first batch of every segment, then one batch in every ≥ 1000 bytes.
    assert {s.base_offset for s in segments} <= {o for o, _, _ in entries}
    assert len(segments) < len(entries) < 60
    for offset, seg_base, position in entries:
        path = log.directory / f"{seg_base:020d}.log"
        header, _ = decode_batch(path.read_bytes(), position)
        assert header.base_offset == offset
    times = engine.store.time_entries(log.index.prefix)
    assert times == sorted(times) and len({t for t, _ in times}) == len(times)
    # Every offset is found through the index, whichever batch and record it starts in.
    for start in range(0, 180, 7):
        assert [r.offset for r in engine.read("ns", 0, start, max_records=5).records] == list(
            range(start, min(start + 5, 180))
        )


def test_reads_scan_forward_when_index_entries_are_missing(engine: SegmentAdapter) -> None:
    # Readers may see batches before their index entries exist; any earlier entry must do.
    engine.create_namespace("ns", 1, policy(segment_bytes=2048))
    for i in range(30):
        engine.append("ns", 0, [NewRecord(b"%d" % i)])
    log = shard_log(engine, "ns")
    wb = engine.store.batch()
    engine.store.drop_prefix(wb, log.index.prefix, ("offsets",))
    engine.store.write(wb)
    assert [r.value for r in engine.read("ns", 0, 17, max_records=3).records] == [b"17", b"18", b"19"]


def test_concurrent_producers_on_many_shards(tmp_path: Path, clock: ManualClock) -> None:
    engine = open_segment(tmp_path / "data", clock, durability=Durability.FSYNC, io_workers=2)
    try:
        engine.create_namespace("ns", 3, policy(segment_bytes=4096))
        acked: dict[int, list[int]] = {0: [], 1: [], 2: []}
        lock = threading.Lock()

        def produce(p: int) -> None:
            for i in range(40):
                shard = (p + i) % 3
                result = engine.append("ns", shard, [NewRecord(b"%d-%d" % (p, i))] * (1 + i % 4))
                with lock:
                    acked[shard].extend(result.offsets)

        threads = [threading.Thread(target=produce, args=(p,)) for p in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for shard, offsets in acked.items():
            assert sorted(offsets) == list(range(len(offsets)))
            assert engine.shard_stats("ns", shard).end_offset == len(offsets)
        counters = engine.stats().counters
        assert counters["append_batches_total"] == 160
        assert counters["fsyncs_total"] >= counters["append_groups_total"]  # one per group (and per roll)
    finally:
        engine.close()


def test_interval_durability_fsyncs_in_the_background(tmp_path: Path, clock: ManualClock) -> None:
    engine = open_segment(tmp_path / "data", clock, durability=Durability.INTERVAL, fsync_interval_ms=5)
    try:
        engine.create_namespace("ns", 1, policy())
        engine.append("ns", 0, [NewRecord(b"x")])
        done = threading.Event()
        for _ in range(400):  # the worker's timer, not the test clock, drives this
            if engine.stats().counters.get("fsyncs_total", 0) >= 1:
                done.set()
                break
            done.wait(0.01)
        assert done.is_set()
    finally:
        engine.close()


def _body(n: int = 1) -> EncodedRecords:
    return encode_records([NewRecord(b"x")] * n, timestamps=1)


class _GatedWriter:
    """Blocks in its first group until released, so later requests pile up in the queue."""

    def __init__(self, route: str) -> None:
        self.route = route
        self.groups: list[int] = []
        self.threads: set[str] = set()
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.next = 0

    def append_group(self, bodies: list[EncodedRecords]) -> list[int]:
        self.threads.add(threading.current_thread().name)
        self.entered.set()
        self.gate.wait(5)
        self.groups.append(len(bodies))
        out = []
        for b in bodies:
            out.append(self.next)
            self.next += b.count
        return out

    def sync_if_due(self) -> bool:
        return False


def test_io_pool_drains_the_queue_into_one_group_per_shard() -> None:
    pool = IOPool(workers=3, max_requests_per_batch=5, fsync_interval_ms=100)
    try:
        a, b = _GatedWriter("ns/0"), _GatedWriter("ns/1")
        first: Future[int] = pool.submit(a, _body())
        assert a.entered.wait(5)
        futures = [pool.submit(a, _body(2)) for _ in range(7)]
        b.gate.set()
        assert pool.submit(b, _body()).result(5) == 0
        a.gate.set()
        assert first.result(5) == 0
        assert [f.result(5) for f in futures] == [1, 3, 5, 7, 9, 11, 13]
        assert a.groups == [1, 5, 2]  # the queue drained up to max_requests_per_batch at a time
        assert len(a.threads) == 1 and pool.worker_of("ns/0") == pool.worker_of("ns/0")
    finally:
        pool.close()


def test_io_pool_fails_a_whole_group_with_the_writers_error() -> None:
    class Failing(_GatedWriter):
        def append_group(self, bodies: list[EncodedRecords]) -> list[int]:
            raise OSError(28, "No space left on device")

    pool = IOPool(workers=1, max_requests_per_batch=8, fsync_interval_ms=100)
    try:
        with pytest.raises(OSError, match="No space"):
            pool.submit(Failing("x/0"), _body()).result(5)
    finally:
        pool.close()


def test_rocksdb_adapter_rolls_logical_segments_the_same_way(tmp_path: Path, clock: ManualClock) -> None:
    engine = open_engine(EngineConfig(data_dir=tmp_path / "rdb", adapter="rocksdb"), clock)
    assert isinstance(engine, RocksDBAdapter)
    try:
        engine.create_namespace("ns", 1, policy(segment_bytes=1024))
        for i in range(10):
            engine.append("ns", 0, [NewRecord(bytes([i]) * 300, key=b"k")])
        segments = engine.list_segments("ns", 0)
        assert len(segments) > 3 and all(s.size_bytes <= 1024 for s in segments[:-1])
        assert not (tmp_path / "rdb" / "segments").exists()
        record = engine.read_key("ns", 0, b"k")
        assert record is not None and record.offset == 9
    finally:
        engine.close()


def test_a_data_dir_keeps_its_adapter(tmp_path: Path, clock: ManualClock) -> None:
    open_segment(tmp_path / "data", clock).close()
    with pytest.raises(InvalidArgumentError, match="segment 1"):
        open_engine(EngineConfig(data_dir=tmp_path / "data", adapter="rocksdb"), clock)
    open_segment(tmp_path / "data", clock).close()  # the failed open released the lock
