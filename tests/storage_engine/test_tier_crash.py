"""Crash tests of tiered storage: a subprocess appends (printing each acknowledgement), then
offloads, or deletes offloaded segments by retention, and is SIGKILLed by a hook at a chosen
point: during an upload, between the upload and the catalog's state swap, inside the swap's
write, during the drop of local copies, during the deletion of objects. After reopening:
every acknowledged record is read back once, in order, by offset, key and tag; ``verify`` is
clean (no object missing, damaged or stray); and the interrupted work finishes on the next call
with nothing duplicated in the object store.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from storage_engine.api import SegmentTier, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.policies.policy import NodePolicy
from storage_engine.tier.layout import parse_key
from tests.storage_engine.lifecycle_util import KILL_HOOKS, run_child
from tests.storage_engine.tier_engine import T0, engine_for
from tests.storage_engine.tier_util import Tier, seaweed_fixture, tier_fixture  # noqa: F401 (fixtures)

N = 90

CHILD = (
    """
import os, signal, sys
from storage_engine import open_engine
from storage_engine.api import NewRecord
from storage_engine.clock import ManualClock
from storage_engine.config import Durability, EngineConfig
from storage_engine.policies.policy import NamespacePolicy, NodePolicy
from storage_engine.segment import index_store, segment, tiered_log
from storage_engine.tier import store

data_dir, tier_uri, op, point, nth = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
T0 = 1_700_000_000_000
clock = ManualClock(T0)
config = EngineConfig(data_dir=data_dir, durability=Durability.FSYNC, lifecycle_worker=False, tier_uri=tier_uri,
                      node_policy=NodePolicy(file_delete_delay_ms=0, offload_concurrency=2))
engine = open_engine(config, clock)
policy = NamespacePolicy(retention_ms=None, segment_bytes=4096, remote_storage_enabled=True, local_retention_ms=0)
engine.create_namespace("c", 1, policy)
for i in range("""
    + str(N)
    + """):
    record = NewRecord(b"%d:" % i + b"v" * 200, key=b"k%d" % (i % 7), tags=("t%d" % (i % 2),), timestamp=T0 + i)
    base = engine.append("c", 0, [record]).base_offset
    print("ack", base, flush=True)
clock.set(T0 + 10_000)
"""
    + KILL_HOOKS
    + """
if op == "retention":
    engine.offload("c")  # complete, unhooked: then retention deletes offloaded segments
if op == "clean":  # offloaded with every local copy kept; then disk pressure drops the copies
    engine.update_namespace("c", NamespacePolicy(retention_ms=None, segment_bytes=4096,
                                                 remote_storage_enabled=True))
    engine.offload("c")
    engine.set_node_policy(NodePolicy(file_delete_delay_ms=0, offload_concurrency=2, disk_max_used_ratio=0.0001,
                                      disk_clean_forcibly_ratio=0.0001, clean_forcibly_enabled=False))
if point == "put":  # data objects go through put_parts, manifests through put: one count for both
    hook(store.ObjectTier, "put")
    hook(store.ObjectTier, "put_parts")
elif point == "finish":
    hook(tiered_log.TieredShardLog, "finish_offload")
elif point == "write":
    hook(index_store.IndexStore, "write", lambda self, wb, sync=False: not wb.is_empty())
elif point == "rename-deleted":
    hook(segment.Segment, "rename")
elif point == "unlink":
    hook(segment.Segment, "remove")
elif point == "delete-object":
    hook(store.ObjectTier, "delete")
print("armed", flush=True)
if op == "offload":
    engine.offload("c")
elif op == "clean":
    engine.clean_files()
else:
    engine.update_namespace("c", NamespacePolicy(retention_ms=5_000, segment_bytes=4096,
                                                 remote_storage_enabled=True, local_retention_ms=0))
    engine.apply_retention("c")
print("done", flush=True)
"""
)


def read_everything(engine: StorageAdapter) -> list[int]:
    offsets: list[int] = []
    offset = engine.shard_stats("c", 0).log_start_offset
    while True:
        page = engine.read("c", 0, offset, max_records=13)
        if not page.records:
            return offsets
        for r in page.records:
            assert r.value == b"%d:" % r.offset + b"v" * 200
        offsets += [r.offset for r in page.records]
        offset = page.next_offset


def check(engine: StorageAdapter, tier: Tier, retention: bool) -> None:
    """Every record from the log start is read back once, in order, by offset, tag and key;
    ``verify`` is clean; no segment has objects under two generations."""
    stats = engine.shard_stats("c", 0)
    assert stats.end_offset == N
    start = stats.log_start_offset
    assert start == 0 or (retention and start <= N)
    offsets = read_everything(engine)
    assert offsets == list(range(start, N))
    tags = engine.read_tag("c", 0, "t1", max_records=1000).records
    assert [r.offset for r in tags] == [o for o in range(start, N) if o % 2 == 1]
    for k in range(7):
        latest = max(o for o in range(N) if o % 7 == k)
        found = engine.read_key("c", 0, b"k%d" % k)
        assert (found.offset if found is not None else None) == (latest if latest >= start else None)
    report = engine.verify("c")
    assert report.ok, report.problems
    generations: dict[int, set[int]] = {}
    for key in tier.object_keys():
        parsed = parse_key(key.rsplit("/", 1)[0] + "/", key)
        assert parsed is not None, key
        generations.setdefault(parsed[0], set()).add(parsed[1])
    assert all(len(g) == 1 for g in generations.values()), generations


CASES = [
    ("offload", "put", 1),  # killed before the first data object is written
    ("offload", "put", 2),  # killed between the data objects and the manifests
    ("offload", "put", 5),
    ("offload", "finish", 1),  # uploaded and verified, killed before the state swap
    ("offload", "finish", 3),
    ("offload", "write", 3),  # inside the catalog writes (intent, swaps)
    ("offload", "write", 9),
    ("offload", "rename-deleted", 1),  # the catalog says remote; the local file is not renamed yet
    ("offload", "unlink", 2),  # during the removal of the local copies
    ("clean", "write", 1),  # the cleaner dropping local copies under disk pressure, inside its writes
    ("clean", "write", 3),
    ("clean", "rename-deleted", 2),  # the catalog says remote; the local file is not renamed yet
    ("clean", "unlink", 2),  # during the removal of the local copies
    ("retention", "write", 2),  # retention deleting offloaded segments, killed in its writes
    ("retention", "write", 4),
    ("retention", "delete-object", 1),  # killed between a segment's manifest and its data object
    ("retention", "delete-object", 4),
]


@pytest.mark.slow
@pytest.mark.parametrize(("op", "point", "nth"), CASES)
def test_tiered_storage_survives_sigkill(tmp_path: Path, tier: Tier, op: str, point: str, nth: int) -> None:
    data_dir = tmp_path / "data"
    lines, killed = run_child(CHILD, data_dir, tier.uri, op, point, nth, env=tier.env)
    assert [int(p[1]) for line in lines if (p := line.split()) and p[0] == "ack"] == list(range(N))
    assert killed, "the hook never fired: the crash point was not reached"
    clock = ManualClock(T0 + 10_000)
    engine = engine_for(data_dir, tier, clock)
    try:
        check(engine, tier, op == "retention")
        # The interrupted work finishes, and then nothing is left to do or duplicated.
        if op == "offload":
            engine.offload("c")
            segments = engine.list_segments("c", 0)
            assert all(s.tier is SegmentTier.REMOTE for s in segments[:-1])
            assert len(tier.object_keys()) == 2 * (len(segments) - 1)
            assert engine.offload("c").segments_offloaded == 0
        elif op == "clean":
            assert all(s.tier is not SegmentTier.LOCAL for s in engine.list_segments("c", 0)[:-1])
            engine.set_node_policy(
                NodePolicy(file_delete_delay_ms=0, disk_max_used_ratio=0.0001, disk_clean_forcibly_ratio=0.0001)
            )
            while engine.clean_files().more:
                pass
            segments = engine.list_segments("c", 0)
            assert all(s.tier is SegmentTier.REMOTE for s in segments[:-1])
            assert len(tier.object_keys()) == 2 * (len(segments) - 1)
        else:
            engine.apply_retention("c")
            assert tier.object_keys() == []
        check(engine, tier, op == "retention")
        leftovers = [p.name for p in data_dir.rglob("*") if p.suffix in (".cleaned", ".swap", ".deleted", ".tmp")]
        assert leftovers == []
    finally:
        engine.close()
