"""Recall (issue 19, DESIGN §3 "Tiers"): local copies of offloaded segments brought back from the
object store — downloaded, verified against the manifest, fsynced, renamed into place, then one
synced metadata write ``remote`` → ``both`` — so reads are local again. Bounded (``limit``),
resumable after SIGKILL, refused when the disk has no room, against a ``file://`` tier and a real
S3 server (SeaweedFS, :mod:`tests.storage_engine.tier_util`)."""

from __future__ import annotations

from pathlib import Path

import obstore
import pytest

from storage_engine.api import SegmentTier, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.errors import InvalidArgumentError, TierError
from storage_engine.node_api.protocol import SPECS, Operation, StepRequest
from storage_engine.node_api.wire import problem_for, status_for
from storage_engine.policies.policy import NodePolicy
from storage_engine.tier.recall import TMP_SUFFIX, RecallDiskError
from storage_engine.tier.upload import TierVerifyError
from tests.storage_engine.lifecycle_util import KILL_HOOKS, run_child
from tests.storage_engine.tier_engine import (  # noqa: F401 (fixtures)
    T0,
    N,
    check_every_lookup,
    clock_fixture,
    engine_fixture,
    engine_for,
    local_files,
    policy,
    record,
)
from tests.storage_engine.tier_util import Tier, seaweed_fixture, tier_fixture  # noqa: F401 (fixtures)

TIER_READS = ("tier_cache_misses_total", "tier_fetched_bytes_total", "tier_cache_hits_total")


def offloaded(engine: StorageAdapter, clock: ManualClock, n: int = N) -> int:
    """A namespace ``n`` whose sealed segments are all offloaded with their local copies dropped;
    then its policy keeps everything local (``local_retention_ms`` unset). The sealed count."""
    engine.create_namespace("n", 1, policy())
    for i in range(n):
        engine.append("n", 0, [record(i)])
    clock.set(T0 + n * 10 + 1000)
    while engine.offload("n").more:
        pass
    sealed = engine.list_segments("n", 0)[:-1]
    assert len(sealed) > 4 and all(s.tier is SegmentTier.REMOTE for s in sealed)
    engine.update_namespace("n", policy(local_retention_ms=None))
    return len(sealed)


def tiers(engine: StorageAdapter) -> list[SegmentTier]:
    return [s.tier for s in engine.list_segments("n", 0)[:-1]]


def tier_reads(engine: StorageAdapter) -> dict[str, float]:
    counters = engine.stats().counters
    return {k: counters.get(k, 0) for k in TIER_READS}


def test_recall_brings_every_segment_back_and_reads_go_local(tmp_path: Path, tier: Tier, clock: ManualClock) -> None:
    data_dir = tmp_path / "data"
    engine = engine_for(data_dir, tier, clock)
    try:
        sealed = offloaded(engine, clock)
        sizes = [s.size_bytes for s in engine.list_segments("n", 0)[:-1]]
        dry = engine.recall("n", dry_run=True)
        assert (dry.segments_recalled, dry.bytes_recalled, dry.more) == (sealed, sum(sizes), False)
        assert set(tiers(engine)) == {SegmentTier.REMOTE}  # a dry run changes nothing
        objects = tier.object_keys()
        result = engine.recall("n")
        assert (result.segments_recalled, result.bytes_recalled, result.more) == (sealed, sum(sizes), False)
        assert result.operation == "recall" and result.skipped is None
        assert set(tiers(engine)) == {SegmentTier.BOTH}
        assert tier.object_keys() == objects  # the object store keeps its copy
        assert len([f for f in local_files(data_dir) if f.endswith(".log")]) == sealed + 1
        assert not [f for f in local_files(data_dir) if f.endswith(".tmp")]
        counters = engine.stats().counters
        assert counters["tier_segments_recalled_total"] == sealed
        assert counters["tier_bytes_recalled_total"] == sum(sizes)
        assert counters["tier_remote_only_bytes"] == 0 and counters["tier_remote_bytes"] == sum(sizes)
        before = tier_reads(engine)
        check_every_lookup(engine, by_timestamp=False)  # by offset, key and tag: no block fetched from the store
        assert tier_reads(engine) == before
        assert engine.verify("n").ok, engine.verify("n").problems
        assert engine.recall("n").segments_recalled == 0  # nothing left: idempotent
    finally:
        engine.close()
    reopened = engine_for(data_dir, tier, clock)  # the metadata is durable: local after a restart too
    try:
        assert set(tiers(reopened)) == {SegmentTier.BOTH}
        before = tier_reads(reopened)
        check_every_lookup(reopened, by_timestamp=False)
        assert tier_reads(reopened) == before
        assert reopened.verify("n").ok
    finally:
        reopened.close()


def test_limit_bounds_a_step_and_steps_resume(engine: StorageAdapter, clock: ManualClock) -> None:
    sealed = offloaded(engine, clock)
    first = engine.recall("n", limit=2)
    assert (first.segments_recalled, first.more) == (2, True)
    assert tiers(engine)[:2] == [SegmentTier.BOTH] * 2  # oldest first
    assert set(tiers(engine)[2:]) == {SegmentTier.REMOTE}
    steps, recalled = 1, 2
    while True:
        step = engine.recall("n", 0, limit=2)
        steps += 1
        recalled += step.segments_recalled
        if not step.more:
            break
    assert recalled == sealed and steps == (sealed + 1) // 2 + (sealed % 2 == 0)
    with pytest.raises(InvalidArgumentError):
        engine.recall("n", limit=0)


def test_recall_keeps_what_the_policy_keeps_local_and_offload_does_not_undo_it(
    engine: StorageAdapter, clock: ManualClock
) -> None:
    sealed = offloaded(engine, clock)
    # Local retention of 0 ms with remote storage on: the policy keeps nothing local.
    engine.update_namespace("n", policy(local_retention_ms=0))
    skipped = engine.recall("n")
    assert (skipped.skipped, skipped.segments_recalled) == ("policy", 0)
    # The newest segments fit in a local retention by size: only those come back, and stay.
    sizes = [s.size_bytes for s in engine.list_segments("n", 0)]
    keep = sum(sizes[-4:])  # three sealed segments and the active one
    engine.update_namespace("n", policy(local_retention_ms=None, local_retention_bytes=keep))
    result = engine.recall("n")
    assert result.segments_recalled == 3
    assert tiers(engine) == [SegmentTier.REMOTE] * (sealed - 3) + [SegmentTier.BOTH] * 3
    offload = engine.offload("n")
    assert offload.local_copies_dropped == 0 and tiers(engine)[-3:] == [SegmentTier.BOTH] * 3
    # Remote storage disabled: every segment is wanted local, and no offload step drops any.
    engine.update_namespace("n", policy(remote_storage_enabled=False, local_retention_ms=None))
    assert engine.recall("n").segments_recalled == sealed - 3
    assert engine.offload("n").skipped == "policy"
    assert set(tiers(engine)) == {SegmentTier.BOTH}
    check_every_lookup(engine, by_timestamp=False)


def test_node_wide_recall_and_the_protocol(engine: StorageAdapter, clock: ManualClock) -> None:
    sealed = offloaded(engine, clock)
    engine.create_namespace("other", 1, policy())  # nothing offloaded there
    result = engine.recall(None)
    assert (result.namespace, result.segments_recalled) == (None, sealed)
    spec = SPECS[Operation.RECALL]
    assert spec.dry_run and not spec.destructive and spec.accepts == {"shard", "limit", "dry_run"}
    step = StepRequest.from_params("recall", "n", {"shard": "0", "limit": "3", "dry_run": "true"})
    assert step.path == "/v1/namespaces/n/lifecycle/recall" and step.params() == {
        "shard": 0,
        "limit": 3,
        "dry_run": "true",
    }
    assert StepRequest(Operation.RECALL).path == "/v1/node/lifecycle/recall"
    with pytest.raises(InvalidArgumentError):
        StepRequest(Operation.RECALL, "n", manual=True)


def test_a_half_downloaded_copy_is_overwritten_and_removed_at_open(
    tmp_path: Path, tier: Tier, clock: ManualClock
) -> None:
    data_dir = tmp_path / "data"
    engine = engine_for(data_dir, tier, clock)
    try:
        sealed = offloaded(engine, clock)
        first = engine.list_segments("n", 0)[0]
        shard_dir = data_dir / "segments" / "n" / "0"
        tmp = shard_dir / f"{first.base_offset:020d}.log{TMP_SUFFIX}"
        tmp.write_bytes(b"x" * (first.size_bytes + 999))  # longer than the segment: truncated first
        assert engine.recall("n", limit=1).segments_recalled == 1
        assert not tmp.exists()
        assert engine.verify("n").ok
        second = engine.list_segments("n", 0)[1]
        leftover = shard_dir / f"{second.base_offset:020d}.log{TMP_SUFFIX}"
        leftover.write_bytes(b"partial")
    finally:
        engine.close()
    engine = engine_for(data_dir, tier, clock)
    try:
        assert not leftover.exists()
        assert engine.recall("n").segments_recalled == sealed - 1
        check_every_lookup(engine, by_timestamp=False)
    finally:
        engine.close()


def test_a_damaged_object_is_refused_and_nothing_changes(
    engine: StorageAdapter, tier: Tier, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    offloaded(engine, clock)
    data = sorted(k for k in tier.object_keys() if k.endswith(".log"))
    store = tier.store()
    good = store.get(data[0])
    store.put(data[0], good[:-1] + bytes([good[-1] ^ 0xFF]))  # same size, one byte changed
    with pytest.raises(TierVerifyError, match="xxh3_128 checksum downloaded"):
        engine.recall("n")
    assert set(tiers(engine)) == {SegmentTier.REMOTE}
    assert engine.stats().counters["tier_recall_failures_total"] == 1
    store.put(data[0], good)
    assert engine.recall("n").segments_recalled == len(data)


def test_an_unreachable_store_is_a_clean_error_and_nothing_changes(
    tmp_path: Path, tier: Tier, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "data"
    engine = engine_for(data_dir, tier, clock)
    try:
        offloaded(engine, clock)
        files = local_files(data_dir)

        def unreachable(*a: object, **k: object) -> object:
            raise ConnectionRefusedError("connection refused")

        monkeypatch.setattr(obstore, "get", unreachable)
        monkeypatch.setattr(obstore, "get_range", unreachable)
        with pytest.raises(TierError) as failed:
            engine.recall("n")
        assert failed.value.code == "tier_unavailable" and status_for(failed.value) == 503
        assert set(tiers(engine)) == {SegmentTier.REMOTE}
        assert local_files(data_dir) == files  # no temporary file left
        monkeypatch.undo()
        assert engine.verify("n").ok
    finally:
        engine.close()


def test_recall_is_refused_when_the_disk_has_no_room(tmp_path: Path, tier: Tier, clock: ManualClock) -> None:
    engine = engine_for(tmp_path / "data", tier, clock, capacity=64 << 20)  # a quota: use is this engine's files
    try:
        refused_when_full(engine, clock)
    finally:
        engine.close()


def refused_when_full(engine: StorageAdapter, clock: ManualClock) -> None:
    sealed = offloaded(engine, clock)
    disk = engine.check_disk()
    sizes = [s.size_bytes for s in engine.list_segments("n", 0)[:-1]]
    node = engine.node_policy()

    def watermarks(max_used_bytes: float) -> None:
        ratio = max_used_bytes / disk.capacity_bytes
        engine.set_node_policy(
            NodePolicy(
                file_delete_delay_ms=0,
                disk_max_used_ratio=ratio,
                disk_clean_forcibly_ratio=max(ratio, node.disk_clean_forcibly_ratio),
                disk_warning_ratio=max(ratio, node.disk_warning_ratio),
            )
        )

    # Room for about two segments below disk_max_used_ratio: two come back, then `more`, then a refusal.
    used = engine.check_disk().used_bytes - engine.check_disk().pending_delete_bytes
    watermarks(used + sizes[0] + sizes[1] + sizes[2] // 2)
    first = engine.recall("n")
    assert (first.segments_recalled, first.more) == (2, True)
    with pytest.raises(RecallDiskError) as refused:
        engine.recall("n")
    exc = refused.value
    assert exc.code == "recall_disk_limit" and exc.field == "disk_max_used_ratio" and status_for(exc) == 507
    assert "disk_max_used_ratio" in str(exc) and exc.size == sizes[2]
    body = problem_for(exc, "/v1/namespaces/n/lifecycle/recall")
    assert body["title"] == "Not enough disk to recall" and body["field"] == "disk_max_used_ratio"
    with pytest.raises(RecallDiskError):
        engine.recall("n", dry_run=True)  # a dry run says the same
    assert tiers(engine).count(SegmentTier.BOTH) == 2
    # Above the warning ratio (writes refused) nothing is recalled either.
    engine.set_node_policy(
        NodePolicy(
            file_delete_delay_ms=0, disk_max_used_ratio=0.0, disk_clean_forcibly_ratio=0.0, disk_warning_ratio=0.0
        )
    )
    with pytest.raises(RecallDiskError) as full:
        engine.recall("n")
    assert full.value.field == "disk_warning_ratio"
    engine.set_node_policy(NodePolicy(file_delete_delay_ms=0))
    assert engine.recall("n").segments_recalled == sealed - 2


# -- crash safety: SIGKILL of a child process during a recall ----------------------------------------
CHILD = (
    """
import os, signal, sys
from storage_engine import open_engine
from storage_engine.api import NewRecord
from storage_engine.clock import ManualClock
from storage_engine.config import Durability, EngineConfig
from storage_engine.policies.policy import NamespacePolicy, NodePolicy
from storage_engine.segment import index_store, tiered_log
from storage_engine.tier import store

data_dir, tier_uri, point, nth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
T0 = 1_700_000_000_000
clock = ManualClock(T0)
config = EngineConfig(data_dir=data_dir, durability=Durability.FSYNC, lifecycle_worker=False, tier_uri=tier_uri,
                      node_policy=NodePolicy(file_delete_delay_ms=0))
engine = open_engine(config, clock)
p = dict(retention_ms=None, segment_bytes=4096, remote_storage_enabled=True)
engine.create_namespace("n", 1, NamespacePolicy(**p, local_retention_ms=0))
for i in range(90):
    base = engine.append("n", 0, [NewRecord(b"%d:" % i + b"v" * 200, key=b"k%d" % (i % 11),
                                            tags=("t%d" % (i % 3),), timestamp=T0 + i * 10)]).base_offset
    print("ack", base, flush=True)
clock.set(T0 + 10_000)
while engine.offload("n").more:
    pass
engine.update_namespace("n", NamespacePolicy(**p))
"""
    + KILL_HOOKS
    + """
if point == "download":  # during a download (the temporary file is open)
    hook(store.ObjectTier, "checksum")
elif point == "finish":  # renamed into place, before the metadata write
    hook(tiered_log.TieredShardLog, "finish_recall")
elif point == "write":  # inside the synced metadata write
    hook(index_store.IndexStore, "write", lambda self, wb, sync=False: not wb.is_empty())
print("armed", flush=True)
engine.recall("n")
print("done", flush=True)
"""
)
CRASH_POINTS = [("download", 1), ("download", 4), ("finish", 1), ("finish", 3), ("write", 2)]


@pytest.mark.slow
@pytest.mark.parametrize(("point", "nth"), CRASH_POINTS)
def test_recall_survives_sigkill(tmp_path: Path, tier: Tier, clock: ManualClock, point: str, nth: int) -> None:
    data_dir = tmp_path / "data"
    lines, killed = run_child(CHILD, data_dir, tier.uri, point, nth, env=tier.env)
    assert killed, "the hook never fired: the crash point was not reached"
    assert [int(line.split()[1]) for line in lines if line.startswith("ack")] == list(range(90))
    objects = tier.object_keys()
    engine = engine_for(data_dir, tier, clock)
    try:
        assert not [f for f in local_files(data_dir) if f.endswith(".tmp")]
        check_every_lookup(engine, 90, by_timestamp=False)
        assert engine.verify("n").ok, engine.verify("n").problems
        result = engine.recall("n")  # the interrupted recall finishes
        assert set(tiers(engine)) == {SegmentTier.BOTH}
        assert result.segments_recalled >= 1
        before = tier_reads(engine)
        check_every_lookup(engine, 90, by_timestamp=False)
        assert tier_reads(engine) == before
        assert engine.verify("n").ok, engine.verify("n").problems
        assert tier.object_keys() == objects
    finally:
        engine.close()
