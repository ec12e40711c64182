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
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from storage_engine import open_engine
from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.bench.common import percentile_ms, run_threads
from storage_engine.clock import ManualClock
from storage_engine.config import Durability, EngineConfig
from storage_engine.policies.policy import GiB, MiB, NamespacePolicy
from storage_engine.rules import pacing
from storage_engine.rules.expiry import is_expired

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
        "--rounds", type=int, default=1, help="append part: idle and during-scan phases alternate this many times"
    )
    parser.add_argument("--scan-slice-ms", type=float, help="the scan's slice length (pacing.SLICE_S), for experiments")
    parser.add_argument(
        "--scan-busy-ms", type=float, help="the scan's slice while appends are in flight (pacing.SLICE_BUSY_S)"
    )
    parser.add_argument(
        "--scan-wait-ms", type=float, help="longest a scan pause waits for appends (pacing.SLICE_WAIT_S)"
    )
    parser.add_argument("--node", help="time producers of a running storage node at this URL during its sweeps")
    parser.add_argument("--token", default=os.environ.get("NODE_TOKEN"), help="the node's token (or NODE_TOKEN)")
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
    """Append latency alone and during a TTL scan, in ``--rounds`` rounds.

    Each round fills its own namespace with ``--scan-entries / rounds`` expired records,
    times ``--appends / rounds`` appends alone, and as many while a thread scans that
    namespace (the phase ends early if the scan does; the scan then finishes untimed).
    Even rounds time the appends alone first, odd ones last. Alternating the two phases
    keeps a shared machine's load changes from landing on one of them only; the samples
    of every round are pooled.
    """
    clock = ManualClock()
    config = EngineConfig(
        data_dir=root / "append", adapter=args.adapter, durability=Durability.FSYNC, lifecycle_worker=False
    )
    engine = open_engine(config, clock)
    value = b"v" * args.value_bytes
    batch = [NewRecord(value) for _ in range(args.batch_size)]
    rounds = max(1, args.rounds)
    per_round = max(1, args.scan_entries // rounds)
    appends = max(1, args.appends // rounds)
    idle: list[float] = []
    during: list[float] = []
    scan_seconds = during_seconds = 0.0
    scanned = 0
    pauses = waits = 0
    try:
        engine.create_namespace("live", 1, NamespacePolicy(retention_ms=None))

        def timed(count: int, stop: threading.Event | None = None) -> list[float]:
            """``count`` appends timed one by one; with ``stop``, until it is set, but at least one: the
            first starts with the scan (``started``), so a scan over before the next never leaves none."""
            out: list[float] = []
            for _ in range(count):
                if stop is not None and out and stop.is_set():
                    break
                t0 = time.perf_counter()
                engine.append("live", 0, batch)
                out.append(time.perf_counter() - t0)
            return out

        for r in range(rounds):
            ns = f"expiring-{r}"
            engine.create_namespace(ns, 1, _policy(scan_batch_size=1_000))
            _fill(engine, ns, per_round, 1, value, 1_000, clock)
            clock.advance(SHORT_TTL_MS)
            if r % 2 == 0:  # idle first in even rounds, last in odd ones: neither phase always follows the fill
                idle += timed(appends)
            done = threading.Event()
            seconds = [0.0]
            found = [0]

            started = threading.Barrier(2)

            def scan(
                ns: str = ns,
                seconds: list[float] = seconds,
                found: list[int] = found,
                done: threading.Event = done,
                started: threading.Barrier = started,
            ) -> None:
                started.wait()
                t0 = time.perf_counter()
                found[0] = _ttl_scan(engine, ns)
                seconds[0] = time.perf_counter() - t0
                done.set()

            before = engine.stats().counters
            worker = threading.Thread(target=scan)
            worker.start()
            started.wait()
            t0 = time.perf_counter()
            during += timed(appends, done)
            during_seconds += time.perf_counter() - t0
            worker.join()
            after = engine.stats().counters
            pauses += int(after.get("ttl_scan_pauses_total", 0) - before.get("ttl_scan_pauses_total", 0))
            waits += int(after.get("ttl_scan_waits_total", 0) - before.get("ttl_scan_waits_total", 0))
            scan_seconds += seconds[0]
            scanned += found[0]
            if r % 2 == 1:
                idle += timed(appends)
        # Node-wide sweeps with nothing due right after the rounds: what a scheduled sweep costs
        # while the entries the scans deleted are still RocksDB tombstones. The first follows
        # the rounds' scans of one namespace each; the second follows a sweep.
        empty_sweeps = []
        for _ in range(2):
            t0 = time.perf_counter()
            engine.expire_scan(None, manual=True)  # node-wide
            empty_sweeps.append(round((time.perf_counter() - t0) * 1000, 2))
    finally:
        engine.close()
    lines = {"append-idle": idle, "append-during-scan": during}
    for system, lat in lines.items():
        yield {
            "bench": "expire",
            "system": system,
            "adapter": args.adapter,
            "appends": len(lat),
            "batch_size": args.batch_size,
            "rounds": rounds,
            "p50_ms": percentile_ms(lat, 0.5),
            "p99_ms": percentile_ms(lat, 0.99),
            "seconds": round(sum(lat), 4),
            **(
                {
                    "scan_entries": scanned,
                    "scan_seconds": round(scan_seconds, 3),
                    "appends_seconds": round(during_seconds, 3),
                    "scan_pauses": pauses,
                    "scan_waits": waits,
                    "empty_sweeps_ms": empty_sweeps,
                }
                if system != "append-idle"
                else {}
            ),
        }
    idle_p99 = percentile_ms(idle, 0.99)
    yield {
        "bench": "expire",
        "system": "ratio",
        "append_p99_during_scan_vs_idle": round(percentile_ms(during, 0.99) / idle_p99, 2) if idle_p99 else None,
        "append_p50_during_scan_vs_idle": round(percentile_ms(during, 0.5) / percentile_ms(idle, 0.5), 2)
        if idle
        else None,
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


def bench_node(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """Producer latency over HTTP, alone and while node-wide TTL sweeps run (``--node URL``).

    In each of ``--rounds`` rounds a namespace is filled over HTTP with ``--scan-entries /
    rounds`` records that expire a second later; once they have, ``--producers`` clients
    append ``--appends / rounds`` batches of ``--batch-size`` each to another namespace,
    alone and while a thread calls ``POST /v1/node/lifecycle/expire-scan?manual=true`` until
    ``more`` is false (each call works through at most ``max_delete_per_scan`` entries, so a
    round's sweep is several calls, as the node's scheduled sweeps are). The node's clock is
    real: this part waits for the deadline instead of moving a clock.
    """
    from storage_engine.node_api.client import NodeClient

    tag = uuid.uuid4().hex[:8]
    live = f"bench-live-{tag}"
    admin = NodeClient(args.node, args.token, timeout_s=600, binary=True)
    clients = [NodeClient(args.node, args.token, timeout_s=60, binary=True) for _ in range(args.producers)]
    value = b"v" * args.value_bytes
    batch = [NewRecord(value) for _ in range(args.batch_size)]
    rounds = max(1, args.rounds)
    per_round = max(1, args.scan_entries // rounds)
    appends = max(1, args.appends // rounds // args.producers)
    created = [live]
    idle: list[float] = []
    during: list[float] = []
    sweep_calls = 0
    sweep_seconds = 0.0
    expired = 0

    def timed(stop: threading.Event | None) -> list[float]:
        def producer(client: NodeClient) -> list[float]:
            out = []
            for _ in range(appends):
                if stop is not None and stop.is_set():
                    break
                t0 = time.perf_counter()
                client.append(live, 0, batch)
                out.append(time.perf_counter() - t0)
            return out

        return run_threads([partial(producer, c) for c in clients])[1]

    try:
        admin.create_namespace(live, 1, NamespacePolicy(retention_ms=None))
        for r in range(rounds):
            ns = f"bench-expiring-{tag}-{r}"
            admin.create_namespace(ns, 1, NamespacePolicy(retention_ms=None))
            created.append(ns)
            deadline = int(time.time() * 1000) + SHORT_TTL_MS
            for start in range(0, per_round, 1_000):
                admin.append(
                    ns, 0, [NewRecord(value, expire_at=deadline) for _ in range(min(1_000, per_round - start))]
                )
            time.sleep(max(0.0, deadline / 1000 + 0.05 - time.time()))
            if r % 2 == 0:
                idle += timed(None)
            done = threading.Event()
            stats = [0, 0, 0.0]

            def sweep(done: threading.Event = done, stats: list[Any] = stats) -> None:
                t0 = time.perf_counter()
                try:
                    while True:
                        result = admin.lifecycle_step(None, "expire-scan", manual=True)
                        stats[0] += 1
                        stats[1] += result.expired_records
                        if not result.more:
                            break
                finally:
                    stats[2] = time.perf_counter() - t0
                    done.set()

            worker = threading.Thread(target=sweep)
            worker.start()
            during += timed(done)
            worker.join()
            sweep_calls += int(stats[0])
            expired += int(stats[1])
            sweep_seconds += float(stats[2])
            if r % 2 == 1:
                idle += timed(None)
    finally:
        for name in created:
            admin.delete_namespace(name)
        admin.close()
        for c in clients:
            c.close()
    for system, lat in (("node-append-idle", idle), ("node-append-during-sweep", during)):
        yield {
            "bench": "expire",
            "system": system,
            "node": args.node,
            "producers": args.producers,
            "appends": len(lat),
            "batch_size": args.batch_size,
            "rounds": rounds,
            "p50_ms": percentile_ms(lat, 0.5),
            "p99_ms": percentile_ms(lat, 0.99),
            **(
                {"sweep_calls": sweep_calls, "expired": expired, "sweep_seconds": round(sweep_seconds, 3)}
                if lat is during
                else {}
            ),
        }
    idle_p99 = percentile_ms(idle, 0.99)
    yield {
        "bench": "expire",
        "system": "ratio",
        "node_append_p99_during_sweep_vs_idle": round(percentile_ms(during, 0.99) / idle_p99, 2) if idle_p99 else None,
    }


def run(args: argparse.Namespace, root: Path) -> Iterator[dict[str, Any]]:
    parts = set(args.parts.split(","))
    if args.node:
        yield from bench_node(args)
        return
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    if args.scan_slice_ms is not None:
        pacing.SLICE_S = args.scan_slice_ms / 1000
    if args.scan_busy_ms is not None:
        pacing.SLICE_BUSY_S = args.scan_busy_ms / 1000
    if args.scan_wait_ms is not None:
        pacing.SLICE_WAIT_S = args.scan_wait_ms / 1000
    if "scan" in parts:
        yield from bench_scan(args, root)
    if "append" in parts:
        yield from bench_append(args, root)
    if "drop" in parts:
        yield from bench_drop(args, root)
