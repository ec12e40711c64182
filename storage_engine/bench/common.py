"""Pieces every bench shares: options, record generation, timing and output."""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from storage_engine.api import NewRecord
from storage_engine.config import ADAPTERS

TAG_POOL = 16  # distinct tags the generated records draw from


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=100_000, help="records in the shard (default 100000)")
    parser.add_argument("--value-bytes", type=int, default=100, help="value size in bytes (default 100)")
    parser.add_argument("--producers", type=int, default=1, help="producer threads (default 1)")
    parser.add_argument("--keyed", action="store_true", help="give every record a distinct key")
    parser.add_argument("--tags", type=int, default=0, help="tags per record (default 0)")
    parser.add_argument(
        "--expire-in-ms",
        type=int,
        help="give every record an explicit expire_at this far ahead (spread over 1 s); default none",
    )
    parser.add_argument("--adapter", choices=ADAPTERS, default="segment", help="engine adapter (default segment)")
    parser.add_argument("--data-dir", type=Path, help="where to write (default: a temp dir, removed afterwards)")
    parser.add_argument("--batch-size", type=int, default=100, help="records per append call (default 100)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per line")


def make_records(args: argparse.Namespace, start: int, count: int) -> list[NewRecord]:
    """Records ``start .. start+count-1``; values share one buffer so generation stays cheap."""
    value = b"v" * args.value_bytes
    tags = [f"tag-{i}" for i in range(TAG_POOL)]
    ahead = getattr(args, "expire_in_ms", None)
    base = None if ahead is None else int(time.time() * 1000) + ahead
    return [
        NewRecord(
            value,
            key=b"key-%012d" % i if args.keyed else None,
            tags=tuple(tags[(i + j) % TAG_POOL] for j in range(args.tags)),
            expire_at=None if base is None else base + (i * 7919) % 1000,
        )
        for i in range(start, start + count)
    ]


def batched(records: list[NewRecord], size: int) -> list[list[NewRecord]]:
    return [records[i : i + size] for i in range(0, len(records), size)]


def encode(r: NewRecord) -> bytes:
    """A plain length-prefixed encoding for the baselines that store bytes."""
    key, value = r.key or b"", r.value or b""
    tags = ",".join(r.tags).encode()
    return struct.pack(">III", len(key), len(value), len(tags)) + key + value + tags


def run_threads(workers: Sequence[Callable[[], list[float]]]) -> tuple[float, list[float]]:
    """Run workers together; return wall seconds and every call latency (s) they recorded."""
    latencies: list[list[float]] = [[] for _ in workers]
    errors: list[BaseException] = []
    start = threading.Barrier(len(workers) + 1)

    def body(i: int) -> None:
        start.wait()
        try:
            latencies[i] = workers[i]()
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(len(workers))]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - began
    if errors:
        raise errors[0]
    return seconds, [x for lat in latencies for x in lat]


def timed_calls(calls: Sequence[Callable[[], object]]) -> list[float]:
    """Run calls in order and return each one's latency in seconds."""
    out = []
    clock = time.perf_counter
    for call in calls:
        t0 = clock()
        call()
        out.append(clock() - t0)
    return out


def percentile_ms(latencies: list[float], q: float) -> float:
    if not latencies:
        return 0.0
    ordered = sorted(latencies)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 4)


def result(
    bench: str,
    system: str,
    records: int,
    seconds: float,
    latencies: list[float],
    value_bytes: int,
    messages: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One result line. ``msgs_per_s`` counts the ``messages`` timed (default:
    ``records``) and ``mb_per_s`` their value bytes, in 10^6 bytes."""
    messages = records if messages is None else messages
    return {
        "bench": bench,
        "system": system,
        "records": records,
        "seconds": round(seconds, 4),
        "msgs_per_s": round(messages / seconds) if seconds else 0,
        "mb_per_s": round(messages * value_bytes / seconds / 1e6, 2) if seconds else 0,
        "p50_ms": percentile_ms(latencies, 0.50),
        "p99_ms": percentile_ms(latencies, 0.99),
        **extra,
    }


def emit(line: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(line), flush=True)
    else:
        print("  ".join(f"{k}={v}" for k, v in line.items()), flush=True)


@contextmanager
def data_dir(path: Path | None) -> Iterator[Path]:
    """The given directory, or a temp dir removed afterwards."""
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    tmp = Path(tempfile.mkdtemp(prefix="storage-bench-"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
