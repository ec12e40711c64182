"""The content checksum of an offloaded data object: one definition for the upload, its
verification, a recall's download, ``verify`` and any reader without the node (Spark).

A manifest names its checksum as ``"<algorithm>:<hex digest>"``
(:attr:`~storage_engine.tier.manifest.Manifest.checksum`):

- ``xxh3_128`` (manifest format 2, what this engine writes): XXH3's 128-bit hash (``xxhash``),
  about 8 GB/s on one core, so hashing a segment while it is read for upload, and again when a
  local directory's copy is read back, costs little next to copying it (issue 19's offload target:
  ≥ 80 % of a plain copy's speed). It guards against what a checksum here is for — a truncated,
  torn or bit-flipped object, a wrong object under a name — not against an adversary who can
  write to the store (its credentials are the protection there), so a cryptographic hash buys
  nothing for its ~1 GB/s (SHA-256 with SHA-NI);
- ``sha256`` (format 1 manifests, written before): still verified.
"""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

import xxhash

XXH3_128 = "xxh3_128"
SHA256 = "sha256"
ALGORITHM = XXH3_128  # what new manifests use
ALGORITHMS = (XXH3_128, SHA256)


class ContentHash(Protocol):
    def update(self, data: Any, /) -> None: ...

    def hexdigest(self) -> str: ...


def content_hash(algorithm: str = ALGORITHM) -> ContentHash:
    """A fresh hash of ``algorithm`` (one of :data:`ALGORITHMS`)."""
    if algorithm == XXH3_128:
        return xxhash.xxh3_128()
    if algorithm == SHA256:
        return hashlib.sha256()
    raise ValueError(f"unknown checksum algorithm {algorithm!r} (known: {', '.join(ALGORITHMS)})")


def label(hasher: ContentHash, algorithm: str = ALGORITHM) -> str:
    """``"<algorithm>:<hex>"``, as a manifest records it."""
    return f"{algorithm}:{hasher.hexdigest()}"


def parse(checksum: str) -> tuple[str, str]:
    """``(algorithm, hex digest)`` of a manifest's checksum; ``ValueError`` naming what is wrong."""
    algorithm, sep, digest = checksum.partition(":")
    if not sep or algorithm not in ALGORITHMS or not digest:
        raise ValueError(f"checksum {checksum!r} is not <algorithm>:<hex> with one of {', '.join(ALGORITHMS)}")
    return algorithm, digest
