"""Segment files written by the real storage engine (in-process, manual clock), and what was appended.

Small segments (``segment_bytes`` = 1 KiB, the minimum) make every shard roll several times, so each
shard has several sealed segments and one active one. Records carry producer timestamps over two UTC days,
keys that repeat (some superseded), tombstones, tags, headers and explicit ``expire_at`` values.

:func:`node_on` then serves such a directory with a real node process (system clock: every explicit
``expire_at`` of the data has passed, so a TTL scan on the node marks those records dead), which is where
the jobs learn which segments are sealed and which records are dead.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from storage_engine import open_engine
from storage_engine.api import NewRecord
from storage_engine.clock import ManualClock
from storage_engine.config import EngineConfig
from storage_engine.formats.codec import encode_batch, iter_records, scan_batches
from storage_engine.policies.policy import NamespacePolicy
from tests.spark.helpers import DAY_MS, JAN1_MS
from tests.support.processes import NodeProc, start_node

HOUR_MS = 3_600_000
START_MS = JAN1_MS - 6 * HOUR_MS  # 2023-12-31T18:00Z: the data spans two UTC days
NAMESPACES: dict[str, int] = {"orders": 2, "audit": 1}  # name → shards


@dataclass(frozen=True)
class Appended:
    namespace: str
    shard: int
    offset: int
    timestamp: int
    key: bytes | None
    tags: tuple[str, ...]
    headers: dict[str, bytes]
    value: bytes | None
    expire_at: int | None


def write_segments(data_dir: Path, *, batches: int = 16, seed: int = 3) -> list[Appended]:
    """Append ``batches`` batches of 1–4 records per shard with the segment adapter; close the engine."""
    rng = random.Random(seed)
    clock = ManualClock(START_MS)
    engine = open_engine(EngineConfig(data_dir=data_dir, adapter="segment"), clock=clock)
    appended: list[Appended] = []
    try:
        for name, shards in NAMESPACES.items():
            engine.create_namespace(name, shards, NamespacePolicy(segment_bytes=1024, retention_ms=None))
        for i in range(batches):
            for name, shards in NAMESPACES.items():
                for shard in range(shards):
                    ts = START_MS + i * HOUR_MS // 2 + rng.randrange(1000)
                    batch = []
                    for _ in range(rng.randint(1, 4)):
                        key = None if rng.random() < 0.3 else f"k{rng.randrange(5)}".encode()
                        value = None if key is not None and rng.random() < 0.1 else rng.randbytes(rng.randint(20, 120))
                        expire_at = (
                            ts + rng.choice((30_000, HOUR_MS, 5 * HOUR_MS, DAY_MS)) if rng.random() < 0.5 else None
                        )
                        headers = (("trace", rng.randbytes(4)),) if rng.random() < 0.4 else ()
                        if rng.random() < 0.1:
                            headers = (("dup", b"first"), ("dup", b"last"))  # a map keeps the last value
                        tags = tuple(rng.sample(("eu", "us", "vip", "é"), k=rng.randint(0, 2)))
                        batch.append(
                            NewRecord(
                                value=value, key=key, timestamp=ts, tags=tags, headers=headers, expire_at=expire_at
                            )
                        )
                    result = engine.append(name, shard, batch)
                    for offset, record in zip(result.offsets, batch, strict=True):
                        appended.append(
                            Appended(
                                name,
                                shard,
                                offset,
                                ts,
                                record.key,
                                record.tags,
                                dict(record.headers),
                                record.value,
                                record.expire_at,
                            )
                        )
            clock.set(START_MS + (i + 1) * HOUR_MS // 2)
    finally:
        engine.close()
    return appended


def rewrite_segment(path: str | Path, keep: set[int]) -> None:
    """What compaction does to a sealed segment: rewrite it with only the offsets in ``keep`` (offsets are
    unchanged) to ``<name>.cleaned``, then swap it in with a rename. The file gets a new size and mtime."""
    path = Path(path)
    data = path.read_bytes()
    base = int(path.name.split(".")[0])
    records = [r for pos, h in scan_batches(data) for r in iter_records(data, pos, h) if r.offset in keep]
    cleaned = path.with_name(path.name + ".cleaned")
    cleaned.write_bytes(encode_batch(base, records) if records else b"")
    os.replace(cleaned, path)


@contextmanager
def node_on(data_dir: Path) -> Iterator[NodeProc]:
    """A real storage node serving ``data_dir`` (written and closed by an in-process engine), stopped after."""
    node = start_node(data_dir)
    try:
        yield node
    finally:
        node.stop()
