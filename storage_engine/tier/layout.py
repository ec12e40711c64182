"""Where a shard's offloaded segments live in the object store: one rule for every name.

Layout, relative to the tier's root (:class:`~storage_engine.tier.store.ObjectTier`)::

    <namespace>/<ns_id>/<shard>/<base offset, 20 digits>-<generation, 16 hex>.log
    <namespace>/<ns_id>/<shard>/<base offset, 20 digits>-<generation, 16 hex>.manifest.json

The ``.log`` object is the sealed segment file byte for byte (so the positions of the local
sparse offset index hold in it); the manifest (:mod:`storage_engine.tier.manifest`) is written
after it and describes it. ``ns_id`` (never reused) keeps a namespace deleted and created again
under the same name apart from the old one's objects; the generation, chosen when an offload
begins and recorded in the segment's metadata before any byte is written, keeps two uploads of
one base offset (say after a rewrite) apart, and lets a restarted offload overwrite exactly what
an interrupted one may have left.
"""

from __future__ import annotations

import secrets

DATA_SUFFIX = ".log"
MANIFEST_SUFFIX = ".manifest.json"


def new_generation() -> int:
    """A random non-zero 63-bit generation (0 means "none" in the metadata)."""
    return secrets.randbits(63) or 1


def shard_prefix(namespace: str, ns_id: int, shard: int) -> str:
    return f"{namespace}/{ns_id}/{shard}/"


def namespace_prefix(namespace: str, ns_id: int) -> str:
    return f"{namespace}/{ns_id}/"


def object_stem(base_offset: int, generation: int) -> str:
    return f"{base_offset:020d}-{generation:016x}"


def data_key(prefix: str, base_offset: int, generation: int) -> str:
    return prefix + object_stem(base_offset, generation) + DATA_SUFFIX


def manifest_key(prefix: str, base_offset: int, generation: int) -> str:
    return prefix + object_stem(base_offset, generation) + MANIFEST_SUFFIX


def manifest_key_of(data_object: str) -> str:
    """The manifest's key of a data object's key (a reader that was given only the data key)."""
    if not data_object.endswith(DATA_SUFFIX):
        raise ValueError(f"{data_object!r} is not a data object key (ends with {DATA_SUFFIX})")
    return data_object[: -len(DATA_SUFFIX)] + MANIFEST_SUFFIX


def parse_key(prefix: str, key: str) -> tuple[int, int] | None:
    """``(base offset, generation)`` of a key under ``prefix`` that this layout names, else ``None``."""
    if not key.startswith(prefix):
        return None
    name = key[len(prefix) :]
    for suffix in (DATA_SUFFIX, MANIFEST_SUFFIX):
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            base, dash, gen = stem.partition("-")
            if dash and len(base) == 20 and base.isdigit() and len(gen) == 16:
                try:
                    return int(base), int(gen, 16)
                except ValueError:
                    return None
    return None
