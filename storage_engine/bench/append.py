"""Append throughput and per-call latency: the engine side by side with its baselines.

- ``engine-<adapter>``: the engine via ``open_engine``, P producer threads
  appending batches, fsync durability.
- ``naive-fsync``: what the design replaces; a lock per shard and one
  ``os.write`` + ``os.fsync`` per message (capped by ``--naive-records``).
- ``rocksdict``: the same records put straight into RocksDB, one
  ``WriteBatch`` per batch, synced writes.
- ``redis-xadd``: pipelined ``XADD``, one pipeline per batch; only when
  ``REDIS_URL`` is set.
"""

from __future__ import annotations

import argparse
import os
import struct
import threading
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from storage_engine import open_engine
from storage_engine.api import NewRecord
from storage_engine.bench.common import batched, encode, make_records, result, run_threads, timed_calls
from storage_engine.clock import SystemClock
from storage_engine.config import Durability, EngineConfig

AppendFn = Callable[[int, list[NewRecord]], object]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shards", type=int, default=1, help="shards; producer p writes shard p %% shards")
    parser.add_argument(
        "--naive-records", type=int, default=20_000, help="cap on the naive baseline's records (default 20000)"
    )
    parser.add_argument("--node", help="benchmark a running storage node at this URL over HTTP instead")
    parser.add_argument("--token", default=os.environ.get("NODE_TOKEN"), help="the node's token (or NODE_TOKEN)")
    parser.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        help=f"comma-separated subset of {','.join(SYSTEMS)} (default all; redis needs REDIS_URL)",
    )


def _producers(args: argparse.Namespace, records: int, batch_size: int) -> list[tuple[int, list[list[NewRecord]]]]:
    """(shard, batches) per producer: the records split into contiguous equal parts."""
    per = -(-records // args.producers)
    work = []
    for p in range(args.producers):
        start = p * per
        part = make_records(args, start, max(0, min(per, records - start)))
        work.append((p % args.shards, batched(part, batch_size)))
    return work


def _measure(args: argparse.Namespace, system: str, append: AppendFn, records: int, batch_size: int) -> dict[str, Any]:
    work = _producers(args, records, batch_size)
    workers = [partial(timed_calls, [partial(append, shard, b) for b in batches]) for shard, batches in work]
    seconds, latencies = run_threads(workers)
    return result(
        "append",
        system,
        records,
        seconds,
        latencies,
        args.value_bytes,
        producers=args.producers,
        batch_size=batch_size,
        keyed=args.keyed,
        tags=args.tags,
    )


def bench_engine(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    config = EngineConfig(data_dir=root, adapter=args.adapter, durability=Durability.FSYNC)
    engine = open_engine(config, SystemClock())
    try:
        engine.create_namespace("bench", args.shards)
        line = _measure(args, f"engine-{args.adapter}", partial(engine.append, "bench"), args.records, args.batch_size)
    finally:
        engine.close()
    return {**line, "durability": "memory" if args.adapter == "memory" else config.durability.value}


def bench_naive(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    root.mkdir(parents=True, exist_ok=True)
    fds = [os.open(root / f"{s}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) for s in range(args.shards)]
    locks = [threading.Lock() for _ in range(args.shards)]

    def append(shard: int, batch: list[NewRecord]) -> None:
        with locks[shard]:
            os.write(fds[shard], encode(batch[0]))
            os.fsync(fds[shard])

    try:
        return _measure(args, "naive-fsync", append, min(args.records, args.naive_records), 1)
    finally:
        for fd in fds:
            os.close(fd)


def bench_rocksdict(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    from rocksdict import Options, Rdict, WriteBatch, WriteOptions

    db = Rdict(str(root), Options(raw_mode=True))
    sync = WriteOptions()
    sync.sync = True
    ends = [0] * args.shards
    locks = [threading.Lock() for _ in range(args.shards)]

    def append(shard: int, batch: list[NewRecord]) -> None:
        with locks[shard]:  # offsets are taken in order; the write itself uses RocksDB's group commit
            base = ends[shard]
            ends[shard] += len(batch)
        wb = WriteBatch(raw_mode=True)
        for i, r in enumerate(batch):
            wb.put(struct.pack(">IQ", shard, base + i), encode(r))
        db.write(wb, sync)

    try:
        return _measure(args, "rocksdict", append, args.records, args.batch_size)
    finally:
        db.close()


def bench_redis(args: argparse.Namespace, url: str) -> dict[str, Any]:
    import redis

    client = redis.Redis.from_url(url)
    streams = [f"storage-bench-{uuid.uuid4().hex}-{s}" for s in range(args.shards)]

    def append(shard: int, batch: list[NewRecord]) -> None:
        pipe = client.pipeline(transaction=False)
        for r in batch:
            pipe.xadd(streams[shard], {"v": r.value or b"", "k": r.key or b"", "t": ",".join(r.tags)})
        pipe.execute()

    try:
        return _measure(args, "redis-xadd", append, args.records, args.batch_size)
    finally:
        client.delete(*streams)
        client.close()


def bench_node(args: argparse.Namespace, binary: bool) -> dict[str, Any]:
    """P concurrent HTTP clients (one pooled connection each) appending batches to a node."""
    from storage_engine.node_api.client import NodeClient

    namespace = f"bench-{uuid.uuid4().hex[:12]}"
    clients = [NodeClient(args.node, args.token, timeout_s=30, binary=binary) for _ in range(args.producers)]
    clients[0].create_namespace(namespace, args.shards)
    per_producer = iter(clients)
    try:
        system = f"node-http-{'binary' if binary else 'json'}"
        work = _producers(args, args.records, args.batch_size)
        workers = []
        for (shard, batches), client in zip(work, per_producer, strict=True):
            calls = [partial(client.append, namespace, shard, b) for b in batches]
            workers.append(partial(timed_calls, calls))
        seconds, latencies = run_threads(workers)
        return {
            **result(
                "append",
                system,
                args.records,
                seconds,
                latencies,
                args.value_bytes,
                producers=args.producers,
                batch_size=args.batch_size,
                keyed=args.keyed,
                tags=args.tags,
            ),
            "node": args.node,
        }
    finally:
        clients[0].delete_namespace(namespace)
        for client in clients:
            client.close()


SYSTEMS = ("engine", "naive", "rocksdict", "redis")


def run(args: argparse.Namespace, root: Path) -> Iterator[dict[str, Any]]:
    if args.node:
        binary = bench_node(args, binary=True)
        yield binary
        as_json = bench_node(args, binary=False)
        yield as_json
        yield {
            "bench": "append",
            "system": "ratio",
            "binary_vs_json": round(binary["msgs_per_s"] / as_json["msgs_per_s"], 2),
        }
        return
    wanted = set(args.systems.split(","))
    if unknown := wanted - set(SYSTEMS):
        raise SystemExit(f"--systems: unknown {', '.join(sorted(unknown))}; choose from {', '.join(SYSTEMS)}")
    url = os.environ.get("REDIS_URL")
    benches: dict[str, Callable[[], dict[str, Any]]] = {
        "engine": partial(bench_engine, args, root / "engine"),
        "naive": partial(bench_naive, args, root / "naive"),
        "rocksdict": partial(bench_rocksdict, args, root / "rocksdict"),
    }
    if url:
        benches["redis"] = partial(bench_redis, args, url)
    lines = {}
    for name, bench in benches.items():
        if name in wanted:
            lines[name] = bench()
            yield lines[name]
    engine = lines.pop("engine", None)
    if engine and lines:
        ratios = {
            f"engine_vs_{name}": round(engine["msgs_per_s"] / line["msgs_per_s"], 2)
            for name, line in lines.items()
            if line["msgs_per_s"]
        }
        yield {"bench": "append", "system": "ratio", "engine": engine["system"], **ratios}
