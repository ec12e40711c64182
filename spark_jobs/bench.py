"""``python -m spark_jobs.bench lake-export [--gib 0.2] [--json]``: throughput of the lake export.

Writes segment files with the real storage engine (in-process, segment adapter, a manual clock spreading the
records over ``--days`` UTC days), closes the engine, then times ``lake-export`` on them on ``--master``
(default ``local[2]``) into a fresh lake, and reports MB/s of segment bytes, the output files (count and
min/median/max size, and how many are under 64 MiB) and a second, incremental run (which must export
nothing). Figures go to stdout as JSON (``--json``) or as a short text.

Example: ``python -m spark_jobs.bench lake-export --gib 2 --json``. ``--keep DIR`` keeps the data directory
and the lake under DIR (and reuses a data directory already there, to time the export alone).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_jobs.config import JobConfig
from spark_jobs.jobs.lake_export import run_export
from spark_jobs.lake import LakeFileSystem
from spark_jobs.segments import READERS
from spark_jobs.session import spark_session
from spark_jobs.source import engine_segment_files, offline_segment_files

MiB = 1 << 20
GiB = 1 << 30
SMALL_FILE_BYTES = 64 * MiB
BENCH_EPOCH_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
DAY_MS = 86_400_000
TAGS = ("eu", "us", "priority", "retry", "blue", "green")
TTLS_MS = (3_600_000, DAY_MS, 7 * DAY_MS)


@dataclass(frozen=True)
class GenSpec:
    total_bytes: int
    namespaces: int = 2
    shards: int = 2
    segment_bytes: int = 128 * MiB
    value_bytes: int = 1024
    batch_records: int = 500
    days: int = 2
    seed: int = 10


def generate_segments(data_dir: Path, spec: GenSpec) -> dict[str, Any]:
    """Append about ``spec.total_bytes`` of message-like records with the real engine; return figures."""
    from storage_engine import open_engine
    from storage_engine.api import NewRecord
    from storage_engine.clock import ManualClock
    from storage_engine.config import Durability, EngineConfig
    from storage_engine.policies.policy import NamespacePolicy

    rng = random.Random(spec.seed)
    # Values: slices of a pool that is half random bytes, half repeated text, so Parquet's compression
    # has something to do but not everything (messages are neither random nor constant).
    text = b'{"event":"order_created","currency":"EUR","items":[{"sku":"A-1","qty":1}]} ' * 8
    pool = bytearray()
    while len(pool) < 4 * MiB:
        pool += rng.randbytes(512) + text[:512]
    pool_bytes = bytes(pool)
    clock = ManualClock(BENCH_EPOCH_MS)
    engine = open_engine(
        EngineConfig(data_dir=data_dir, adapter="segment", durability=Durability.NONE),
        clock=clock,
    )
    names = [f"bench-{i}" for i in range(spec.namespaces)]
    policy = NamespacePolicy(segment_bytes=spec.segment_bytes, retention_ms=None)
    approx_record = spec.value_bytes + 80
    batches = max(1, spec.total_bytes // (approx_record * spec.batch_records))
    step_ms = max(1, spec.days * DAY_MS // batches)
    records = 0
    started = time.perf_counter()
    try:
        for name in names:
            engine.create_namespace(name, spec.shards, policy)
        for i in range(batches):
            batch = []
            ts = clock.now_ms()
            for _ in range(spec.batch_records):
                start = rng.randrange(len(pool_bytes) - spec.value_bytes)
                keyed = rng.random() < 0.5
                batch.append(
                    NewRecord(
                        value=pool_bytes[start : start + spec.value_bytes],
                        key=f"user-{rng.randrange(100_000):06d}".encode() if keyed else None,
                        tags=tuple(rng.sample(TAGS, k=rng.randint(0, 2))),
                        headers=(("trace", rng.randbytes(8)),) if rng.random() < 0.3 else (),
                        expire_at=ts + rng.choice(TTLS_MS) if rng.random() < 0.4 else None,
                    )
                )
            engine.append(names[i % len(names)], (i // len(names)) % spec.shards, batch)
            records += len(batch)
            clock.advance(step_ms)
        seconds = time.perf_counter() - started
        files = engine_segment_files(engine, data_dir, include_active=True)
    finally:
        engine.close()
    return {
        "records": records,
        "segment_files": len(files),
        "sealed_segments": sum(1 for f in files if f.sealed),
        "bytes": sum(f.size for f in files),
        "sealed_bytes": sum(f.size for f in files if f.sealed),
        "seconds": round(seconds, 2),
    }


def _tree_cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system, reaped children included) of ``pid`` and its live descendants (Linux);
    the Spark JVM and its Python workers, whatever else is running on the machine. None off Linux."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))  # fields[1]: parent pid
        ticks[int(entry.name)] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        total += ticks.get(current, 0)
        stack.extend(children.get(current, []))
    return total / os.sysconf("SC_CLK_TCK")


def file_stats(sizes: Sequence[int]) -> dict[str, Any]:
    ordered = sorted(sizes)
    if not ordered:
        return {"count": 0, "min": 0, "median": 0, "max": 0, "total": 0, "under_64mib": 0}
    return {
        "count": len(ordered),
        "min": ordered[0],
        "median": int(statistics.median(ordered)),
        "max": ordered[-1],
        "total": sum(ordered),
        "under_64mib": sum(1 for size in ordered if size < SMALL_FILE_BYTES),
    }


def bench_lake_export(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="lake-export-bench-"))
    data_dir = workdir / "data"
    lake_dir = workdir / "lake"
    spec = GenSpec(
        total_bytes=int(args.gib * GiB),
        namespaces=args.namespaces,
        shards=args.shards,
        segment_bytes=args.segment_mib * MiB,
        value_bytes=args.value_bytes,
        days=args.days,
    )
    try:
        if (data_dir / "segments").is_dir() and args.keep:
            generated: dict[str, Any] = {"reused": str(data_dir)}
        else:
            generated = generate_segments(data_dir, spec)
        shutil.rmtree(lake_dir, ignore_errors=True)
        segments = offline_segment_files(data_dir)  # the generator's engine is closed: no node runs on it
        config = JobConfig(
            app_name="lifecycle-store-bench-lake-export",
            spark_master=args.master,
            driver_memory=args.driver_memory,
            log_level="ERROR",
        )
        with spark_session(config) as spark:
            jvm: Any = spark.sparkContext._jvm
            jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
            cpu_before = _tree_cpu_seconds(jvm_pid)
            first = run_export(spark, segments, str(lake_dir), reader=args.reader)
            cpu_after = _tree_cpu_seconds(jvm_pid)
            second = run_export(spark, segments, str(lake_dir), reader=args.reader)
            files = LakeFileSystem(spark, str(lake_dir)).data_files()
            warm: dict[str, Any] | None = None
            if args.warm:
                # The same export again into a fresh lake, with the JVM and Python workers warm.
                warm_dir = workdir / "lake-warm"
                shutil.rmtree(warm_dir, ignore_errors=True)
                before = _tree_cpu_seconds(jvm_pid)
                again = run_export(spark, segments, str(warm_dir), reader=args.reader)
                after = _tree_cpu_seconds(jvm_pid)
                warm_cpu = None if before is None or after is None else round(after - before, 2)
                warm = {
                    "seconds": round(again.seconds, 2),
                    "mb_per_s": round(again.bytes_read / 1e6 / again.seconds, 1),
                    "cpu_seconds": warm_cpu,
                    "mb_per_cpu_s": round(again.bytes_read / 1e6 / warm_cpu, 1) if warm_cpu else None,
                }
                shutil.rmtree(warm_dir, ignore_errors=True)
        mb = first.bytes_read / 1e6
        cpu = None if cpu_before is None or cpu_after is None else round(cpu_after - cpu_before, 2)
        return {
            "bench": "lake-export",
            "master": args.master,
            "reader": args.reader,
            "gib_requested": args.gib,
            "segment_bytes": spec.segment_bytes,
            "generated": generated,
            "export": {
                "segments": len(first.exported) + len(first.replaced),
                "bytes_read": first.bytes_read,
                "records": first.records_written,
                "seconds": round(first.seconds, 2),
                "mb_per_s": round(mb / first.seconds, 1) if first.seconds else None,
                "records_per_s": round(first.records_written / first.seconds) if first.seconds else None,
                # CPU of the Spark JVM and its Python workers during the export: MB per CPU-second does
                # not depend on what else the machine runs; × cores is the throughput on idle cores.
                "cpu_seconds": cpu,
                "mb_per_cpu_s": round(mb / cpu, 1) if cpu else None,
                "load_average_1m": round(os.getloadavg()[0], 2),
            },
            "warm_export": warm,
            "rerun": {"segments_exported": len(second.exported) + len(second.replaced), "seconds": second.seconds},
            "files": file_stats([size for _, size in files]),
            "workdir": str(workdir) if args.keep else None,
        }
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m spark_jobs.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("bench", choices=["lake-export"])
    parser.add_argument("--gib", type=float, default=0.2, help="GiB of segments to generate (default 0.2)")
    parser.add_argument("--segment-mib", type=int, default=128, help="segment_bytes of the namespaces, MiB")
    parser.add_argument("--namespaces", type=int, default=2)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--days", type=int, default=2, help="UTC days the records span")
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--reader", choices=READERS, default="arrow")
    parser.add_argument("--warm", action="store_true", help="also time a second export with Spark warm")
    parser.add_argument("--keep", help="keep (or reuse) the data directory and lake under this directory")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result = bench_lake_export(args)
    if args.json:
        print(json.dumps(result, indent=1, sort_keys=True))
    else:
        export, files = result["export"], result["files"]
        print(
            f"lake-export: {export['bytes_read'] / 1e6:.0f} MB in {export['seconds']} s = {export['mb_per_s']} MB/s "
            f"({export['records']} records, {export['segments']} segments); {files['count']} files "
            f"min/median/max {files['min']}/{files['median']}/{files['max']} B; rerun exported "
            f"{result['rerun']['segments_exported']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
