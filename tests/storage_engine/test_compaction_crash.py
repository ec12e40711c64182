"""Crash tests of key compaction: a subprocess appends keyed records (half with unique
keys, half over five repeated keys), then compacts, and is SIGKILLed by a hook while a
segment is rewritten (writing ``.cleaned``, renaming to ``.swap``, the swap's WriteBatch,
the rename over ``.log``). After reopening every sealed segment holds either all its
original records or exactly the compacted ones, never a mix; no temporary file is left;
``verify()`` is clean; a new compaction finishes the job.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from storage_engine import open_engine
from storage_engine.api import NewRecord
from storage_engine.clock import ManualClock
from storage_engine.config import EngineConfig
from tests.storage_engine.lifecycle_util import KILL_HOOKS, run_child

T0 = 1_700_000_000_000
N = 160

CHILD = (
    (
        """
import os, signal, sys
from storage_engine import open_engine
from storage_engine.api import NewRecord
from storage_engine.clock import ManualClock
from storage_engine.config import Durability, EngineConfig
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.segment import index_store

data_dir, adapter, point, nth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
clock = ManualClock(T0VAL)
config = EngineConfig(data_dir=data_dir, adapter=adapter, durability=Durability.FSYNC, lifecycle_worker=False,
                      disk_capacity_bytes=1 << 40)
engine = open_engine(config, clock)
engine.create_namespace("c", 1, NamespacePolicy(retention_ms=None, segment_bytes=4096, cleanup_policy="compact"))
for i in range(NVAL):
    key = b"u%d" % i if i % 2 == 0 else b"r%d" % (i % 5)
    engine.append("c", 0, [NewRecord(b"%d:" % i + b"v" * 200, key=key)])
print("appended", flush=True)

"""
        + KILL_HOOKS
        + """
if point == "cleaned":
    hook(os, "fsync")
elif point == "write":
    hook(index_store.IndexStore, "write", lambda self, wb, sync=False: not wb.is_empty())
elif point == "to-swap":
    hook(os, "rename", lambda src, dst: str(dst).endswith(".swap"))
elif point == "swap-over-log":
    hook(os, "replace", lambda src, dst: str(src).endswith(".swap"))
engine.compact("c", manual=True)
print("done", flush=True)
"""
    )
    .replace("T0VAL", str(T0))
    .replace("NVAL", str(N))
)


def key_of(i: int) -> bytes:
    return b"u%d" % i if i % 2 == 0 else b"r%d" % (i % 5)


def child_killed(data_dir: Path, adapter: str, point: str, nth: int) -> bool:
    """Run the child, which must get through its appends: whether the hook killed it while compacting."""
    lines, killed = run_child(CHILD, data_dir, adapter, point, nth, timeout=60)
    assert "appended" in lines, lines
    return killed


CASES = [
    ("segment", "cleaned", 1),
    ("segment", "to-swap", 1),
    ("segment", "write", 1),
    ("segment", "swap-over-log", 1),
    ("segment", "swap-over-log", 3),
    ("rocksdb", "write", 2),
]


@pytest.mark.slow
@pytest.mark.parametrize(("adapter", "point", "nth"), CASES)
def test_compaction_survives_sigkill(tmp_path: Path, adapter: str, point: str, nth: int) -> None:
    data_dir = tmp_path / "data"
    assert child_killed(data_dir, adapter, point, nth), "the hook never fired"
    engine = open_engine(EngineConfig(data_dir=data_dir, adapter=adapter, lifecycle_worker=False), ManualClock(T0))
    try:
        stats = engine.shard_stats("c", 0)
        assert stats.end_offset == N
        segments = engine.list_segments("c", 0)
        active = segments[-1].base_offset
        last = {key_of(i): i for i in range(active)}
        compacted = {i for i in range(active) if last[key_of(i)] == i}
        present = {r.offset: r for r in engine.read("c", 0, stats.log_start_offset, max_records=10_000).records}
        for r in present.values():
            assert r.key == key_of(r.offset) and r.value is not None and r.value.startswith(b"%d:" % r.offset)
        assert set(range(active, N)) <= set(present)
        for seg in segments[:-1]:
            span = range(seg.base_offset, seg.last_offset + 1)
            have = {o for o in present if o in span}
            old, new = set(span), {o for o in span if o in compacted}
            assert have in (old, new), f"segment {seg.base_offset}: a mix of old and new records"
        assert engine.verify("c").ok, engine.verify("c").problems
        leftovers = [p.name for p in data_dir.rglob("*") if p.suffix in (".cleaned", ".swap")]
        assert leftovers == []
        engine.compact("c", manual=True)
        assert engine.verify("c").ok, engine.verify("c").problems
        start = engine.shard_stats("c", 0).log_start_offset
        after = [r.offset for r in engine.read("c", 0, start, max_records=10_000).records]
        assert after == sorted(compacted | set(range(active, N)))
        assert engine.append("c", 0, [NewRecord(b"after", key=b"x")]).base_offset == N
    finally:
        engine.close()
