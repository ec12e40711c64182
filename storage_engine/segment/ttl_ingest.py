"""Bulk TTL-index loads: an SST file of TTL entries (the ``ttl-backfill`` Spark job writes one),
validated key by key, then ingested into the ``ttl`` family."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from rocksdict import IngestExternalFileOptions, Options, Rdict, SstFileWriter

from storage_engine.errors import InvalidArgumentError
from storage_engine.segment.index_keys import (
    CF_TTL,
    TTL_KEY_BYTES,
    TTL_VALUE_BYTES,
    U64,
    decode_ttl_key,
    shard_prefix,
)
from storage_engine.segment.index_store import IndexStore

log = logging.getLogger(__name__)


class ForeignTTLEntryError(InvalidArgumentError):
    """An SST file handed to ``ingest_ttl_index`` holds an entry that is not a TTL-index entry of
    the namespace it was handed to (another namespace id, a shard outside ``0..shards-1``, an
    offset at or past the shard's end, a malformed key or value). Nothing is ingested."""

    code = "foreign_ttl_entry"

    def __init__(self, file: str, index: int, reason: str) -> None:
        # The entry is named by its position, never by its bytes: errors quote no file contents.
        self.file = file
        self.index = index
        self.reason = reason
        super().__init__("file", f"{file}: TTL entry #{index} {reason}")


def sst_options() -> Options:
    """Options for an :class:`rocksdict.SstFileWriter` whose file this store can ingest: raw bytes
    keys and values (the store's ``raw_mode``) and the default bytewise comparator."""
    return Options(raw_mode=True)


@contextlib.contextmanager
def open_sst(path: Path, scratch_root: Path) -> Iterator[Rdict]:
    """An SST file as a read-only view: rocksdict has no SST reader, so the file is ingested (copied,
    the caller's file stays) into a scratch database under ``scratch_root``, removed afterwards.
    ``path`` is a checked file of the import directory (:func:`storage_engine.formats.ttl_import.import_file`).

    Raises :class:`InvalidArgumentError` (field ``file``) for a file that is not an SST file
    RocksDB accepts; the message names the file, never RocksDB's error (which may quote its bytes)."""
    scratch_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="ttl-ingest-", dir=scratch_root))
    db: Rdict | None = None
    try:
        db = Rdict(str(scratch / "db"), sst_options())
        opts = IngestExternalFileOptions()
        opts.set_move_files(False)
        try:
            db.ingest_external_file([str(path)], opts)
        except Exception as exc:  # rocksdict raises a plain Exception for a bad file
            log.info("ttl-index ingest: %s is not an ingestible SST file: %s", path, exc)
            raise InvalidArgumentError("file", f"{path.name}: not a valid SST file") from None
        yield db
    finally:
        if db is not None:
            db.close()
        shutil.rmtree(scratch, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class TTLSstEntry:
    key: bytes
    value: bytes
    expire_at: int
    shard: int
    offset: int


def validated_ttl_entries(db: Rdict, path: Path, ns_id: int, end_offsets: list[int]) -> Iterator[TTLSstEntry]:
    """The entries of an SST view (:func:`open_sst`) in key order, each checked to be a TTL-index
    entry of namespace ``ns_id`` whose shard has end offset ``end_offsets[shard]``; the first one
    that is not raises :class:`ForeignTTLEntryError`."""
    where = path.name
    for i, (raw_key, raw_value) in enumerate(cast(Iterable[tuple[bytes, bytes]], db.items())):
        key, value = bytes(raw_key), bytes(raw_value)
        if len(key) != TTL_KEY_BYTES:
            raise ForeignTTLEntryError(where, i, f"is {len(key)} bytes, a TTL key is {TTL_KEY_BYTES}")
        if len(value) not in (0, TTL_VALUE_BYTES):
            raise ForeignTTLEntryError(where, i, f"has a {len(value)}-byte value (0 or {TTL_VALUE_BYTES})")
        expire_at, n, shard, offset = decode_ttl_key(key)
        if n != ns_id:
            raise ForeignTTLEntryError(where, i, f"belongs to namespace id {n}, not {ns_id}")
        if shard >= len(end_offsets):
            raise ForeignTTLEntryError(where, i, f"names shard {shard}; the namespace has {len(end_offsets)}")
        if offset >= end_offsets[shard]:
            raise ForeignTTLEntryError(
                where, i, f"points at offset {offset}, at or past the end {end_offsets[shard]} of shard {shard}"
            )
        yield TTLSstEntry(key, value, expire_at, shard, offset)


def ingest_ttl_file(
    store: IndexStore, path: Path, ns_id: int, bounds: list[tuple[int, int]], scratch_root: Path
) -> dict[str, Any]:
    """Bulk-load the TTL entries of the SST file at ``path`` into ``store``'s ``ttl`` family.

    ``bounds``: per shard ``(log start, end offset)``. Every entry is validated first
    (:func:`validated_ttl_entries`; one bad entry refuses the whole file). Entries for records that
    are gone (below the log start) or already dead are left out; then the file (or, when some were
    left out, a filtered copy) goes in with RocksDB's ``ingest_external_file``, atomically: either
    every kept entry is visible to the next TTL scan or none is. The caller's file is copied, never
    moved. Memory: the keys left out, not the file's entries.
    """
    t0 = time.perf_counter()
    ends = [end for _, end in bounds]
    skip: set[bytes] = set()
    entries = ingested = 0
    lo: int | None = None
    hi: int | None = None
    with open_sst(path, scratch_root) as db:
        for e in validated_ttl_entries(db, path, ns_id, ends):
            entries += 1
            if e.offset < bounds[e.shard][0] or store.is_dead(shard_prefix(ns_id, e.shard), e.offset):
                skip.add(e.key)
                continue
            ingested += 1
            lo = e.expire_at if lo is None else min(lo, e.expire_at)
            hi = e.expire_at if hi is None else max(hi, e.expire_at)
        if ingested:
            opts = IngestExternalFileOptions()
            opts.set_move_files(False)
            family = store._cf[CF_TTL]
            assert lo is not None
            if not skip:
                family.ingest_external_file([str(path)], opts)
            else:
                filtered = scratch_root / f"filtered-{os.getpid()}-{time.monotonic_ns()}.sst"
                try:
                    writer = SstFileWriter(options=sst_options())
                    writer.open(str(filtered))
                    for raw_key, raw_value in cast(Iterable[tuple[bytes, bytes]], db.items()):
                        if bytes(raw_key) not in skip:
                            writer[bytes(raw_key)] = bytes(raw_value)
                    writer.finish()
                    family.ingest_external_file([str(filtered)], opts)
                finally:
                    filtered.unlink(missing_ok=True)
            store.ttl_written(ns_id, U64.pack(lo))  # the next TTL scan of the namespace starts there
    return {
        "file": path.name,
        "entries": entries,
        "ingested": ingested,
        "skipped": len(skip),
        "min_expire_at": lo,
        "max_expire_at": hi,
        "duration_ms": round((time.perf_counter() - t0) * 1000, 3),
    }
