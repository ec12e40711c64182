"""The one verified download of a data object (:func:`storage_engine.tier.fetch.fetch_verified`),
on a ``file://`` tier: the bytes reach the sink, and a short object or another checksum than the
manifest's raise :class:`TierVerifyError` naming the key and both numbers."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from storage_engine.tier import checksum
from storage_engine.tier.fetch import fetch_verified
from storage_engine.tier.layout import data_key
from storage_engine.tier.manifest import Manifest
from storage_engine.tier.store import ObjectTier
from storage_engine.tier.upload import TierVerifyError
from tests.storage_engine.tier_util import Tier

DATA = bytes(range(256)) * 40_000  # 10 MB: more than one ranged GET
KEY = data_key("n/1/0/", 0, 0xAB)


def manifest_of(data: bytes, algorithm: str = checksum.ALGORITHM) -> Manifest:
    hasher = checksum.content_hash(algorithm)
    hasher.update(data)
    return Manifest(
        namespace="n", ns_id=1, shard=0, base_offset=0, last_offset=9, generation=f"{0xAB:016x}",
        data_object=KEY, size_bytes=len(data), checksum=checksum.label(hasher, algorithm), record_count=10,
        live_count=10, first_timestamp=1, min_timestamp=1, max_timestamp=2, min_expire_at=None,
        max_expire_at=None, has_unbounded=True, content_flags=0, created_at=5,
    )  # fmt: skip


def file_tier(tmp_path: Path) -> ObjectTier:
    return Tier("file", (tmp_path / "tier").as_uri()).store()


@pytest.mark.parametrize("algorithm", checksum.ALGORITHMS)
def test_a_good_object_reaches_the_sink_whole(tmp_path: Path, algorithm: str) -> None:
    tier = file_tier(tmp_path)
    tier.put(KEY, DATA)
    received: list[bytes] = []
    assert fetch_verified(tier, KEY, manifest_of(DATA, algorithm), len(DATA), received.append) == len(DATA)
    assert len(received) > 1 and b"".join(received) == DATA


def test_a_short_object_is_refused_with_both_sizes(tmp_path: Path) -> None:
    tier = file_tier(tmp_path)
    tier.put(KEY, DATA[:-1])  # ended one byte early
    with pytest.raises(
        TierVerifyError, match=rf"{KEY!r}: the size downloaded is {len(DATA) - 1}, expected {len(DATA)}"
    ):
        fetch_verified(tier, KEY, manifest_of(DATA), len(DATA), lambda _: None)


def test_another_checksum_than_the_manifests_is_refused_with_both_digests(tmp_path: Path) -> None:
    tier = file_tier(tmp_path)
    damaged = b"x" + DATA[1:]  # same size, one byte changed
    tier.put(KEY, damaged)
    manifest = manifest_of(DATA)
    expected = checksum.parse(manifest.checksum)[1]
    found = checksum.parse(manifest_of(damaged).checksum)[1]
    with pytest.raises(TierVerifyError) as caught:
        fetch_verified(tier, KEY, manifest, len(DATA), lambda _: None)
    assert caught.value.key == KEY
    assert str(caught.value) == f"object {KEY!r}: the xxh3_128 checksum downloaded is {found}, expected {expected}"


def test_a_manifest_checksum_of_an_unknown_algorithm_is_refused_before_any_read(tmp_path: Path) -> None:
    tier = file_tier(tmp_path)
    tier.put(KEY, DATA)
    received: list[bytes] = []
    bad = dataclasses.replace(manifest_of(DATA), checksum="crc:1")  # from_bytes refuses it; the contract holds anyway
    with pytest.raises(ValueError, match="'crc:1'"):
        fetch_verified(tier, KEY, bad, len(DATA), received.append)
    assert not received
