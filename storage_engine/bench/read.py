"""Random reads by offset (``read(..., max_records=1)``) in one shard of N records."""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from storage_engine import open_engine
from storage_engine.bench.common import batched, make_records, result, timed_calls
from storage_engine.clock import SystemClock
from storage_engine.config import Durability, EngineConfig

FILL_CHUNK = 100_000  # records generated at a time while filling, to bound memory


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reads", type=int, default=100_000, help="random reads to time (default 100000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random offsets")


def run(args: argparse.Namespace, root: Path) -> Iterator[dict[str, Any]]:
    # Durability does not change the read path; none keeps filling a large shard quick.
    engine = open_engine(EngineConfig(data_dir=root, adapter=args.adapter, durability=Durability.NONE), SystemClock())
    try:
        engine.create_namespace("bench", 1)
        began = time.perf_counter()
        for start in range(0, args.records, FILL_CHUNK):
            for batch in batched(make_records(args, start, min(FILL_CHUNK, args.records - start)), args.batch_size):
                engine.append("bench", 0, batch)
        fill_seconds = time.perf_counter() - began
        rng = random.Random(args.seed)
        offsets = [rng.randrange(args.records) for _ in range(args.reads)]
        read = partial(engine.read, "bench", 0, max_records=1)
        began = time.perf_counter()
        latencies = timed_calls([partial(read, o) for o in offsets])
        seconds = time.perf_counter() - began
    finally:
        engine.close()
    yield result(
        "read",
        f"engine-{args.adapter}",
        args.records,
        seconds,
        latencies,
        args.value_bytes,
        messages=args.reads,
        reads=args.reads,
        fill_seconds=round(fill_seconds, 2),
    )
