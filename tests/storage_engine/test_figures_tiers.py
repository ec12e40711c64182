"""Where the stored bytes are adds up (issue 26): a shard's ``size_bytes`` = ``local_bytes`` (segments with a local
file, ``both`` included) + ``remote_only_bytes`` (segments only in the object store), from the same segments in one
call, and the node's tier gauges are those figures summed."""

from __future__ import annotations

from pathlib import Path

from storage_engine import open_engine
from storage_engine.api import SegmentTier
from storage_engine.clock import ManualClock
from storage_engine.config import EngineConfig
from tests.storage_engine.tier_engine import T0, N, clock_fixture, engine_for, policy, record  # noqa: F401 (fixtures)


def test_stored_bytes_split_into_local_and_remote_only_in_every_tier(tmp_path: Path, clock: ManualClock) -> None:
    engine = engine_for(tmp_path / "data", (tmp_path / "tier").as_uri(), clock)
    try:
        # Local retention of about one segment: sealed segments end up remote only, one both, the active local.
        engine.create_namespace("n", 1, policy(local_retention_ms=None, local_retention_bytes=5 * 1024))
        for i in range(N):
            engine.append("n", 0, [record(i)])
        before = engine.shard_stats("n", 0)
        assert (before.local_bytes, before.remote_only_bytes) == (before.size_bytes, 0)
        clock.set(T0 + N * 10 + 1000)
        engine.offload("n")
        segments = engine.list_segments("n", 0)
        tiers = {s.tier for s in segments}
        assert {SegmentTier.LOCAL, SegmentTier.BOTH, SegmentTier.REMOTE} <= tiers, tiers
        stats = engine.shard_stats("n", 0)
        remote_only = sum(s.size_bytes for s in segments if s.tier is SegmentTier.REMOTE)
        local = sum(s.size_bytes for s in segments if s.tier is not SegmentTier.REMOTE)
        assert (stats.local_bytes, stats.remote_only_bytes) == (local, remote_only)
        assert stats.size_bytes == stats.local_bytes + stats.remote_only_bytes == before.size_bytes
        both = sum(s.size_bytes for s in segments if s.tier is SegmentTier.BOTH)
        counters = engine.stats().counters
        assert counters["tier_local_bytes"] == stats.local_bytes
        assert counters["tier_remote_only_bytes"] == stats.remote_only_bytes
        # The object store's total overlaps the local bytes by the ``both`` segments: not part of the split.
        assert counters["tier_remote_bytes"] == remote_only + both > stats.remote_only_bytes
    finally:
        engine.close()


def test_stores_without_a_tier_report_every_byte_local(tmp_path: Path, clock: ManualClock) -> None:
    for adapter in ("memory", "rocksdb"):
        engine = open_engine(EngineConfig(data_dir=tmp_path / adapter, adapter=adapter, lifecycle_worker=False), clock)
        try:
            engine.create_namespace("n", 1, policy(remote_storage_enabled=False))
            for i in range(40):
                engine.append("n", 0, [record(i)])
            (stats,) = engine.stats().shards
            assert stats.size_bytes > 0 and (stats.local_bytes, stats.remote_only_bytes) == (stats.size_bytes, 0)
        finally:
            engine.close()
