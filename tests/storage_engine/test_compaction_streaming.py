"""Key compaction's bounded memory and streaming rewrite: the key map is sized from its
budget, a compaction of a large segment with a small budget stays within budget + the
stated overhead (tracemalloc), and batches rebuilt from encoded records are byte for byte
what encoding the kept records afresh gives."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

import pytest

from storage_engine import open_engine
from storage_engine.api import NewRecord, Record
from storage_engine.clock import ManualClock
from storage_engine.compaction.cleaner import MAP_OVERHEAD_BYTES
from storage_engine.compaction.keymap import KeyMap
from storage_engine.config import Durability, EngineConfig
from storage_engine.formats.batch_columns import batch_columns, batch_keys, rebuild_batch
from storage_engine.formats.codec import decode_batch, decode_header, encode_batch
from storage_engine.policies.keymap_size import BITMAP_SHARE, LOAD_FACTOR, SLOT_BYTES
from storage_engine.policies.policy import MiB, NamespacePolicy
from tests.storage_engine.lifecycle_util import assert_verified, read_all

T0 = 1_700_000_000_000


@pytest.mark.parametrize("budget", [4096, 64 * 1024, 16 * MiB])
def test_map_sized_from_budget(budget: int) -> None:
    m = KeyMap(budget)
    assert m.memory_bytes <= budget
    assert m.memory_bytes >= budget * 0.97 - 2 * SLOT_BYTES  # the budget is used, not wasted
    assert m.capacity == int(m.slots * LOAD_FACTOR)
    assert m.span == 8 * (budget // BITMAP_SHARE)
    if budget == 16 * MiB:
        assert m.capacity > 900_000  # ~16 B per key, not a dict's ~160


def _load(engine: object, records: int, keys: int, seed: int) -> dict[bytes, int]:
    rng = random.Random(seed)
    last: dict[bytes, int] = {}
    offset = 0
    for _ in range(records // 500):
        batch = []
        for _ in range(500):
            key = b"key-%08d" % rng.randrange(keys)
            tags = (f"t{offset % 3}",) if offset % 7 == 0 else ()
            batch.append(NewRecord(b"v" * 100, key=key, tags=tags))
            last[key] = offset
            offset += 1
        engine.append("c", 0, batch)  # type: ignore[attr-defined]
    return last


def test_compaction_memory_within_budget_plus_overhead(tmp_path: Path) -> None:
    """60k records (~10 MB) in one segment, 20k keys, a 64 KiB map: several rounds. The
    old code held every removed record of a segment (~15 MB here); now the traced peak
    is the map plus a bounded overhead whatever the segment size."""
    clock = ManualClock(T0)
    config = EngineConfig(
        data_dir=tmp_path / "data",
        adapter="segment",
        durability=Durability.NONE,
        lifecycle_worker=False,
        disk_capacity_bytes=1 << 40,
    )
    engine = open_engine(config, clock=clock)
    try:
        policy = NamespacePolicy(cleanup_policy="compact", retention_ms=None, segment_bytes=64 * MiB)
        engine.create_namespace("c", 1, policy)
        last = _load(engine, 60_000, 20_000, 7)
        _, shards = engine.lifecycle_namespace("c")  # type: ignore[attr-defined]
        shards[0].roll_empty(clock.now_ms())
        budget = 64 * 1024
        tracemalloc.start()
        try:
            result = engine.compact("c", 0, map_budget_bytes=budget, manual=True)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert result.rounds >= 4
        assert peak <= budget + MAP_OVERHEAD_BYTES, f"traced peak {peak} B"
        assert [r.offset for r in read_all(engine, "c")] == sorted(last.values())
        assert_verified(engine, "c")
    finally:
        engine.close()


def _random_records(rng: random.Random, n: int) -> list[Record]:
    out = []
    offset = 1000
    for _ in range(n):
        offset += rng.choice((1, 1, 2, 5))
        out.append(
            Record(
                offset,
                T0 + rng.randrange(-5000, 5000),
                None if rng.random() < 0.2 else bytes(rng.randrange(256) for _ in range(rng.randrange(30))),
                None if rng.random() < 0.2 else b"k%d" % rng.randrange(10),
                tuple(sorted({f"tag{rng.randrange(4)}" for _ in range(rng.randrange(3))})),
                tuple((f"h{i}", b"x" * i) for i in range(rng.randrange(3))),
                None if rng.random() < 0.5 else T0 + rng.randrange(100_000),
            )
        )
    return out


@pytest.mark.parametrize("seed", range(20))
def test_rebuilt_batch_equals_fresh_encoding(seed: int) -> None:
    rng = random.Random(seed)
    records = _random_records(rng, rng.randrange(1, 40))
    buf = b"\0" * 7 + encode_batch(records[0].offset, records)
    h = decode_header(buf, 7)
    cols = batch_columns(buf, 7, h)
    assert cols.offsets == [r.offset for r in records]
    assert cols.keys == [r.key for r in records]
    assert batch_keys(buf, 7, h) == ([r.offset for r in records if r.key], [r.key for r in records if r.key])
    keep = sorted(rng.sample(range(len(records)), rng.randrange(1, len(records) + 1)))
    rebuilt = rebuild_batch(buf, cols, keep)
    kept = [records[i] for i in keep]
    assert rebuilt == encode_batch(kept[0].offset, kept)
    assert decode_batch(rebuilt)[1] == kept
