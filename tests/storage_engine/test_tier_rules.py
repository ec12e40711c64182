"""The tier's pure parts: which segments are offloaded and which local copies go (Kafka's
``local.retention.*``), object names, the manifest's format, and the read cache's bound."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from storage_engine.api import SegmentInfo, SegmentState, SegmentTier
from storage_engine.errors import ObjectMissingError
from storage_engine.lifecycle.counters import Counters
from storage_engine.policies.policy import NamespacePolicy, effective_local_retention
from storage_engine.tier import checksum
from storage_engine.tier.layout import data_key, manifest_key, new_generation, parse_key, shard_prefix
from storage_engine.tier.manifest import Manifest, ManifestError
from storage_engine.tier.remote_reads import BLOCK_BYTES, TierCache
from storage_engine.tier.rules import local_copies_to_drop, offload_candidates
from storage_engine.tier.store import ObjectTier

NOW = 1_000_000


def seg(base: int, size: int, max_ts: int, tier: SegmentTier, state: SegmentState = SegmentState.SEALED) -> SegmentInfo:
    return SegmentInfo(
        namespace="n", shard=0, base_offset=base, last_offset=base + 9, record_count=10, live_count=10,
        size_bytes=size, min_timestamp=max_ts - 5, max_timestamp=max_ts, max_expire_at=None,
        has_unbounded=True, state=state, created_at=0, modified_at=0, tier=tier,
    )  # fmt: skip


def active(base: int, size: int = 100) -> SegmentInfo:
    return seg(base, size, NOW, SegmentTier.LOCAL, SegmentState.ACTIVE)


def test_offload_candidates_are_sealed_non_empty_local_segments() -> None:
    empty = SegmentInfo(
        namespace="n", shard=0, base_offset=40, last_offset=-1, record_count=0, live_count=0, size_bytes=0,
        min_timestamp=None, max_timestamp=None, max_expire_at=None, has_unbounded=False,
        state=SegmentState.SEALED, created_at=0, modified_at=0,
    )  # fmt: skip
    segments = [
        seg(0, 100, 10, SegmentTier.REMOTE),
        seg(10, 100, 20, SegmentTier.BOTH),
        seg(20, 100, 30, SegmentTier.LOCAL),
        seg(30, 100, 40, SegmentTier.LOCAL),
        empty,
        active(50),
    ]
    assert [s.base_offset for s in offload_candidates(segments)] == [20, 30]
    assert offload_candidates([active(0)]) == []


def test_local_time_rule_drops_a_prefix_of_uploaded_copies() -> None:
    policy = NamespacePolicy(retention_ms=None, local_retention_ms=1000)
    segments = [
        seg(0, 100, NOW - 5000, SegmentTier.REMOTE),
        seg(10, 100, NOW - 4000, SegmentTier.BOTH),
        seg(20, 100, NOW - 3000, SegmentTier.BOTH),
        seg(30, 100, NOW - 500, SegmentTier.BOTH),  # young enough: the walk stops here
        seg(40, 100, NOW - 5000, SegmentTier.BOTH),
        active(50),
    ]
    assert local_copies_to_drop(segments, policy, NOW) == [10, 20]


def test_a_copy_that_exists_nowhere_else_stops_the_walk() -> None:
    policy = NamespacePolicy(retention_ms=None, local_retention_ms=0)
    segments = [
        seg(0, 100, NOW - 5000, SegmentTier.BOTH),
        seg(10, 100, NOW - 4000, SegmentTier.LOCAL),  # not uploaded yet
        seg(20, 100, NOW - 3000, SegmentTier.BOTH),
        active(30),
    ]
    assert local_copies_to_drop(segments, policy, NOW) == [0]


def test_local_size_rule_counts_local_bytes_only() -> None:
    policy = NamespacePolicy(retention_ms=None, local_retention_bytes=250)
    segments = [
        seg(0, 1000, NOW, SegmentTier.REMOTE),  # not local: not counted
        seg(10, 100, NOW, SegmentTier.BOTH),
        seg(20, 100, NOW, SegmentTier.BOTH),
        seg(30, 100, NOW, SegmentTier.BOTH),
        active(40, 100),
    ]
    # local total 400: drop while total − oldest ≥ 250 → drop 10 (300 left), then 20 would leave 200: stop
    assert local_copies_to_drop(segments, policy, NOW) == [10]


def test_unset_local_retention_is_the_total_retention() -> None:
    assert effective_local_retention(NamespacePolicy(retention_ms=5, retention_bytes=None)) == (5, None)
    assert effective_local_retention(NamespacePolicy(retention_ms=5, local_retention_ms=2)) == (2, None)
    policy = NamespacePolicy(retention_ms=None)
    assert local_copies_to_drop([seg(0, 100, 0, SegmentTier.BOTH), active(10)], policy, NOW) == []


def test_object_names_round_trip() -> None:
    prefix = shard_prefix("orders", 7, 3)
    gen = new_generation()
    assert 0 < gen < 1 << 63
    for key in (data_key(prefix, 4096, gen), manifest_key(prefix, 4096, gen)):
        assert key.startswith("orders/7/3/00000000000000004096-")
        assert parse_key(prefix, key) == (4096, gen)
    assert parse_key(prefix, prefix + "notes.txt") is None
    assert parse_key(shard_prefix("orders", 7, 4), data_key(prefix, 1, gen)) is None


def test_a_manifest_reads_back_and_a_bad_one_is_named() -> None:
    manifest = Manifest(
        namespace="n", ns_id=1, shard=0, base_offset=0, last_offset=9, generation="00000000000000aa",
        data_object="n/1/0/x.log", size_bytes=10, checksum="xxh3_128:ab", record_count=10, live_count=9,
        first_timestamp=1, min_timestamp=1, max_timestamp=2, min_expire_at=None, max_expire_at=None,
        has_unbounded=True, content_flags=0, created_at=5, dead_ranges=((3, 3),), offset_index=((0, 0),),
        time_index=((2, 9),),
    )  # fmt: skip
    assert Manifest.from_bytes("k", manifest.to_bytes()) == manifest
    with pytest.raises(ManifestError, match=r"'k'.*format"):
        Manifest.from_bytes("k", b'{"format": 99}')
    with pytest.raises(ManifestError, match="missing"):
        Manifest.from_bytes("k", b'{"format": 1, "namespace": "n"}')
    with pytest.raises(ManifestError, match="not JSON"):
        Manifest.from_bytes("k", b"\xff")
    with pytest.raises(ManifestError, match="checksum 'crc:1'"):
        Manifest.from_bytes("k", manifest.to_bytes().replace(b'"xxh3_128:ab"', b'"crc:1"'))
    # A format-1 manifest (written before the checksum field) reads as a SHA-256 checksum.
    old = json.loads(manifest.to_bytes())
    del old["checksum"]
    old.update(format=1, sha256="cd")
    assert Manifest.from_bytes("k", json.dumps(old).encode()).checksum == "sha256:cd"


def test_each_checksum_algorithm_hashes_and_labels() -> None:
    data = b"segment bytes" * 1000
    for algorithm in checksum.ALGORITHMS:
        whole, parts = checksum.content_hash(algorithm), checksum.content_hash(algorithm)
        whole.update(data)
        for i in range(0, len(data), 4096):
            parts.update(data[i : i + 4096])
        assert whole.hexdigest() == parts.hexdigest()
        assert checksum.parse(checksum.label(whole, algorithm)) == (algorithm, whole.hexdigest())
    assert checksum.content_hash().hexdigest() != checksum.content_hash(checksum.SHA256).hexdigest()
    with pytest.raises(ValueError, match="md5"):
        checksum.content_hash("md5")


def test_the_cache_evicts_least_recently_used_blocks_and_refetches(tmp_path: Path) -> None:
    tier = ObjectTier((tmp_path / "tier").as_uri())
    payload = bytes(range(256)) * (BLOCK_BYTES // 256) * 5  # five blocks
    tier.put("obj", payload)
    counters = Counters()
    cache = TierCache(tmp_path / "cache", tier, lambda: 2 * BLOCK_BYTES, counters)
    for start in range(0, len(payload), 4096 * 7):
        assert cache.read("obj", len(payload), start, 5000) == payload[start : start + 5000]
        on_disk = sum(p.stat().st_size for p in (tmp_path / "cache").iterdir())
        assert on_disk == cache.cached_bytes <= 2 * BLOCK_BYTES
    spanning = BLOCK_BYTES - 10
    assert cache.read("obj", len(payload), spanning, 20) == payload[spanning : spanning + 20]
    assert cache.read("obj", len(payload), len(payload) - 3, 100) == payload[-3:]
    assert cache.read("obj", len(payload), len(payload), 10) == b""
    snapshot = counters.snapshot()
    assert snapshot["tier_cache_evictions_total"] >= 3 and snapshot["tier_cache_hits_total"] > 0
    cache.forget("obj")
    assert cache.cached_bytes == 0 and list((tmp_path / "cache").iterdir()) == []


def test_a_local_directory_object_is_fsynced_with_its_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """obstore renames a staging file without fsync; make_durable syncs the file and each directory
    from its own up to the tier's root (new directories hold new entries), and nothing above it."""
    tier = ObjectTier((tmp_path / "tier").as_uri())
    tier.put("orders/3/0/seg.log", b"data")
    tier.put("orders/3/0/seg.manifest.json", b"{}")
    synced: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real_fsync(fd)))
    tier.make_durable("orders/3/0/seg.log", "orders/3/0/seg.manifest.json")
    root = tmp_path / "tier"
    files = [root / "orders/3/0/seg.log", root / "orders/3/0/seg.manifest.json"]
    directories = [root / "orders/3/0", root / "orders/3", root / "orders", root]  # each once for both files
    assert synced == [str(p) for p in files + directories]
    with pytest.raises(ObjectMissingError):
        tier.make_durable("orders/3/0/missing.log")
