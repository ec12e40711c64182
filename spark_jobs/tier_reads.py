"""Segments read from the object store (tiered storage, issue 19): the executors' side.

A node with a tier offloads sealed segments to an object store; the ``.log`` object is the sealed segment file
byte for byte (:mod:`storage_engine.tier.layout`), and the node's segment-files listing gives each segment's
tier (``local``, ``both``, ``remote``), its object key and the store's URI (no credentials). A segment whose
local copy is gone (``remote``), or a ``both`` one when the job prefers the store (``--prefer-tier``, or no
local data directory here), is read by an executor from the store: it HEADs the object (its size must be the
listed one), reads the segment's manifest for the object's checksum, downloads the object in ranged GETs to a
temporary file in the executor's local directory, hashing it as it arrives (the checksum must be the
manifest's: :func:`storage_engine.tier.fetch.fetch_verified`, the node's own verification), and decodes that
file with the engine's own reader, exactly as a local segment file
(:func:`spark_jobs.segments.iter_segment_batches`): one decode path, the codec has one owner.

The store is :class:`storage_engine.tier.store.ObjectTier` (obstore), built from the listing's URI or the
job's ``--tier-uri``; endpoint and credentials come from the executor's environment only
(``TIER_S3_ENDPOINT``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
``AWS_REGION``), never from the command line, and errors name the URI without user info and the key. The
driver hands those variables to its Python workers (:func:`tier_environment`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping

from storage_engine.errors import ObjectMissingError
from storage_engine.tier.fetch import fetch_verified
from storage_engine.tier.layout import manifest_key_of
from storage_engine.tier.manifest import Manifest
from storage_engine.tier.store import ObjectTier
from storage_engine.tier.upload import TierVerifyError

SAMPLE_BYTES = 64 * 1024


# What an executor needs to reach the store, handed to Spark's Python workers by the driver (tier_environment).
TIER_ENV = (
    "TIER_S3_ENDPOINT",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
)


def tier_environment(environment: dict[str, str], env: Mapping[str, str] | None = None) -> None:
    """Copy the driver's tier settings (:data:`TIER_ENV`) into ``environment``, a SparkContext's
    ``environment``: the variables PySpark gives its Python workers (executors) with every function and data
    source it ships. Not Spark configuration, so they appear neither in the UI's Environment tab nor in the event
    log, and a JVM started before they were set (a long-lived session) still gets them. Variables the driver
    does not have are removed."""
    env = os.environ if env is None else env
    for name in TIER_ENV:
        if env.get(name):
            environment[name] = env[name]
        else:
            environment.pop(name, None)


class TierReadError(RuntimeError):
    """An object does not hold what the node listed (another size, or it ended early)."""


@functools.lru_cache(maxsize=32)
def object_tier(uri: str) -> ObjectTier:
    """One :class:`ObjectTier` per URI and process (an executor's Python worker reuses it across tasks)."""
    return ObjectTier(uri)


def local_dir() -> str:
    """Where an executor puts downloaded segments: Spark's first local directory, else the temp directory."""
    spark_dirs = [d for d in os.environ.get("SPARK_LOCAL_DIRS", "").split(",") if d.strip()]
    return spark_dirs[0] if spark_dirs else tempfile.gettempdir()


def sample_digest(size: int, read: Callable[[int, int], bytes]) -> str:
    """BLAKE2b of ``size`` and the first and last 64 KiB of ``size`` bytes, ``read(start, end)`` giving the bytes
    (:func:`spark_jobs.segments.sample_hash` of a file, :func:`object_sample_hash` of an object: same digest
    for the same bytes, wherever they are read)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(str(size).encode())
    digest.update(read(0, min(size, SAMPLE_BYTES)))
    if size > SAMPLE_BYTES:
        start = max(SAMPLE_BYTES, size - SAMPLE_BYTES)
        digest.update(read(start, start + SAMPLE_BYTES))
    return digest.hexdigest()


def object_sample_hash(uri: str, key: str, size: int) -> str | None:
    """:func:`sample_digest` of an object in two ranged GETs; ``None`` when it is gone."""
    tier = object_tier(uri)
    try:
        return sample_digest(size, lambda start, end: tier.get_range(key, start, end))
    except ObjectMissingError:
        return None


@contextlib.contextmanager
def downloaded(uri: str, key: str, size: int, directory: str | None = None) -> Iterator[str | None]:
    """The object ``key`` of the store at ``uri`` as a temporary local file (removed after the block), or
    ``None`` when the object or its manifest is gone (the segment deleted by retention or rewritten since the
    listing: a deletion removes the manifest first).

    The object must hold exactly ``size`` bytes (the listed size of the sealed segment it is a copy of) with
    the checksum its manifest records: anything else raises :class:`TierReadError`, as a download that ends
    early does."""
    tier = object_tier(uri)
    manifest_key = manifest_key_of(key)
    try:
        found = tier.head(key).size
        manifest = Manifest.from_bytes(manifest_key, tier.get(manifest_key))
    except ObjectMissingError:
        yield None
        return
    if found != size:
        raise TierReadError(f"object store {tier.uri}: {key!r} holds {found} bytes, the node listed {size}")
    fd, path = tempfile.mkstemp(prefix="segment-", suffix=".log", dir=directory or local_dir())
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                fetch_verified(tier, key, manifest, size, out.write)
            except TierVerifyError as exc:
                raise TierReadError(
                    f"object store {tier.uri}: {exc} (the node listed {size} bytes; its manifest {manifest_key!r} "
                    f"says {manifest.checksum})"
                ) from exc
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


__all__ = [
    "TIER_ENV",
    "TierReadError",
    "downloaded",
    "object_sample_hash",
    "object_tier",
    "sample_digest",
    "tier_environment",
]
