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
``--value-jitter N`` draws each value's size (seeded) from ``value_bytes .. value_bytes +
N - 1``, so that records differ in size (the record walk cannot take a batch as one
stride).

After loading, RocksDB is asked to compact the shard's index ranges (``settle_seconds``:
the freshly loaded index, which a node compacts in the background long before a
compaction is due; without it the first round's own ``compact_range`` pays for it).
Before compacting, the same segment files are read and written to new files with an
fsync each (``SEQ_CHUNK`` at a time), timed in the same run: the ``sequential-rewrite``
line, what the disk and page cache give for moving those bytes once; the ``ratio`` line
is the compaction's ``mb_per_s`` over that baseline's (segment adapter only: the
others have no segment files).
"""

from __future__ import annotations

import argparse
import os
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
from storage_engine.compaction.keymap import KeyMap
from storage_engine.config import Durability, EngineConfig
from storage_engine.policies.policy import MiB, NamespacePolicy, NodePolicy

LOAD_BATCH = 1_000
SEQ_CHUNK = 4 * MiB  # bytes the sequential baseline reads and writes at a time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keys", type=int, default=20_000, help="distinct keys (default 20000)")
    parser.add_argument("--map-budget", type=int, default=16 * MiB, help="key-map budget in bytes (default 16 MiB)")
    parser.add_argument("--segment-mib", type=int, default=64, help="segment size in MiB (default 64)")
    parser.add_argument("--trace-map", action="store_true", help="measure the compaction's tracemalloc peak")
    parser.add_argument(
        "--value-jitter", type=int, default=0, help="values of value-bytes + [0, N) bytes, seeded (default 0)"
    )


def sequential_rewrite(paths: list[Path]) -> dict[str, Any]:
    """Read each file and write it to a new file (fsync), timed; the copies are removed."""
    total = 0
    copies = []
    t0, c0 = time.perf_counter(), time.process_time()
    for path in paths:
        copy = path.with_name(path.name + ".seqcopy")
        copies.append(copy)
        src = os.open(path, os.O_RDONLY)
        dst = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            pos = 0
            while True:
                chunk = os.pread(src, SEQ_CHUNK, pos)
                if not chunk:
                    break
                view = memoryview(chunk)
                while view:
                    view = view[os.pwrite(dst, view, pos + len(chunk) - len(view)) :]
                pos += len(chunk)
            os.fsync(dst)
            total += pos
        finally:
            os.close(src)
            os.close(dst)
    seconds = time.perf_counter() - t0
    cpu_seconds = time.process_time() - c0
    for copy in copies:
        copy.unlink()
    return {
        "bench": "compact",
        "system": "sequential-rewrite",
        "files": len(paths),
        "bytes": total,
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu_seconds, 3),
        "mb_per_s": round(total / MiB / seconds, 1) if seconds else None,
    }


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
        value = b"v" * (args.value_bytes + max(0, args.value_jitter))
        jitter = max(0, args.value_jitter)
        last: dict[int, int] = {}
        offset = 0
        for start in range(0, args.records, LOAD_BATCH):
            n = min(LOAD_BATCH, args.records - start)
            keys = [rng.randrange(args.keys) for _ in range(n)]
            sizes = [args.value_bytes + rng.randrange(jitter) if jitter else args.value_bytes for _ in range(n)]
            engine.append(
                "bench", 0, [NewRecord(value[:size], key=b"key-%010d" % k) for k, size in zip(keys, sizes, strict=True)]
            )
            for k in keys:
                last[k] = offset
                offset += 1
        _, shards = engine.lifecycle_namespace("bench")  # type: ignore[attr-defined]
        shards[0].roll_empty(clock.now_ms())  # everything sealed: the whole log is cleanable
        # Let the index settle as it would long before a compaction is due (min_compaction_lag_ms):
        # RocksDB compacts the shard's freshly loaded index ranges now, not inside the timed call.
        t_settle = time.perf_counter()
        shards[0].compact_deleted()
        settle_seconds = time.perf_counter() - t_settle
        expected = sorted(last.values())
        lookup = getattr(shards[0], "_segment_file", None)
        files = [] if lookup is None else [lookup(seg.base_offset) for seg in shards[0].lifecycle_segments()]
        paths = [f.path for f in files if f is not None and f.size]
        baseline = sequential_rewrite(paths) if paths else None
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
            "settle_seconds": round(settle_seconds, 3),
        }
        if args.value_jitter:
            line["value_jitter"] = args.value_jitter
        if traced is not None:
            line["compact_traced_peak_mb"] = round(traced, 1)
        if baseline is not None:
            yield baseline
        yield line
        if baseline is not None and baseline["mb_per_s"] and line["mb_per_s"]:
            ratio = line["mb_per_s"] / baseline["mb_per_s"]
            yield {"bench": "compact", "system": "ratio", "compact_vs_sequential": round(ratio, 3)}
    finally:
        engine.close()
