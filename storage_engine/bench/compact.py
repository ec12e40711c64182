"""Key compaction: N keyed records over K keys, compacted with a key-map memory budget.

Loads ``--records`` records whose keys are drawn (seeded) from ``--keys`` keys into one
shard of a ``cleanup_policy=compact`` namespace, seals the active segment, then times
one manual ``compact()`` with ``--map-budget`` bytes for the key map (several rounds
when the map cannot hold every key). ``correct`` compares the surviving offsets with a
reference computed in the same run (the last offset of each key). ``mb_per_s`` is the
stored bytes cleaned per second (bytes before / seconds), ``written_mb_per_s`` the bytes
left after; ``cpu_seconds`` is the process CPU time of the call (less sensitive to a busy
machine than ``seconds``), ``map_mb`` the key map's table, ``peak_rss_mb`` the process
high-water mark (load phase included), ``compact_rss_delta_mb`` what compaction added to
it, and with ``--trace-map`` the tracemalloc peak of the compaction call (slower).
"""

from __future__ import annotations

import argparse
import platform
import random
import resource
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from storage_engine import open_engine
from storage_engine.api import NewRecord
from storage_engine.clock import ManualClock
from storage_engine.compaction import KeyMap
from storage_engine.config import Durability, EngineConfig
from storage_engine.policy import MiB, NamespacePolicy, NodePolicy

LOAD_BATCH = 1_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keys", type=int, default=20_000, help="distinct keys (default 20000)")
    parser.add_argument("--map-budget", type=int, default=16 * MiB, help="key-map budget in bytes (default 16 MiB)")
    parser.add_argument("--segment-mib", type=int, default=64, help="segment size in MiB (default 64)")
    parser.add_argument("--trace-map", action="store_true", help="measure the compaction's tracemalloc peak")


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(args: argparse.Namespace, root: Path) -> Iterator[dict[str, Any]]:
    clock = ManualClock(1_700_000_000_000)
    config = EngineConfig(
        data_dir=root / "data",
        adapter=args.adapter,
        durability=Durability.NONE,
        lifecycle_worker=False,
        disk_capacity_bytes=1 << 50,
        node_policy=NodePolicy(compaction_map_budget_bytes=max(64 * 1024, args.map_budget)),
    )
    engine = open_engine(config, clock=clock)
    try:
        policy = NamespacePolicy(cleanup_policy="compact", retention_ms=None, segment_bytes=args.segment_mib * MiB)
        engine.create_namespace("bench", 1, policy)
        rng = random.Random(42)
        value = b"v" * args.value_bytes
        last: dict[int, int] = {}
        offset = 0
        for start in range(0, args.records, LOAD_BATCH):
            n = min(LOAD_BATCH, args.records - start)
            keys = [rng.randrange(args.keys) for _ in range(n)]
            engine.append("bench", 0, [NewRecord(value, key=b"key-%010d" % k) for k in keys])
            for k in keys:
                last[k] = offset
                offset += 1
        _, shards = engine._lc_namespace("bench")  # type: ignore[attr-defined]
        shards[0].roll_empty(clock.now_ms())  # everything sealed: the whole log is cleanable
        expected = sorted(last.values())
        rss_before = _rss_mb()
        if args.trace_map:
            tracemalloc.start()
        t0, c0 = time.perf_counter(), time.process_time()
        result = engine.compact("bench", 0, map_budget_bytes=args.map_budget, manual=True)
        seconds = time.perf_counter() - t0
        cpu_seconds = time.process_time() - c0
        traced = tracemalloc.get_traced_memory()[1] / MiB if args.trace_map else None
        if args.trace_map:
            tracemalloc.stop()
        rss_after = _rss_mb()
        survivors: list[int] = []
        pos = engine.shard_stats("bench", 0).log_start_offset
        while True:
            page = engine.read("bench", 0, pos, max_records=10_000, max_bytes=64 * MiB)
            if not page.records:
                break
            survivors.extend(r.offset for r in page.records)
            pos = page.next_offset
        line: dict[str, Any] = {
            "bench": "compact",
            "system": f"{args.adapter} {platform.python_implementation()} {platform.python_version()}",
            "records": args.records,
            "keys": args.keys,
            "map_budget_bytes": args.map_budget,
            "rounds": result.rounds,
            "seconds": round(seconds, 3),
            "cpu_seconds": round(cpu_seconds, 3),
            "bytes_before": result.bytes_before,
            "bytes_after": result.bytes_after,
            "records_removed": result.records_removed,
            "mb_per_s": round(result.bytes_before / MiB / seconds, 1) if seconds else None,
            "written_mb_per_s": round(result.bytes_after / MiB / seconds, 1) if seconds else None,
            "map_mb": round(KeyMap(args.map_budget).memory_bytes / MiB, 1),
            "peak_rss_mb": round(rss_after, 1),
            "compact_rss_delta_mb": round(rss_after - rss_before, 1),
            "correct": survivors == expected and engine.verify("bench").ok,
        }
        if traced is not None:
            line["compact_traced_peak_mb"] = round(traced, 1)
        yield line
    finally:
        engine.close()
