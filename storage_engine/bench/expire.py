"""Expiry: TTL-index scan against a full scan, append latency during a scan, segment drop.

- ``ttl-index`` / ``full-scan``: N records of which a fraction F carry a short
  explicit TTL; the clock moves past it; in the same run, the TTL-index scan
  (``expire_scan`` until done) and a full scan that reads every record and
  checks its expiry are timed. Repeated with 2N records and the same number
  expired: the index scan should cost the same, the full scan twice as much.
- ``append-idle`` / ``append-during-scan``: p99 of single-batch appends to
  another namespace, alone and while a TTL scan of many expired entries runs.
- ``segment-drop``: ``reclaim`` of one fully expired sealed segment of
  ``--segment-mib`` MiB (its index ranges range-deleted, RocksDB compacted).

The engine runs on a :class:`ManualClock`, so expiry is a clock move, not a wait.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from storage_engine import open_engine
from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.bench.common import percentile_ms
from storage_engine.clock import ManualClock
from storage_engine.config import Durability, EngineConfig
from storage_engine.expiry import is_expired
from storage_engine.policy import GiB, MiB, NamespacePolicy

SHORT_TTL_MS = 1_000
FILL_CHUNK = 50_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--expired-fraction", type=float, default=0.01, help="share of records with a short TTL")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of the scan comparison; the fastest of each is printed"
    )
    parser.add_argument("--appends", type=int, default=2_000, help="appends timed for the latency lines")
    parser.add_argument(
        "--scan-entries", type=int, default=2_000_000, help="expired entries the scan under appends works through"
    )
    parser.add_argument("--segment-mib", type=int, default=256, help="size of the dropped segment (MiB)")
    parser.add_argument(
        "--parts", default="scan,append,drop", help="comma-separated subset of scan,append,drop (default all)"
    )
    parser.add_argument(
        "--switch-interval",
        type=float,
        help="sys.setswitchinterval() in seconds for the run (CPython's GIL hand-off; default 0.005)",
    )


def _fill(engine: StorageAdapter, ns: str, count: int, every: int, value: bytes, batch: int, clock: ManualClock) -> int:
    """Append ``count`` records; every ``every``-th carries a short TTL. Returns how many do."""
    expiring = 0
    deadline = clock.now_ms() + SHORT_TTL_MS
    for start in range(0, count, FILL_CHUNK):
        records = []
        for i in range(start, min(count, start + FILL_CHUNK)):
            short = every > 0 and i % every == every - 1
            expiring += short
            records.append(NewRecord(value, expire_at=deadline if short else None))
        for j in range(0, len(records), batch):
            engine.append(ns, 0, records[j : j + batch])
    return expiring


def _full_scan(engine: StorageAdapter, ns: str, now: int) -> int:
    """Read every stored record and check its expiry (what a store without a TTL index does)."""
    ttl_ms = engine.get_namespace(ns).policy.ttl_ms
    expired = 0
    offset = engine.shard_stats(ns, 0).log_start_offset
    while True:
        page = engine.read(ns, 0, offset, max_records=10_000, max_bytes=64 * MiB)
        if not page.records:
            return expired
        for r in page.records:
            expired += is_expired(r.timestamp, r.expire_at, ttl_ms, now)
        offset = page.next_offset


def _ttl_scan(engine: StorageAdapter, ns: str) -> int:
    done = 0
    while True:
        result = engine.expire_scan(ns, manual=True)
        done += result.expired_records
        if not result.more:
            return done


def _policy(**extra: Any) -> NamespacePolicy:
    # read_time_check off: the full scan must see every record to check it.
    return NamespacePolicy(retention_ms=None, read_time_check=False, max_delete_per_scan=10_000_000, **extra)


def bench_scan(args: argparse.Namespace, root: Path) -> Iterator[dict[str, Any]]:
    value = b"v" * args.value_bytes
    expired_target = max(1, int(args.records * args.expired_fraction))
    lines: dict[int, dict[str, float]] = {}
    for run in range(args.repeat):
        for scale in (1, 2):  # N and 2N alternate, so machine noise hits both alike
            stored = args.records * scale
            clock = ManualClock()
            config = EngineConfig(
                data_dir=root / f"scan{scale}-{run}",
                adapter=args.adapter,
                durability=Durability.NONE,
                lifecycle_worker=False,
            )
            engine = open_engine(config, clock)
            try:
                engine.create_namespace("bench", 1, _policy())
                expired = _fill(engine, "bench", stored, stored // expired_target, value, args.batch_size, clock)
                clock.advance(SHORT_TTL_MS)
                t0 = time.perf_counter()
                found = _full_scan(engine, "bench", clock.now_ms())
                full = time.perf_counter() - t0
                t0 = time.perf_counter()
                deleted = _ttl_scan(engine, "bench")
                index = time.perf_counter() - t0
                assert found == deleted == expired, (found, deleted, expired)
            finally:
                engine.close()
            best = lines.setdefault(scale, {"ttl": index, "full": full, "expired": expired})
            best["ttl"], best["full"] = min(best["ttl"], index), min(best["full"], full)
    for scale in (1, 2):
        stored, expired, index, full = (
            args.records * scale,
            int(lines[scale]["expired"]),
            lines[scale]["ttl"],
            lines[scale]["full"],
        )
        for system, seconds in (("ttl-index", index), ("full-scan", full)):
            yield {
                "bench": "expire",
                "system": system,
                "adapter": args.adapter,
                "stored": stored,
                "expired": expired,
                "seconds": round(seconds, 4),
            }
    yield {
        "bench": "expire",
        "system": "ratio",
        "full_vs_ttl_index_at_n": round(lines[1]["full"] / lines[1]["ttl"], 1),
        "full_vs_ttl_index_at_2n": round(lines[2]["full"] / lines[2]["ttl"], 1),
        "ttl_index_2n_vs_n": round(lines[2]["ttl"] / lines[1]["ttl"], 2),
        "full_scan_2n_vs_n": round(lines[2]["full"] / lines[1]["full"], 2),
    }


def bench_append(args: argparse.Namespace, root: Path) -> Iterator[dict[str, Any]]:
    clock = ManualClock()
    config = EngineConfig(
        data_dir=root / "append", adapter=args.adapter, durability=Durability.FSYNC, lifecycle_worker=False
    )
    engine = open_engine(config, clock)
    value = b"v" * args.value_bytes
    batch = [NewRecord(value) for _ in range(args.batch_size)]
    try:
        engine.create_namespace("expiring", 1, _policy(scan_batch_size=1_000))
        engine.create_namespace("live", 1, NamespacePolicy(retention_ms=None))
        # Enough expired entries that the scan outlasts the timed appends.
        expiring = args.scan_entries
        _fill(engine, "expiring", expiring, 1, value, 1_000, clock)
        clock.advance(SHORT_TTL_MS)

        def timed(count: int, stop: threading.Event | None = None) -> list[float]:
            out = []
            for _ in range(count):
                if stop is not None and stop.is_set():
                    break
                t0 = time.perf_counter()
                engine.append("live", 0, batch)
                out.append(time.perf_counter() - t0)
            return out

        idle = timed(args.appends)
        done = threading.Event()
        scan_seconds = [0.0]

        def scan() -> None:
            t0 = time.perf_counter()
            _ttl_scan(engine, "expiring")
            scan_seconds[0] = time.perf_counter() - t0
            done.set()

        worker = threading.Thread(target=scan)
        worker.start()
        during = timed(args.appends, done)
        worker.join()
    finally:
        engine.close()
    for system, lat in (("append-idle", idle), ("append-during-scan", during)):
        yield {
            "bench": "expire",
            "system": system,
            "adapter": args.adapter,
            "appends": len(lat),
            "batch_size": args.batch_size,
            "p50_ms": percentile_ms(lat, 0.5),
            "p99_ms": percentile_ms(lat, 0.99),
            "seconds": round(sum(lat), 4),
            **(
                {"scan_seconds": round(scan_seconds[0], 3), "scan_entries": expiring} if system != "append-idle" else {}
            ),
        }


def bench_drop(args: argparse.Namespace, root: Path) -> Iterator[dict[str, Any]]:
    clock = ManualClock()
    config = EngineConfig(
        data_dir=root / "drop", adapter=args.adapter, durability=Durability.NONE, lifecycle_worker=False
    )
    engine = open_engine(config, clock)
    size = args.segment_mib * MiB
    value = b"d" * 1000
    try:
        policy = NamespacePolicy(retention_ms=None, ttl_ms=SHORT_TTL_MS, segment_bytes=min(size, 16 * GiB))
        engine.create_namespace("drop", 1, policy)
        count = 0
        while len(engine.list_segments("drop", 0)) < 2:
            engine.append("drop", 0, [NewRecord(value) for _ in range(1_000)])
            count += 1_000
        sealed = engine.list_segments("drop", 0)[0]
        clock.advance(SHORT_TTL_MS)
        t0 = time.perf_counter()
        result = engine.reclaim("drop", manual=True)
        seconds = time.perf_counter() - t0
        # The sealed segment, and the active one too: idle and wholly expired, it is sealed and dropped.
        assert result.segments_deleted == 2 and result.rolled == 1, result
    finally:
        engine.close()
    yield {
        "bench": "expire",
        "system": "segment-drop",
        "adapter": args.adapter,
        "segments": result.segments_deleted,
        "stored": result.records_removed,
        "expired": result.records_removed,
        "segment_bytes": sealed.size_bytes,
        "bytes": result.bytes_reclaimed,
        "seconds": round(seconds, 4),
        "reclaim_ms": result.duration_ms,
    }


def run(args: argparse.Namespace, root: Path) -> Iterator[dict[str, Any]]:
    parts = set(args.parts.split(","))
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    if "scan" in parts:
        yield from bench_scan(args, root)
    if "append" in parts:
        yield from bench_append(args, root)
    if "drop" in parts:
        yield from bench_drop(args, root)
