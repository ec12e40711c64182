"""The executors' download of an offloaded segment (:func:`spark_jobs.tier_reads.downloaded`): exact size,
the manifest's checksum, and a segment whose objects went since the listing read as gone. No Spark needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs.tier_reads import TierReadError, downloaded, object_tier
from storage_engine.tier import checksum
from storage_engine.tier.layout import data_key, manifest_key, manifest_key_of
from storage_engine.tier.manifest import Manifest

PREFIX = "orders/3/0/"
DATA = bytes(range(256)) * 40_000  # 10 MB: more than one ranged GET


def offloaded(tmp_path: Path, data: bytes = DATA) -> tuple[str, str]:
    """A data object and its manifest in a file:// tier, as an offload leaves them: (uri, data key)."""
    uri = (tmp_path / "tier").as_uri()
    tier = object_tier(uri)
    key = data_key(PREFIX, 4096, 0xAB)
    hasher = checksum.content_hash()
    hasher.update(data)
    manifest = Manifest(
        namespace="orders", ns_id=3, shard=0, base_offset=4096, last_offset=4100, generation=f"{0xAB:016x}",
        data_object=key, size_bytes=len(data), checksum=checksum.label(hasher), record_count=5, live_count=5,
        first_timestamp=1, min_timestamp=1, max_timestamp=2, min_expire_at=None, max_expire_at=None,
        has_unbounded=True, content_flags=0, created_at=5,
    )  # fmt: skip
    tier.put(key, data)
    tier.put(manifest_key(PREFIX, 4096, 0xAB), manifest.to_bytes())
    return uri, key


def test_a_download_is_the_object_byte_for_byte(tmp_path: Path) -> None:
    uri, key = offloaded(tmp_path)
    assert manifest_key_of(key) == manifest_key(PREFIX, 4096, 0xAB)
    with downloaded(uri, key, len(DATA), str(tmp_path)) as path:
        assert path is not None and Path(path).read_bytes() == DATA
    assert not list(tmp_path.glob("segment-*"))  # the temporary file is gone after the block


def test_an_object_that_does_not_match_its_manifest_checksum_is_refused(tmp_path: Path) -> None:
    uri, key = offloaded(tmp_path)
    object_tier(uri).put(key, b"x" + DATA[1:])  # same size, one byte changed
    with (
        pytest.raises(TierReadError, match=r"xxh3_128 .* its manifest .* says"),
        downloaded(uri, key, len(DATA), str(tmp_path)),
    ):
        pass
    assert not list(tmp_path.glob("segment-*"))


def test_another_size_than_listed_is_refused(tmp_path: Path) -> None:
    uri, key = offloaded(tmp_path)
    with (
        pytest.raises(TierReadError, match="holds 10240000 bytes, the node listed 10"),
        downloaded(uri, key, 10, str(tmp_path)),
    ):
        pass


def test_a_segment_whose_manifest_or_object_went_reads_as_gone(tmp_path: Path) -> None:
    uri, key = offloaded(tmp_path)
    tier = object_tier(uri)
    tier.delete(manifest_key_of(key))  # a deletion (retention, a rewrite) removes the manifest first
    with downloaded(uri, key, len(DATA), str(tmp_path)) as path:
        assert path is None
    tier.delete(key)
    with downloaded(uri, key, len(DATA), str(tmp_path)) as path:
        assert path is None
