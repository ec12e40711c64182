"""Tiered storage (issue 19, DESIGN §3 "Tiers"): offload, transparent reads, local against total
retention, TTL and retention deleting objects, the read cache's bound, pacing — against a
``file://`` tier and a real S3 server (SeaweedFS, :mod:`tests.storage_engine.tier_util`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from storage_engine import open_engine
from storage_engine.api import NewRecord, SegmentTier, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.config import EngineConfig
from storage_engine.errors import PolicyValidationError, TierError
from storage_engine.node_api.wire import segment_from_json, segment_to_json
from storage_engine.policies.policy import MiB, NamespacePolicy, NodePolicy, namespace_policy_from
from storage_engine.segment.meta import SegmentMeta, TierState
from storage_engine.segment.segment import iter_file_records
from storage_engine.tier.manifest import Manifest
from storage_engine.tier.remote_reads import CACHE_DIR
from storage_engine.tier.store import ObjectTier
from tests.storage_engine.tier_engine import (  # noqa: F401 (fixtures)
    T0,
    N,
    check_every_lookup,
    clock_fixture,
    engine_fixture,
    engine_for,
    local_files,
    policy,
    read_all,
    record,
)
from tests.storage_engine.tier_util import Tier, seaweed_fixture, tier_fixture  # noqa: F401 (fixtures)


def fill(engine: StorageAdapter, clock: ManualClock, n: int = N, **over: object) -> None:
    engine.create_namespace("n", 1, policy(**over))
    for i in range(n):
        engine.append("n", 0, [record(i)])
    clock.set(T0 + n * 10 + 1000)


def test_offload_then_every_lookup_reads_the_object_store(tmp_path: Path, tier: Tier, clock: ManualClock) -> None:
    data_dir = tmp_path / "data"
    engine = engine_for(data_dir, tier, clock)
    try:
        fill(engine, clock)
        sealed = [s for s in engine.list_segments("n", 0)[:-1]]
        result = engine.offload("n")
        assert result.segments_offloaded == len(sealed) > 3
        assert result.bytes_offloaded == sum(s.size_bytes for s in sealed)
        assert result.local_copies_dropped == len(sealed) and not result.more
        segments = engine.list_segments("n", 0)
        assert [s.tier for s in segments] == [SegmentTier.REMOTE] * len(sealed) + [SegmentTier.LOCAL]
        assert local_files(data_dir) == [f"{segments[-1].base_offset:020d}.log"]  # only the active one
        assert len(tier.object_keys()) == 2 * len(sealed)  # a data object and a manifest each, nothing twice
        check_every_lookup(engine)
        assert engine.verify("n").ok, engine.verify("n").problems
        assert engine.offload("n").segments_offloaded == 0  # idempotent: nothing left to do
        assert len(tier.object_keys()) == 2 * len(sealed)
    finally:
        engine.close()
    engine = engine_for(data_dir, tier, clock)  # reopened: segments served remotely from the start
    try:
        check_every_lookup(engine)
        report = engine.verify("n")
        assert report.ok, report.problems
    finally:
        engine.close()


def test_the_manifest_and_object_are_readable_without_rocksdb(
    engine: StorageAdapter, tier: Tier, clock: ManualClock, tmp_path: Path
) -> None:
    fill(engine, clock)
    engine.expire_scan("n", manual=True)
    engine.offload("n")
    first = engine.list_segments("n", 0)[0]
    store = tier.store()
    manifests = sorted(k for k in tier.object_keys() if k.endswith(".manifest.json"))
    manifest = Manifest.from_bytes(manifests[0], store.get(manifests[0]))
    assert (manifest.base_offset, manifest.last_offset) == (first.base_offset, first.last_offset)
    assert manifest.record_count == first.record_count and manifest.size_bytes == first.size_bytes
    assert manifest.min_timestamp == first.min_timestamp and manifest.max_timestamp == first.max_timestamp
    assert manifest.offset_index[0] == (first.base_offset, 0)
    assert json.loads(store.get(manifests[0]))["format"] == 2
    copy = tmp_path / "copy.log"
    copy.write_bytes(store.get(manifest.data_object))
    algorithm, expected = manifest.checksum.split(":")
    assert algorithm == "xxh3_128" and store.digest(manifest.data_object)[1] == expected
    offsets = [r.offset for r in iter_file_records(copy)]
    assert offsets == list(range(first.base_offset, first.last_offset + 1))


def test_local_retention_bounds_local_copies_while_total_retention_spans_both_tiers(
    tmp_path: Path, tier: Tier, clock: ManualClock
) -> None:
    data_dir = tmp_path / "data"
    engine = engine_for(data_dir, tier, clock)
    try:
        # Local retention 3 KiB of the ~25 KiB per shard; total retention one minute.
        fill(engine, clock, local_retention_ms=None, local_retention_bytes=3 * 1024, retention_ms=60_000)
        result = engine.offload("n")
        segments = engine.list_segments("n", 0)
        local = [s for s in segments if s.tier is not SegmentTier.REMOTE]
        assert result.local_copies_dropped == len(segments) - len(local) > 0
        assert sum(s.size_bytes for s in local[1:]) < 3 * 1024 <= sum(s.size_bytes for s in local)
        assert all(s.tier is SegmentTier.BOTH for s in local[:-1])  # uploaded, still local
        check_every_lookup(engine)
        # Total retention deletes across both tiers: every sealed segment and its objects go.
        clock.advance(120_000)
        gone = engine.apply_retention("n")
        assert gone.segments_deleted == len(segments)
        assert engine.shard_stats("n", 0).log_start_offset == N
        assert tier.object_keys() == []
        assert engine.verify("n").ok
    finally:
        engine.close()


def test_local_retention_never_exceeds_total_retention() -> None:
    with pytest.raises(PolicyValidationError) as err:
        namespace_policy_from({"retention_ms": 1000, "local_retention_ms": 2000})
    assert set(err.value.errors) == {"local_retention_ms"}
    with pytest.raises(PolicyValidationError) as err:
        namespace_policy_from({"retention_bytes": 10_000, "local_retention_bytes": 10_001})
    assert set(err.value.errors) == {"local_retention_bytes"}
    namespace_policy_from({"retention_ms": None, "local_retention_ms": 2000})  # infinite total: any local


def test_ttl_drops_of_whole_offloaded_segments_delete_their_objects(
    engine: StorageAdapter, tier: Tier, clock: ManualClock
) -> None:
    engine.create_namespace("n", 1, policy())
    for i in range(N):  # the first 60 expire at T0 + 5000, the rest never
        engine.append("n", 0, [record(i, expire_at=T0 + 5000 if i < 60 else None)])
    clock.set(T0 + 2000)  # past every timestamp (local retention 0 drops the copies), before the deadline
    engine.offload("n")
    before = engine.list_segments("n", 0)
    doomed = [s for s in before[:-1] if s.last_offset < 60]
    assert doomed and all(s.tier is SegmentTier.REMOTE for s in doomed)
    keys = set(tier.object_keys())
    clock.set(T0 + 6000)
    result = engine.reclaim("n", manual=True)
    assert result.segments_deleted == len(doomed)
    left = set(tier.object_keys())
    assert len(left) == len(keys) - 2 * len(doomed)
    # the segment across offset 60 is mostly dead: rewritten under a new generation (tier.rewrite)
    assert len(keys - left) == 2 * (len(doomed) + result.segments_rewritten)
    records = read_all(engine, engine.shard_stats("n", 0).log_start_offset)
    assert [r.offset for r in records] == list(range(60, N))  # the rest of 0-59 is hidden by the read check
    assert engine.verify("n").ok


def test_the_read_cache_stays_within_its_bound(tmp_path: Path, tier: Tier, clock: ManualClock) -> None:
    data_dir = tmp_path / "data"
    engine = engine_for(data_dir, tier, clock, NodePolicy(file_delete_delay_ms=0, tier_cache_bytes=MiB))
    try:
        engine.create_namespace("n", 1, policy(segment_bytes=256 * 1024))
        big = b"x" * 2000
        for i in range(0, 1500, 50):  # ~3 MB in segments of 256 KiB
            engine.append("n", 0, [NewRecord(b"%d:" % j + big, timestamp=T0 + j) for j in range(i, i + 50)])
        clock.set(T0 + 10_000)
        engine.offload("n")
        cache = data_dir / CACHE_DIR
        offset, seen = 0, 0
        while True:
            page = engine.read("n", 0, offset, max_records=100, max_bytes=1 << 20)
            if not page.records:
                break
            seen += len(page.records)
            offset = page.next_offset
            assert sum(p.stat().st_size for p in cache.iterdir()) <= MiB
        assert seen == 1500
        counters = engine.stats().counters
        assert counters["tier_cache_evictions_total"] > 0 and counters["tier_fetched_bytes_total"] > MiB
    finally:
        engine.close()


def test_offload_is_bounded_paced_and_resumable(tmp_path: Path, tier: Tier, clock: ManualClock) -> None:
    node = NodePolicy(file_delete_delay_ms=0, offload_bandwidth_bytes_per_s=6000, offload_concurrency=3)
    engine = engine_for(tmp_path / "data", tier, clock, node)
    try:
        fill(engine, clock)
        sealed = len(engine.list_segments("n", 0)) - 1
        first = engine.offload("n", limit=2)
        assert first.segments_offloaded == 2 and first.more
        second = engine.offload("n")  # the bucket is in debt: nothing until the clock moves
        assert second.segments_offloaded == 0 and second.more
        done = 2
        for _ in range(20):
            clock.advance(1000)
            step = engine.offload("n", shard=0)
            done += step.segments_offloaded
            if not step.more:
                break
        assert done == sealed
        check_every_lookup(engine)
        engine.create_namespace("plain", 1, NamespacePolicy())
        assert engine.offload("plain").skipped == "policy"
        assert engine.offload(None).segments_offloaded == 0  # node-wide: nothing left
    finally:
        engine.close()


@pytest.mark.parametrize("step", ["offload", "recall"])
def test_other_adapters_do_not_offload_or_recall(clock: ManualClock, step: str) -> None:
    engine = open_engine(EngineConfig(adapter="memory", lifecycle_worker=False), clock)
    try:
        engine.create_namespace("n", 1, policy())
        assert getattr(engine, step)("n").skipped == "unsupported"
    finally:
        engine.close()


def test_old_segment_metadata_reads_as_local() -> None:
    meta = SegmentMeta(5, created_at=T0, last_offset=9, record_count=5, live_count=5, size_bytes=100)
    meta.tier, meta.tier_generation = TierState.REMOTE, 42
    packed = meta.pack()
    assert SegmentMeta.unpack(packed) == meta
    v3 = bytes([3]) + packed[1:108]  # a version 3 value: no tier fields
    old = SegmentMeta.unpack(v3)
    assert old.tier is TierState.LOCAL and old.tier_generation == 0 and old.size_bytes == 100


def test_verify_reports_missing_damaged_and_stray_objects(
    engine: StorageAdapter, tier: Tier, clock: ManualClock
) -> None:
    fill(engine, clock)
    engine.offload("n")
    assert engine.verify("n").ok
    store = tier.store()
    keys = tier.object_keys()
    data = sorted(k for k in keys if k.endswith(".log"))
    manifests = sorted(k for k in keys if k.endswith(".manifest.json"))
    prefix = data[0].rsplit("/", 1)[0] + "/"
    original = store.get(data[0])
    store.put(data[0], original[:-1] + bytes([original[-1] ^ 0xFF]))  # same size, other bytes
    store.delete(manifests[1])
    store.put(prefix + "00000000000000000000-00000000000000aa.log", b"stray")
    problems = "\n".join(engine.verify("n").problems)
    assert f"object {data[0]!r}: the xxh3_128 checksum downloaded is" in problems
    assert "manifest" in problems and "missing" in problems
    assert "stray object" in problems


def test_remote_storage_is_accepted_for_compacted_namespaces() -> None:
    """Compaction rewrites offloaded segments too (tests/storage_engine/test_tier_compaction.py)."""
    for cleanup in ("compact", "compact,delete"):
        p = namespace_policy_from({"cleanup_policy": cleanup, "remote_storage_enabled": True})
        assert p.remote_storage_enabled and p.compacts


def test_segments_cross_the_wire_with_their_tier(engine: StorageAdapter, clock: ManualClock) -> None:
    fill(engine, clock)
    engine.offload("n")
    for info in engine.list_segments("n", 0):
        body = json.loads(json.dumps(segment_to_json(info)))
        assert segment_from_json(body) == info
    old = {k: v for k, v in segment_to_json(info).items() if k != "tier"}
    assert segment_from_json(old).tier is SegmentTier.LOCAL


def test_an_uploaded_segment_whose_local_file_vanished_is_served_remotely(
    tmp_path: Path, tier: Tier, clock: ManualClock
) -> None:
    data_dir = tmp_path / "data"
    engine = engine_for(data_dir, tier, clock)
    try:
        fill(engine, clock, local_retention_ms=None)  # uploaded, local copies kept (no local bound)
        engine.offload("n")
        first = engine.list_segments("n", 0)[0]
        assert first.tier is SegmentTier.BOTH
    finally:
        engine.close()
    (data_dir / "segments" / "n" / "0" / f"{first.base_offset:020d}.log").unlink()
    engine = engine_for(data_dir, tier, clock)
    try:
        assert engine.list_segments("n", 0)[0].tier is SegmentTier.REMOTE
        check_every_lookup(engine)
        assert engine.verify("n").ok
    finally:
        engine.close()


def test_a_failed_upload_keeps_the_local_copy_and_the_next_offload_finishes(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    tier = Tier("file", (tmp_path / "tier").as_uri())
    engine = engine_for(tmp_path / "data", tier, clock)
    try:
        fill(engine, clock)
        real_put = ObjectTier.put
        calls = {"n": 0}

        def flaky_put(self: ObjectTier, key: str, data: object) -> None:
            calls["n"] += 1
            if calls["n"] == 3:
                raise TierError(self.uri, key, "put", "connection reset")
            real_put(self, key, data)  # type: ignore[arg-type]

        monkeypatch.setattr(ObjectTier, "put", flaky_put)
        with pytest.raises(TierError, match="connection reset"):
            engine.offload("n", limit=1000)
        assert engine.stats().counters["tier_offload_failures_total"] == 1
        segments = engine.list_segments("n", 0)
        assert any(s.tier is SegmentTier.LOCAL for s in segments[:-1])  # the failed one stayed local
        check_every_lookup(engine)
        assert engine.verify("n").ok
        monkeypatch.setattr(ObjectTier, "put", real_put)
        # the offloader backs off (1 s after a first failure) before it tries again
        deferred = engine.offload("n")
        assert (deferred.skipped, deferred.more, deferred.segments_offloaded) == ("backoff", True, 0)
        assert engine.stats().counters["tier_offload_deferred_total"] == 1
        clock.advance(1000)
        engine.offload("n")
        assert engine.stats().counters["tier_offload_retries_total"] == 1
        sealed = len(engine.list_segments("n", 0)) - 1
        assert all(s.tier is SegmentTier.REMOTE for s in engine.list_segments("n", 0)[:-1])
        assert len(tier.object_keys()) == 2 * sealed
        check_every_lookup(engine)
        assert engine.verify("n").ok
    finally:
        engine.close()


def test_a_reader_whose_local_copy_was_dropped_meanwhile_goes_on_remotely(
    engine: StorageAdapter, clock: ManualClock
) -> None:
    fill(engine, clock, local_retention_ms=None)  # uploaded, local copies kept for now
    engine.offload("n")
    log = engine._shard("n", 0)  # type: ignore[attr-defined]
    view = log.view  # a reader took the view while every copy was still local...
    engine.update_namespace("n", policy(local_retention_ms=0))
    assert engine.offload("n").local_copies_dropped > 0  # ...and the copies went (removed at once)
    with log.reading():
        offsets = [r.offset for r in log.iter_records(view, 0)]
    assert offsets == list(range(N))
    assert engine.stats().counters["tier_reads_moved_to_remote_total"] == 1


def test_namespaces_without_remote_storage_never_touch_the_tier(tmp_path: Path, clock: ManualClock) -> None:
    engine = open_engine(EngineConfig(data_dir=tmp_path / "data", lifecycle_worker=False), clock)
    try:
        engine.create_namespace("n", 1, NamespacePolicy(segment_bytes=4096))
        for i in range(N):
            engine.append("n", 0, [record(i)])
        assert engine.offload("n").skipped == "policy"
        assert engine.verify("n").ok
        engine.delete_namespace("n")
    finally:
        engine.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # no data-tier directory was made


def test_an_upload_is_verified_before_the_catalog_says_uploaded(
    tmp_path: Path, tier: Tier, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file:// tier is read back and its checksum compared; on S3 an ETag that is the MD5 of the part
    MD5s proves the content, any other ETag has the object read back too. A mismatch keeps the segment
    local."""
    from dataclasses import replace

    from storage_engine.tier.upload import TierVerifyError

    engine = engine_for(tmp_path / "data", tier, clock)
    try:
        fill(engine, clock)
        real_checksum, real_head = ObjectTier.checksum, ObjectTier.head

        def damaged(self: ObjectTier, key: str, update: Any) -> int:
            return real_checksum(self, key, lambda chunk: update(b"x" + bytes(chunk)[1:]))

        monkeypatch.setattr(ObjectTier, "checksum", damaged)
        if tier.kind == "s3":
            monkeypatch.setattr(ObjectTier, "head", lambda self, key: replace(real_head(self, key), etag='"other"'))
        with pytest.raises(TierVerifyError, match="read back"):
            engine.offload("n", limit=1)
        assert all(s.tier is SegmentTier.LOCAL for s in engine.list_segments("n", 0))
        monkeypatch.setattr(ObjectTier, "checksum", real_checksum)
        monkeypatch.setattr(ObjectTier, "head", real_head)
        clock.advance(1000)  # past the offloader's backoff
        engine.offload("n")
        assert all(s.tier is SegmentTier.REMOTE for s in engine.list_segments("n", 0)[:-1])
        check_every_lookup(engine)
        assert engine.verify("n").ok
    finally:
        engine.close()
