"""Tiered storage: offload MB/s against the same bytes copied with obstore directly, and random
reads of offloaded records (cold and cached) against local reads, in one run.

Steps, on one shard of ``--records`` records of ``--value-bytes`` (sealed ``--segment-mb``
segments):

1. **local reads**: ``--reads`` random single-record reads by offset (``read(..., max_records=1)``)
   while every segment is local;
2. **direct copy** (the peer): every sealed segment file PUT with ``obstore`` under a separate
   prefix, ``offload_concurrency`` at a time — the bytes an offload must move, with nothing else —
   and made as durable as the offload makes its objects (on a ``file://`` tier fsynced:
   :meth:`~storage_engine.tier.store.ObjectTier.make_durable`, a no-op on S3, whose PUT is
   durable when acknowledged); ``--plain-direct-copy`` leaves the fsync out;
3. **offload**: offload steps (hashing, upload, verification, manifests, catalog), interleaved with
   step 2: ``concurrency`` files copied directly, then an offload step of as many segments, and so
   on, so both see the same load; local copies are kept meanwhile (``local_retention_ms`` unset),
   then dropped by one more step, timed on its own (``drop-local-copies``: local deletion, not
   upload work);
4. **cold remote reads**: ``--cold-reads`` reads at offsets spread so that each falls in a block
   no other read fetched (every one a cache miss);
5. **cached remote reads**: the local reads' offsets again after one warming pass (every block in
   the cache, ``tier_cache_bytes`` large enough);
6. **appends during an offload** (the pacing promise: an append never waits for an upload):
   ``--append-batches`` appends of ``--batch-size`` records to a local-only namespace with nothing
   else running, then as many again while offload steps upload a second namespace of
   ``--append-fill-records`` records in a background thread (appends stop when it is done): first
   with uploads that do not give way to appends (the baseline,
   ``append-during-offload-no-give-way``), then as the engine runs them (``append-during-offload``).

The tier is ``--tier-uri`` (``s3://bucket[/prefix]`` with ``TIER_S3_ENDPOINT`` and ``AWS_*``),
else a ``file://`` directory in the data directory. Last line: ``{"system": "ratio",
"offload_vs_direct": offload MB/s ÷ direct MB/s, "cached_remote_vs_local_read": cached p50 ÷
local p50}``. Targets (issue 19): offload ≥ 0.8 of the direct copy; a cached remote read within 2×
of a local one. It also carries ``append_p99_during_offload_vs_alone`` and
``append_p99_no_give_way_vs_alone`` (step 6).
"""

from __future__ import annotations

import argparse
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from storage_engine import open_engine
from storage_engine.adapters.segment import SegmentAdapter
from storage_engine.bench.common import batched, make_records, percentile_ms, result, timed_calls
from storage_engine.clock import SystemClock
from storage_engine.config import Durability, EngineConfig
from storage_engine.policies.policy import MiB, NamespacePolicy, NodePolicy
from storage_engine.tier import context
from storage_engine.tier.store import ObjectTier

FILL_CHUNK = 100_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(records=200_000, value_bytes=1000)
    parser.add_argument("--tier-uri", help="object store (default: file:// directory inside the data dir)")
    parser.add_argument("--segment-mb", type=int, default=16, help="segment size in MiB (default 16)")
    parser.add_argument("--reads", type=int, default=5_000, help="local and cached random reads (default 5000)")
    parser.add_argument("--cold-reads", type=int, default=300, help="cold remote reads (default 300)")
    parser.add_argument("--concurrency", type=int, default=2, help="offload_concurrency (default 2)")
    parser.add_argument("--block-kib", type=int, help="read cache block size in KiB (default: the engine's)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random offsets")
    parser.add_argument(
        "--append-offload-mb-per-s",
        type=float,
        help="offload_bandwidth_bytes_per_s (in MB/s) while appends are timed in step 6 (default: unlimited)",
    )
    parser.add_argument(
        "--plain-direct-copy", action="store_true", help="the direct copy without fsync on a file:// tier"
    )
    parser.add_argument(
        "--append-batches", type=int, default=2_000, help="appends timed alone and during an offload (default 2000)"
    )
    parser.add_argument(
        "--append-fill-records",
        type=int,
        default=100_000,
        help="records of the namespace offloaded while appends are timed (default 100000)",
    )


def _mb_per_s(nbytes: int, seconds: float) -> float:
    return round(nbytes / seconds / 1e6, 2) if seconds else 0.0


def _direct_copy(tier: ObjectTier, files: list[Path], concurrency: int, durable: bool) -> tuple[float, int]:
    """PUT every file under a fresh prefix ``concurrency`` at a time (``durable``: then made durable as an
    offload makes its objects); (seconds, bytes). Removed after."""
    prefix = f"direct-{uuid.uuid4().hex[:8]}/"

    def put(path: Path) -> int:
        with open(path, "rb") as f:
            tier.put(prefix + path.name, f)
        if durable:
            tier.make_durable(prefix + path.name)
        return path.stat().st_size

    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        nbytes = sum(pool.map(put, files))
    seconds = time.perf_counter() - began
    for path in files:
        tier.delete(prefix + path.name)
    return seconds, nbytes


def _fill(engine: SegmentAdapter, namespace: str, args: argparse.Namespace, records: int) -> None:
    for start in range(0, records, FILL_CHUNK):
        for batch in batched(make_records(args, start, min(FILL_CHUNK, records - start)), args.batch_size):
            engine.append(namespace, 0, batch)


def _appends_during_offload(
    engine: SegmentAdapter, args: argparse.Namespace, policy: NamespacePolicy
) -> tuple[list[float], dict[bool, tuple[list[float], int]]]:
    """Step 6: append latencies alone, then while offload steps run in another thread, without and
    with uploads giving way to appends (:data:`storage_engine.tier.context.GIVE_WAY_TO_APPENDS`);
    for each, the latencies and the bytes that thread offloaded."""
    for give_way in (False, True):
        engine.create_namespace(f"bench-offloading-{give_way:d}", 1, policy)
        _fill(engine, f"bench-offloading-{give_way:d}", args, args.append_fill_records)
    engine.create_namespace("bench-appends", 1, NamespacePolicy(segment_bytes=policy.segment_bytes, retention_ms=None))
    batch = make_records(args, 0, args.batch_size)
    append = partial(engine.append, "bench-appends", 0, batch)
    timed_calls([append] * min(200, args.append_batches))  # warm up
    alone = timed_calls([append] * args.append_batches)
    if args.append_offload_mb_per_s:
        limit = int(args.append_offload_mb_per_s * 1e6)
        engine.set_node_policy(replace(engine.node_policy(), offload_bandwidth_bytes_per_s=limit))
    time.sleep(0.002)  # local_retention_ms 0: the sealed segments' newest records are in the past
    during: dict[bool, tuple[list[float], int]] = {}
    try:
        for give_way in (False, True):
            context.GIVE_WAY_TO_APPENDS = give_way
            during[give_way] = _appends_while_offloading(engine, args, f"bench-offloading-{give_way:d}", append)
    finally:
        context.GIVE_WAY_TO_APPENDS = True
    return alone, during


def _appends_while_offloading(
    engine: SegmentAdapter, args: argparse.Namespace, namespace: str, append: Callable[[], object]
) -> tuple[list[float], int]:
    """Appends timed while offload steps upload ``namespace`` in another thread (until it is done
    or ``--append-batches`` appends); their latencies and the bytes offloaded."""
    offloaded = 0
    running = threading.Event()

    def offload_all() -> None:
        nonlocal offloaded
        running.set()
        while True:
            step = engine.offload(namespace, limit=args.concurrency)
            offloaded += step.bytes_offloaded
            if not step.more:
                break
            if not step.bytes_offloaded:  # paced: the bucket is empty; a scheduler would call again later
                time.sleep(0.05)

    thread = threading.Thread(target=offload_all, name="bench-offload")
    thread.start()
    running.wait()
    during: list[float] = []
    clock = time.perf_counter
    while thread.is_alive() and len(during) < args.append_batches:
        t0 = clock()
        append()
        during.append(clock() - t0)
    thread.join()
    return during, offloaded


def run(args: argparse.Namespace, root: Path) -> Iterator[dict[str, Any]]:
    uri = args.tier_uri or (root / "tier").as_uri()
    node = NodePolicy(
        offload_concurrency=args.concurrency,
        tier_cache_bytes=max(256 * MiB, 2 * args.records * (args.value_bytes + 64)),
        file_delete_delay_ms=0,
    )
    config = EngineConfig(
        data_dir=root / "data", durability=Durability.NONE, lifecycle_worker=False, tier_uri=uri, node_policy=node
    )
    engine = open_engine(config, SystemClock())
    assert isinstance(engine, SegmentAdapter)
    lines: list[dict[str, Any]] = []
    cache = engine.tier.cache
    try:
        policy = NamespacePolicy(
            segment_bytes=args.segment_mb * MiB, retention_ms=None, remote_storage_enabled=True, local_retention_ms=0
        )
        engine.create_namespace("bench", 1, replace(policy, local_retention_ms=None))  # copies kept in 2–3
        _fill(engine, "bench", args, args.records)
        rng = random.Random(args.seed)
        offsets = [rng.randrange(args.records) for _ in range(args.reads)]
        read = partial(engine.read, "bench", 0, max_records=1)

        # 1. local reads (twice: the first pass warms the page cache, as the cache is warmed below)
        timed_calls([partial(read, o) for o in offsets])
        local = timed_calls([partial(read, o) for o in offsets])
        lines.append(result("tier", "local-read", args.records, sum(local), local, args.value_bytes, args.reads))

        # 2–3. the peer and the offload, interleaved: ``concurrency`` files copied directly, then an
        # offload step of as many segments, and so on, so that both see the same machine (a shared
        # machine's load moves within seconds; one after the other, the ratio followed it)
        segments = engine.list_segments("bench", 0)[:-1]
        shard_dir = engine.data_dir.segments_dir / "bench" / "0"
        files = [shard_dir / f"{s.base_offset:020d}.log" for s in segments]
        direct_s = offload_s = 0.0
        direct_bytes = offloaded = 0
        for i in range(0, len(files), args.concurrency):
            chunk = files[i : i + args.concurrency]
            seconds, nbytes = _direct_copy(engine.tier.tier, chunk, args.concurrency, not args.plain_direct_copy)
            direct_s, direct_bytes = direct_s + seconds, direct_bytes + nbytes
            began = time.perf_counter()
            step = engine.offload("bench", limit=args.concurrency)
            offload_s += time.perf_counter() - began
            offloaded += step.bytes_offloaded
        while True:  # anything left (never, unless a step stopped early)
            began = time.perf_counter()
            step = engine.offload("bench", limit=64)
            offload_s += time.perf_counter() - began
            offloaded += step.bytes_offloaded
            if not step.more:
                break
        direct_mb, offload_mb = _mb_per_s(direct_bytes, direct_s), _mb_per_s(offloaded, offload_s)
        for system, nbytes, seconds, mb in (
            ("direct-copy", direct_bytes, direct_s, direct_mb),
            ("offload", offloaded, offload_s, offload_mb),
        ):
            lines.append(
                {
                    "bench": "tier",
                    "system": system,
                    "segments": len(files),
                    "bytes": nbytes,
                    "seconds": round(seconds, 4),
                    "mb_per_s": mb,
                    "concurrency": args.concurrency,
                }
            )
        engine.update_namespace("bench", policy)  # local_retention_ms 0: the local copies go now
        time.sleep(0.002)  # every sealed segment's newest record is in the past
        began = time.perf_counter()
        step = engine.offload("bench")
        dropped_s = time.perf_counter() - began
        lines.append(
            {
                "bench": "tier",
                "system": "drop-local-copies",
                "segments": step.local_copies_dropped,
                "bytes": step.local_bytes_dropped,
                "seconds": round(dropped_s, 4),
            }
        )

        if args.block_kib:
            cache.block_bytes = args.block_kib * 1024  # nothing is cached yet
        # 4. cold remote reads: one per block, never the same block twice
        step_records = max(1, args.records // max(1, args.cold_reads))
        cold_offsets = [i * step_records + rng.randrange(step_records) for i in range(args.cold_reads)]
        cold_offsets = [o for o in cold_offsets if o < args.records]
        rng.shuffle(cold_offsets)
        before = engine.stats().counters
        cold = timed_calls([partial(read, o) for o in cold_offsets])
        after = engine.stats().counters
        lines.append(
            result(
                "tier",
                "remote-read-cold",
                args.records,
                sum(cold),
                cold,
                args.value_bytes,
                len(cold),
                cache_misses=after.get("tier_cache_misses_total", 0) - before.get("tier_cache_misses_total", 0),
            )
        )

        # 5. cached remote reads (a warming pass first)
        timed_calls([partial(read, o) for o in offsets])
        before = engine.stats().counters
        cached = timed_calls([partial(read, o) for o in offsets])
        after = engine.stats().counters
        lines.append(
            result(
                "tier",
                "remote-read-cached",
                args.records,
                sum(cached),
                cached,
                args.value_bytes,
                args.reads,
                cache_misses=after.get("tier_cache_misses_total", 0) - before.get("tier_cache_misses_total", 0),
            )
        )
        assert all(s.tier.value == "remote" for s in engine.list_segments("bench", 0)[:-1])

        # 6. appends alone, then during an offload
        alone, runs = _appends_during_offload(engine, args, policy)
        (unpaced, unpaced_bytes), (during, during_bytes) = runs[False], runs[True]
        for system, latencies, extra in (
            ("append-alone", alone, {}),
            ("append-during-offload-no-give-way", unpaced, {"offloaded_bytes": unpaced_bytes}),
            ("append-during-offload", during, {"offloaded_bytes": during_bytes}),
        ):
            appended = args.batch_size * len(latencies)  # msgs_per_s counts records, not calls
            lines.append(
                result("tier", system, appended, sum(latencies), latencies, args.value_bytes, appended, **extra)
            )
    finally:
        engine.close()
    yield from lines
    local_p50 = percentile_ms(local, 0.5)
    alone_p99 = percentile_ms(alone, 0.99)
    yield {
        "bench": "tier",
        "system": "ratio",
        "tier": uri.split("://", 1)[0],
        "block_kib": cache.block_bytes // 1024,
        "offload_vs_direct": round(offload_mb / direct_mb, 3) if direct_mb else 0.0,
        "cached_remote_vs_local_read": round(percentile_ms(cached, 0.5) / local_p50, 3) if local_p50 else 0.0,
        "append_p99_during_offload_vs_alone": round(percentile_ms(during, 0.99) / alone_p99, 3) if alone_p99 else 0.0,
        "append_p99_no_give_way_vs_alone": round(percentile_ms(unpaced, 0.99) / alone_p99, 3) if alone_p99 else 0.0,
    }
