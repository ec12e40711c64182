"""Crash tests of the lifecycle: a subprocess appends (printing each acknowledgement),
then runs a TTL scan, a reclamation with a rewrite swap, or segment deletions, and is
SIGKILLed by a hook at a chosen point inside it. After reopening: nothing acknowledged
and unexpired is lost, expired records stay hidden, offsets go on, no temporary file
is left and ``verify()`` is clean.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from storage_engine import open_engine
from storage_engine.api import NewRecord
from storage_engine.clock import ManualClock
from storage_engine.config import EngineConfig
from storage_engine.rules.expiry import is_expired
from tests.storage_engine.lifecycle_util import KILL_HOOKS, run_child

T0 = 1_700_000_000_000

CHILD = (
    """
import os, signal, sys
from storage_engine import open_engine
from storage_engine.api import NewRecord
from storage_engine.clock import ManualClock
from storage_engine.config import Durability, EngineConfig
from storage_engine.policies.policy import NamespacePolicy, NodePolicy
from storage_engine.segment import index_store, segment

data_dir, adapter, op, point, nth = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
T0 = 1_700_000_000_000
clock = ManualClock(T0)
config = EngineConfig(data_dir=data_dir, adapter=adapter, durability=Durability.FSYNC, lifecycle_worker=False,
                      disk_capacity_bytes=1 << 40, node_policy=NodePolicy(file_delete_delay_ms=0))
engine = open_engine(config, clock)
engine.create_namespace("c", 1, NamespacePolicy(retention_ms=None, segment_bytes=4096, scan_batch_size=4,
                                                reclaim_dead_ratio=0.3))
for i in range(72):
    # 0-23 all expire (whole segments); after that two of three expire (rewrites)
    expires = i < 24 or i % 3 != 0
    record = NewRecord(b"%d:" % i + b"v" * 300, key=b"k%d" % (i % 7), tags=("t%d" % (i % 2),),
                       expire_at=T0 + 100 if expires else None)
    base = engine.append("c", 0, [record]).base_offset
    print("ack", base, T0, T0 + 100 if expires else -1, flush=True)
clock.set(T0 + 1000)

"""
    + KILL_HOOKS
    + """
if op == "rewrite":
    engine.expire_scan("c", manual=True)  # marks records dead: segments become rewrite candidates
    engine.reclaim("c", limit=2, manual=True)  # drops the fully expired ones first, unhooked
if point == "write":
    hook(index_store.IndexStore, "write", lambda self, wb, sync=False: not wb.is_empty())
elif point == "to-swap":
    hook(os, "rename", lambda src, dst: str(dst).endswith(".swap"))
elif point == "swap-over-log":
    hook(os, "replace", lambda src, dst: str(src).endswith(".swap"))
elif point == "rename-deleted":
    hook(segment.Segment, "rename")
elif point == "unlink":
    hook(segment.Segment, "remove")
print("armed", flush=True)
if op == "scan":
    engine.expire_scan("c", manual=True)
else:
    engine.reclaim("c", manual=True)
print("done", flush=True)
"""
)


def child_acks(data_dir: Path, adapter: str, op: str, point: str, nth: int) -> tuple[list[tuple[int, int, int]], bool]:
    """Run the child: (offset, timestamp, expire_at or -1) of each acknowledged append, and whether it was killed."""
    lines, killed = run_child(CHILD, data_dir, adapter, op, point, nth, timeout=60)
    acks = []
    for line in lines:
        parts = line.split()
        if parts[0] == "ack":
            acks.append((int(parts[1]), int(parts[2]), int(parts[3])))
    return acks, killed


CASES = [
    ("segment", "scan", "write", 2),
    ("segment", "scan", "write", 5),
    ("rocksdb", "scan", "write", 3),
    ("segment", "rewrite", "write", 1),
    ("segment", "rewrite", "write", 3),
    ("segment", "rewrite", "to-swap", 1),
    ("segment", "rewrite", "swap-over-log", 1),
    ("rocksdb", "rewrite", "write", 2),
    ("segment", "drop", "write", 1),
    ("segment", "drop", "write", 2),
    ("segment", "drop", "rename-deleted", 1),
    ("segment", "drop", "unlink", 1),
    ("rocksdb", "drop", "write", 2),
]


@pytest.mark.slow
@pytest.mark.parametrize(("adapter", "op", "point", "nth"), CASES)
def test_lifecycle_survives_sigkill(tmp_path: Path, adapter: str, op: str, point: str, nth: int) -> None:
    data_dir = tmp_path / "data"
    acks, killed = child_acks(data_dir, adapter, op, point, nth)
    assert len(acks) == 72
    assert killed, "the hook never fired: the crash point was not reached"
    clock = ManualClock(T0 + 1000)
    engine = open_engine(EngineConfig(data_dir=data_dir, adapter=adapter, lifecycle_worker=False), clock)
    try:
        stats = engine.shard_stats("c", 0)
        assert stats.end_offset == 72
        visible = {}
        offset = stats.log_start_offset
        while True:
            page = engine.read("c", 0, offset, max_records=100)
            if not page.records:
                break
            visible.update({r.offset: r for r in page.records})
            offset = page.next_offset
        for base, ts, exp in acks:
            alive = not is_expired(ts, None if exp < 0 else exp, None, clock.now_ms())
            assert (base in visible) == alive, f"offset {base}: alive={alive}"
            if alive:
                assert visible[base].value.startswith(b"%d:" % base)  # type: ignore[union-attr]
        report = engine.verify("c")
        assert report.ok, report.problems
        leftovers = [p.name for p in data_dir.rglob("*") if p.suffix in (".cleaned", ".swap", ".deleted")]
        assert leftovers == []
        # The interrupted work can be finished, and offsets go on.
        engine.expire_scan("c", manual=True)
        engine.reclaim("c", manual=True)
        report = engine.verify("c")
        assert report.ok, report.problems
        assert engine.append("c", 0, [NewRecord(b"after")]).base_offset == 72
        assert (
            sorted(r.offset for r in engine.read("c", 0, engine.shard_stats("c", 0).log_start_offset).records)[-1] == 72
        )
    finally:
        engine.close()
