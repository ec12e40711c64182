"""Rewrites of offloaded segments (issue 19, DESIGN §3 "Tiers": compaction and reclamation apply
to the whole log): key compaction and the reclaimer rewrite segments whose bytes are in the object
store (*both*, *remote*) by rewriting them locally, uploading and verifying the new file under a new
generation, swapping the catalog, then deleting the old generation's objects
(:mod:`storage_engine.tier.rewrite`) — against a ``file://`` tier and a real S3 server (SeaweedFS).
Crash safety: SIGKILL of a child process at each point of the protocol; an unreachable store.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from storage_engine.api import NewRecord, Record, SegmentTier, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.errors import TierError
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.segment.meta import SegmentMeta, TierState
from storage_engine.segment.segment import iter_file_batches, iter_file_records
from storage_engine.tier.layout import parse_key
from storage_engine.tier.manifest import Manifest
from tests.storage_engine.lifecycle_util import KILL_HOOKS, run_child
from tests.storage_engine.tier_engine import T0, clock_fixture, engine_fixture, engine_for  # noqa: F401 (fixtures)
from tests.storage_engine.tier_util import Tier, seaweed_fixture, tier_fixture  # noqa: F401 (fixtures)

N = 90
KEYS = 7


def record(i: int, *, expiring: bool = False) -> NewRecord:
    """Even offsets share ``KEYS`` keys (superseded but for the latest of each), odd ones have
    their own; with ``expiring`` the even ones expire at ``T0 + 5000`` instead."""
    key = b"k%d" % (i % KEYS) if i % 2 == 0 else b"u%d" % i
    expire_at = T0 + 5_000 if expiring and i % 2 == 0 else None
    return NewRecord(b"%d:" % i + b"v" * 200, key=key, expire_at=expire_at, timestamp=T0 + i)


def survivors(n: int = N) -> list[int]:
    """What compaction keeps: every odd offset and the latest even one of each shared key."""
    latest = {max(o for o in range(0, n, 2) if o % KEYS == k) for k in range(KEYS)}
    return sorted(set(range(1, n, 2)) | latest)


def policy(compact: bool = True, **over: object) -> NamespacePolicy:
    base: dict[str, object] = {
        "segment_bytes": 4096,
        "segment_ms": 1000,  # an idle active segment is sealed by the next step: every record cleanable
        "retention_ms": None,
        "remote_storage_enabled": True,
        "local_retention_ms": 0,
        "cleanup_policy": "compact" if compact else "delete",
        "min_cleanable_dirty_ratio": 0.01,
        "reclaim_dead_ratio": 0.3,
    }
    return NamespacePolicy(**{**base, **over})  # type: ignore[arg-type]


def fill(engine: StorageAdapter, clock: ManualClock, *, expiring: bool = False, **over: object) -> None:
    engine.create_namespace("n", 1, policy(**over))
    for i in range(N):
        engine.append("n", 0, [record(i, expiring=expiring)])
    clock.set(T0 + 10_000)


def read_all(engine: StorageAdapter, ns: str = "n") -> list[Record]:
    out: list[Record] = []
    offset = engine.shard_stats(ns, 0).log_start_offset
    while True:
        page = engine.read(ns, 0, offset, max_records=13)
        if not page.records:
            return out
        out += page.records
        offset = page.next_offset


def generations(tier: Tier) -> dict[int, set[int]]:
    """Base offset → generations of its objects, each with both its data object and manifest."""
    kinds: dict[tuple[int, int], set[str]] = {}
    for key in tier.object_keys():
        parsed = parse_key(key.rsplit("/", 1)[0] + "/", key)
        assert parsed is not None, key
        kinds.setdefault(parsed, set()).add(key.rsplit(".", 1)[-1])
    assert all(k == {"log", "json"} for k in kinds.values()), kinds
    out: dict[int, set[int]] = {}
    for base, gen in kinds:
        out.setdefault(base, set()).add(gen)
    return out


def check_compacted(engine: StorageAdapter, tier: Tier, ns: str = "n") -> None:
    """The latest record of every key survives, read by offset and by key; nothing else is
    stored; every sealed segment has objects under one generation only; verify is clean."""
    records = read_all(engine, ns)
    assert [r.offset for r in records] == survivors()
    assert all(r.value == b"%d:" % r.offset + b"v" * 200 for r in records)
    for k in range(KEYS):
        found = engine.read_key(ns, 0, b"k%d" % k)
        assert found is not None and found.offset == max(o for o in range(0, N, 2) if o % KEYS == k)
    for i in range(1, N, 2):
        found = engine.read_key(ns, 0, b"u%d" % i)
        assert found is not None and found.offset == i
    segments = engine.list_segments(ns, 0)
    assert sum(s.record_count for s in segments) == len(survivors())
    gens = generations(tier)
    assert sorted(gens) == [s.base_offset for s in segments[:-1] if s.record_count]
    assert all(len(g) == 1 for g in gens.values()), gens
    report = engine.verify(ns)
    assert report.ok, report.problems


def check_objects(tier: Tier, tmp_path: Path) -> None:
    """Every data object holds what the compaction kept, read with nothing but the object and its
    manifest (a reader without the node): its records, and a sparse offset index pointing at batches
    of the rewritten file; no dead ranges are left."""
    store = tier.store()
    kept: list[int] = []
    for key in sorted(k for k in tier.object_keys() if k.endswith(".log")):
        manifest = Manifest.from_bytes(key, store.get(key.removesuffix(".log") + ".manifest.json"))
        local = tmp_path / "object.log"
        local.write_bytes(store.get(key))
        batches = {(h.base_offset, pos) for pos, h, _buf in iter_file_batches(local)}
        assert manifest.offset_index and set(manifest.offset_index) <= batches
        assert manifest.dead_ranges == ()
        offsets = [r.offset for r in iter_file_records(local)]
        assert len(offsets) == manifest.record_count and offsets[-1] <= manifest.last_offset
        kept += offsets
    assert kept == survivors()


def test_metadata_of_format_4_reads_without_a_stale_generation() -> None:
    meta = SegmentMeta(5, created_at=T0, last_offset=9, record_count=5, live_count=5, size_bytes=100)
    meta.tier, meta.tier_generation, meta.stale_generation = TierState.REMOTE, 42, 43
    packed = meta.pack()
    assert SegmentMeta.unpack(packed) == meta
    v4 = bytes([4]) + packed[1:117]
    old = SegmentMeta.unpack(v4)
    assert (old.tier, old.tier_generation, old.stale_generation) == (TierState.REMOTE, 42, 0)


def test_compaction_of_offloaded_segments_keeps_the_latest_record_per_key(
    tmp_path: Path, tier: Tier, clock: ManualClock
) -> None:
    data_dir = tmp_path / "data"
    engine = engine_for(data_dir, tier, clock)
    try:
        fill(engine, clock)
        engine.offload("n")
        before = engine.list_segments("n", 0)
        assert len(before) > 4 and all(s.tier is SegmentTier.REMOTE for s in before[:-1])
        assert before[-1].record_count == 0  # the idle active segment was sealed and offloaded too
        assert [p.name for p in (data_dir / "segments" / "n" / "0").iterdir()] == [f"{before[-1].base_offset:020d}.log"]
        old = generations(tier)
        result = engine.compact("n", manual=True)
        assert result.segments_rewritten >= len(before) - 2  # the last sealed one may hold only survivors
        assert result.records_removed == N - len(survivors())
        after = engine.list_segments("n", 0)
        new = generations(tier)
        rewritten = {base for base in new if new[base] != old[base]}
        assert len(rewritten) == result.segments_rewritten
        assert all(new[base].isdisjoint(old[base]) for base in rewritten)  # old generations are gone
        for s in after[:-1]:  # a rewritten segment is swapped in with a local copy
            assert s.tier is (SegmentTier.BOTH if s.base_offset in rewritten else SegmentTier.REMOTE)
        check_compacted(engine, tier)
        check_objects(tier, tmp_path)
        # The next offload step drops the new local copies (local retention 0); reads go remote.
        assert engine.offload("n").local_copies_dropped == len(rewritten)
        assert all(s.tier is SegmentTier.REMOTE for s in engine.list_segments("n", 0)[:-1])
        check_compacted(engine, tier)
        assert engine.compact("n", manual=True).segments_rewritten == 0  # nothing left to remove
    finally:
        engine.close()
    engine = engine_for(data_dir, tier, clock)
    try:
        check_compacted(engine, tier)
    finally:
        engine.close()


def test_compaction_of_segments_with_local_copies(engine: StorageAdapter, tier: Tier, clock: ManualClock) -> None:
    fill(engine, clock, local_retention_ms=None)  # unset: the total retention (none), copies stay
    engine.offload("n")
    assert all(s.tier is SegmentTier.BOTH for s in engine.list_segments("n", 0)[:-1])
    assert engine.compact("n", manual=True).segments_rewritten > 0
    assert all(s.tier is SegmentTier.BOTH for s in engine.list_segments("n", 0)[:-1])
    check_compacted(engine, tier)


def test_compaction_mixes_offloaded_and_local_segments(engine: StorageAdapter, tier: Tier, clock: ManualClock) -> None:
    fill(engine, clock)
    engine.offload("n", limit=2)  # two segments offloaded (and dropped locally), the rest local
    tiers = [s.tier for s in engine.list_segments("n", 0)[:-1]]
    assert tiers[:2] == [SegmentTier.REMOTE] * 2 and set(tiers[2:]) == {SegmentTier.LOCAL}
    engine.compact("n", manual=True)
    tiers = [s.tier for s in engine.list_segments("n", 0)[:-1]]
    assert tiers[:2] == [SegmentTier.BOTH] * 2 and set(tiers[2:]) == {SegmentTier.LOCAL}
    records = read_all(engine)
    assert [r.offset for r in records] == survivors()
    assert sorted(generations(tier)) == [s.base_offset for s in engine.list_segments("n", 0)[:2]]
    assert engine.verify("n").ok


def test_reclaim_rewrites_a_mostly_dead_offloaded_segment(
    engine: StorageAdapter, tier: Tier, clock: ManualClock
) -> None:
    fill(engine, clock, compact=False, expiring=True)
    engine.offload("n")
    before = engine.list_segments("n", 0)
    old = generations(tier)
    result = engine.reclaim("n", manual=True)
    assert result.segments_rewritten == len(before) - 1
    after = engine.list_segments("n", 0)
    assert all(s.tier is SegmentTier.BOTH for s in after[:-1])
    assert sum(s.record_count for s in after) == N // 2
    new = generations(tier)
    assert sorted(new) == [s.base_offset for s in after[:-1]]
    assert all(len(g) == 1 and g.isdisjoint(old[base]) for base, g in new.items())
    records = read_all(engine)
    assert [r.offset for r in records] == list(range(1, N, 2))
    for i in (1, 45, N - 1):
        found = engine.read_key("n", 0, b"u%d" % i)
        assert found is not None and found.offset == i
    assert engine.verify("n").ok


def test_old_objects_a_reader_still_holds_stay_until_the_next_step(
    engine: StorageAdapter, tier: Tier, clock: ManualClock
) -> None:
    fill(engine, clock)
    engine.offload("n")
    log = engine._shard("n", 0)  # type: ignore[attr-defined]
    held = log.view.segments[0]  # served from the object store: a reader is in the middle of it
    assert not held.local
    held.retain()
    try:
        engine.compact("n", manual=True)
        gens = generations(tier)
        assert len(gens[held.base_offset]) == 2  # the old generation is still there, named as stale
        assert all(len(g) == 1 for base, g in gens.items() if base != held.base_offset)
        assert held.read(0, 16)  # and still readable
        report = engine.verify("n")
        assert report.ok, report.problems
    finally:
        held.release()
    engine.offload("n")  # the next step deletes it
    check_compacted(engine, tier)


def test_a_segment_whose_offload_was_interrupted_is_compacted_locally_and_uploaded_later(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A segment left *uploading* by a failed offload is rewritten as a local one and stays
    *uploading* under its generation: the next offload uploads the new file under the same names."""
    root = tmp_path / "tier"
    engine = engine_for(tmp_path / "data", root.as_uri(), clock)
    try:
        fill(engine, clock)
        root.write_bytes(b"not a directory")  # the store fails every call: uploads stay UPLOADING
        with pytest.raises(TierError):
            engine.offload("n", limit=2)
        assert all(s.tier is SegmentTier.LOCAL for s in engine.list_segments("n", 0))
        log = engine._shard("n", 0)  # type: ignore[attr-defined]
        uploading = {m.base_offset: m.tier_generation for m in log.view.metas() if m.tier is TierState.UPLOADING}
        assert len(uploading) == 2
        assert engine.compact("n", manual=True).segments_rewritten > 0
        assert [r.offset for r in read_all(engine)] == survivors()
        after = {m.base_offset: (m.tier, m.tier_generation) for m in log.view.metas()}
        assert all(after[base] == (TierState.UPLOADING, gen) for base, gen in uploading.items())
        root.unlink()
        tier = Tier("file", root.as_uri())
        base, gen = next(iter(uploading.items()))  # what the interrupted upload might have left
        tier.store().put(f"n/1/0/{base:020d}-{gen:016x}.log", b"partial")
        assert engine.verify("n").ok  # objects of an uploading segment may be partial
        clock.advance(60_000)  # past the offloader's backoff
        engine.offload("n")
        check_compacted(engine, tier)
        assert {b: g for b, gens in generations(tier).items() for g in gens if b in uploading} == uploading
    finally:
        engine.close()


def test_an_unreachable_store_fails_the_rewrite_of_offloaded_segments_only(tmp_path: Path, clock: ManualClock) -> None:
    """Two namespaces on a ``file://`` tier: one offloaded and then the store disappears (its root is
    replaced by a file); compaction of the offloaded segments raises ``TierError`` with nothing
    deleted, while the local segments of the same shard are still compacted."""
    root = tmp_path / "tier"
    engine = engine_for(tmp_path / "data", root.as_uri(), clock)
    try:
        fill(engine, clock)
        engine.offload("n", limit=2)
        keys = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
        moved = tmp_path / "tier-away"
        root.rename(moved)
        root.write_bytes(b"not a directory")  # every call to the store now fails
        segments = engine.list_segments("n", 0)
        with pytest.raises(TierError):
            engine.compact("n", manual=True)
        after = engine.list_segments("n", 0)
        assert [(s.base_offset, s.tier) for s in after[:2]] == [(s.base_offset, s.tier) for s in segments[:2]]
        assert [s.record_count for s in after[:2]] == [s.record_count for s in segments[:2]]
        local = [s for s in after if s.tier is SegmentTier.LOCAL and s.base_offset >= segments[2].base_offset]
        assert sum(s.record_count for s in local) < sum(s.record_count for s in segments[2:])  # compacted
        root.unlink()
        moved.rename(root)
        assert sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) == keys  # nothing deleted
        assert not list((tmp_path / "data").rglob("*.cleaned"))
        report = engine.verify("n")
        assert report.ok, report.problems
        engine.compact("n", manual=True)  # the store is back: the offloaded ones are compacted too
        assert [r.offset for r in read_all(engine)] == survivors()
        engine.offload("n")
        assert engine.verify("n").ok
    finally:
        engine.close()


# -- SIGKILL at each point of a rewrite of offloaded segments ---------------------------------------

CHILD = (
    """
import os, signal, sys, types
from storage_engine import open_engine
from storage_engine.api import NewRecord
from storage_engine.clock import ManualClock
from storage_engine.config import Durability, EngineConfig
from storage_engine.policies.policy import NamespacePolicy, NodePolicy
from storage_engine.segment import index_store, tiered_log
from storage_engine.segment import log as log_module
from storage_engine.tier import rewrite, store

data_dir, tier_uri, op, point, nth = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
T0, N, KEYS = """
    + f"{T0}, {N}, {KEYS}"
    + """
clock = ManualClock(T0)
config = EngineConfig(data_dir=data_dir, durability=Durability.FSYNC, lifecycle_worker=False, tier_uri=tier_uri,
                      node_policy=NodePolicy(file_delete_delay_ms=0))
engine = open_engine(config, clock)
compact = op != "reclaim"
engine.create_namespace("c", 1, NamespacePolicy(
    segment_bytes=4096, segment_ms=1000, retention_ms=None, remote_storage_enabled=True,
    local_retention_ms=None if op == "compact-both" else 0, cleanup_policy="compact" if compact else "delete",
    min_cleanable_dirty_ratio=0.01, reclaim_dead_ratio=0.3))
for i in range(N):
    key = b"k%d" % (i % KEYS) if i % 2 == 0 else b"u%d" % i
    expire_at = T0 + 5_000 if not compact and i % 2 == 0 else None
    engine.append("c", 0, [NewRecord(b"%d:" % i + b"v" * 200, key=key, expire_at=expire_at, timestamp=T0 + i)])
clock.set(T0 + 10_000)
engine.offload("c")  # complete, unhooked: every sealed segment is in the object store
for s in engine.list_segments("c", 0)[:-1]:
    print("segment", s.base_offset, s.last_offset, flush=True)
"""
    + KILL_HOOKS
    + """
if point == "put":  # the new generation's data objects go through put_parts, manifests through put
    hook(store.ObjectTier, "put")
    hook(store.ObjectTier, "put_parts")
elif point == "begin":
    hook(tiered_log.TieredShardLog, "begin_rewrite")
elif point == "upload":
    hook(rewrite, "upload_segment")
elif point == "swap":
    hook(tiered_log.TieredShardLog, "swap_offloaded_rewrite")
elif point == "write":
    hook(index_store.IndexStore, "write", lambda self, wb, sync=False: not wb.is_empty())
elif point == "replace":  # after the swap's WriteBatch, before the new file replaces the local one
    real_os = log_module.os
    proxy = types.SimpleNamespace(**{n: getattr(real_os, n) for n in dir(real_os) if not n.startswith("__")})
    def replace(*a, **k):
        die()
        return real_os.replace(*a, **k)
    proxy.replace = replace
    log_module.os = proxy
elif point == "delete-object":
    hook(store.ObjectTier, "delete")
print("armed", flush=True)
if compact:
    engine.compact("c", manual=True)
else:
    engine.reclaim("c", manual=True)
print("done", flush=True)
"""
)

CRASHES = [
    ("compact", "put", 1),  # the new generation: before its data object
    ("compact", "put", 2),  # between its data object and its manifest
    ("compact", "put", 4),  # the second segment's upload
    ("compact", "begin", 2),  # one segment rewritten, before the next one's intent
    ("compact", "upload", 1),  # the intent is written, nothing uploaded
    ("compact", "swap", 1),  # uploaded and verified, before the swap
    ("compact", "write", 2),  # before the swap's WriteBatch (after the intent's)
    ("compact", "replace", 1),  # after the swap's WriteBatch, before the new file is in place
    ("compact", "write", 3),  # the new file in place, before the write that says both
    ("compact", "delete-object", 1),  # swapped, before the old manifest is deleted
    ("compact", "delete-object", 2),  # between the old manifest and the old data object
    ("compact", "write", 4),  # the old objects deleted, before the stale generation is cleared
    ("compact-both", "upload", 1),  # segments with local copies
    ("compact-both", "replace", 1),  # the old local file is still there after the swap's WriteBatch
    ("compact-both", "write", 3),
    ("reclaim", "swap", 1),  # the reclaimer's rewrite of mostly-dead offloaded segments
    ("reclaim", "replace", 2),
    ("reclaim", "delete-object", 2),
]


def check_after_crash(engine: StorageAdapter, op: str, segments: list[tuple[int, int]]) -> None:
    """Each segment is either the old one or the rewritten one: its records, read by offset, are all
    of them or exactly what the rewrite keeps; nothing is duplicated; keys find their latest record;
    verify is clean (objects of the other generation are named as stale or gone)."""
    records = read_all(engine, "c")
    got = [r.offset for r in records]
    assert got == sorted(set(got))  # in order, once each
    assert all(r.value == b"%d:" % r.offset + b"v" * 200 for r in records)
    assert engine.shard_stats("c", 0).end_offset == N
    kept = set(survivors())
    for base, last in segments:
        part = [o for o in got if base <= o <= last]
        if op == "reclaim":  # expired records are hidden whether or not they are still stored
            assert part == [o for o in range(base, last + 1) if o % 2 == 1]
        else:
            assert part in (list(range(base, last + 1)), [o for o in range(base, last + 1) if o in kept]), (base, part)
    for i in range(1, N, 2):
        found = engine.read_key("c", 0, b"u%d" % i)
        assert found is not None and found.offset == i
    if op != "reclaim":
        for k in range(KEYS):
            found = engine.read_key("c", 0, b"k%d" % k)
            assert found is not None and found.offset == max(o for o in range(0, N, 2) if o % KEYS == k)
    report = engine.verify("c")
    assert report.ok, report.problems


@pytest.mark.slow
@pytest.mark.parametrize(("op", "point", "nth"), CRASHES)
def test_rewrites_of_offloaded_segments_survive_sigkill(
    tmp_path: Path, tier: Tier, op: str, point: str, nth: int
) -> None:
    data_dir = tmp_path / "data"
    lines, killed = run_child(CHILD, data_dir, tier.uri, op, point, nth, env=tier.env, timeout=180)
    assert killed, "the hook never fired: the crash point was not reached"
    segments = [(int(p[1]), int(p[2])) for line in lines if (p := line.split()) and p[0] == "segment"]
    assert len(segments) > 4
    clock = ManualClock(T0 + 10_000)
    engine = engine_for(data_dir, tier, clock)
    try:
        check_after_crash(engine, op, segments)
        # The next steps finish the work: every segment rewritten, stale objects deleted.
        if op == "reclaim":
            engine.reclaim("c", manual=True)
        else:
            engine.compact("c", manual=True)
        engine.offload("c")
        check_after_crash(engine, op, segments)
        stored = engine.list_segments("c", 0)
        assert sum(s.record_count for s in stored) == (N // 2 if op == "reclaim" else len(survivors()))
        gens = generations(tier)
        assert sorted(gens) == [s.base_offset for s in stored[:-1] if s.record_count]
        assert all(len(g) == 1 for g in gens.values()), gens  # no generation left behind
        leftovers = [p.name for p in data_dir.rglob("*") if p.suffix in (".cleaned", ".swap", ".deleted", ".tmp")]
        assert leftovers == []
    finally:
        engine.close()
