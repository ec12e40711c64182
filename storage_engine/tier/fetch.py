"""One verified download of an offloaded data object: the check a recall
(:func:`storage_engine.tier.recall.download`) and a Spark executor
(:func:`spark_jobs.tier_reads.downloaded`) both make before they trust the bytes they received,
and that ``verify`` makes of every offloaded segment (:mod:`storage_engine.tier.verify`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from storage_engine.tier import checksum as checksums
from storage_engine.tier.manifest import Manifest
from storage_engine.tier.store import ObjectTier
from storage_engine.tier.upload import TierVerifyError


def fetch_verified(
    tier: ObjectTier, key: str, manifest: Manifest, expected_size: int, sink: Callable[[Any], object]
) -> int:
    """Stream the object ``key`` of ``tier`` into ``sink`` (each chunk as it arrives, ranged GETs:
    :meth:`~storage_engine.tier.store.ObjectTier.digest`), hashing it with the algorithm its
    ``manifest`` names, and return its size once both checks pass:

    - the bytes received must number ``expected_size`` (the caller's: the segment's metadata on a
      recall, the node's listing in Spark), else :class:`~storage_engine.tier.upload.TierVerifyError`
      ``object '<key>': the size downloaded is <received>, expected <expected_size>``;
    - their checksum must be the manifest's, else :class:`~storage_engine.tier.upload.TierVerifyError`
      ``object '<key>': the <algorithm> checksum downloaded is <hex received>, expected <hex of the manifest>``.

    The size is checked first. A manifest checksum that is not ``<algorithm>:<hex>`` of a known
    algorithm raises ``ValueError`` (:func:`storage_engine.tier.checksum.parse`) before anything is
    read; the store's own errors (:class:`~storage_engine.errors.ObjectMissingError`, any
    :class:`~storage_engine.errors.TierError`) pass through. On any error ``sink`` may already
    hold part or all of the object: the caller discards it. Whether the manifest describes the
    segment at all (offsets, generation) is the caller's check, not this one.
    """
    algorithm, expected = checksums.parse(manifest.checksum)
    size, digest = tier.digest(key, algorithm, sink)
    if size != expected_size:
        raise TierVerifyError(key, "the size downloaded", expected_size, size)
    if digest != expected:
        raise TierVerifyError(key, f"the {algorithm} checksum downloaded", expected, digest)
    return size
