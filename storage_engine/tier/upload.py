"""Uploading one sealed segment: its data object, then its manifest, each verified before the
catalog may say "uploaded" (:meth:`~storage_engine.segment.tiered_log.TieredShardLog.finish_offload`).

Steps, for a segment whose metadata already records UPLOADING and the generation (so the names
below are fixed before any byte leaves the node):

1. read the local file once, in ``SLICE_BYTES`` pieces, hashing each as it is read (the content
   checksum of the whole for the manifest, :mod:`storage_engine.tier.checksum`; on S3 also each
   ``PART_BYTES`` part's MD5) while streaming them as a multipart upload that the store cuts into
   parts of exactly ``PART_BYTES`` (:meth:`~storage_engine.tier.store.ObjectTier.put_parts`); the
   caller's ``pace`` runs before each piece (the offload gives way to appends there);
2. verify it: HEAD gives the size, which must be the segment's; on S3 an ETag equal to the MD5 of
   the parts' MD5s (``-<parts>``, :func:`multipart_etag`) proves the content; a store computing
   ETags differently, and a local directory (no content ETags), have the object read back in
   ranged GETs and its checksum compared with the one computed while reading the file;
3. PUT the manifest (:mod:`storage_engine.tier.manifest`), read it back and compare it byte for byte;
4. on a local directory, fsync both objects (:meth:`~storage_engine.tier.store.ObjectTier.make_durable`;
   an S3 PUT is durable when acknowledged): the catalog's "uploaded" may let the local copy go.

Any failure raises (:class:`~storage_engine.errors.TierError`, :class:`TierVerifyError`) and
leaves the segment UPLOADING: the next offload uploads again under the same names.

A rewrite of an offloaded segment (:mod:`storage_engine.tier.rewrite`) uploads its new file the
same way under a new generation: ``source`` is that file (not yet the log's) and ``offset_index``
its sparse offset index (the index store still holds the old file's until the swap); it has no
dead records.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator

from storage_engine.errors import StorageError
from storage_engine.formats.segment_files import dead_ranges
from storage_engine.rules.pacing import no_pause
from storage_engine.segment.meta import SegmentMeta
from storage_engine.segment.segment import Segment
from storage_engine.segment.tiered_log import TieredShardLog
from storage_engine.tier import checksum as checksums
from storage_engine.tier.context import ShardTier
from storage_engine.tier.manifest import Manifest, pairs

PART_BYTES = 8 << 20  # bytes per part of a data object's multipart upload
SLICE_BYTES = 1 << 20  # bytes read, hashed and handed to the store between two give-way points


class TierVerifyError(StorageError):
    """An uploaded object does not match what was sent (size or checksum)."""

    code = "tier_verify_failed"

    def __init__(self, key: str, what: str, expected: object, found: object) -> None:
        self.key = key
        super().__init__(f"object {key!r}: {what} is {found}, expected {expected}")


def _optional(value: int) -> int | None:
    return None if value < 0 else value


def build_manifest(
    shard: ShardTier,
    log: TieredShardLog,
    meta: SegmentMeta,
    checksum: str,
    now: int,
    rewritten: tuple[tuple[int, int], ...] | None = None,
) -> Manifest:
    """The manifest of ``meta``'s segment from its metadata and the shard's index entries (or, for
    a rewritten file not yet swapped in, its sparse offset index ``rewritten`` and no dead ranges)."""
    store, prefix = log.index.store, log.index.prefix
    first, last = meta.base_offset, meta.last_offset
    empty = meta.record_count == 0
    return Manifest(
        namespace=shard.namespace,
        ns_id=shard.ns_id,
        shard=shard.shard,
        base_offset=first,
        last_offset=last,
        generation=f"{meta.tier_generation:016x}",
        data_object=shard.data_key(meta),
        size_bytes=meta.size_bytes,
        checksum=checksum,
        record_count=meta.record_count,
        live_count=meta.live_count,
        first_timestamp=None if empty else meta.first_timestamp,
        min_timestamp=None if empty else meta.min_timestamp,
        max_timestamp=None if empty else meta.max_timestamp,
        min_expire_at=_optional(meta.min_expire_at),
        max_expire_at=_optional(meta.max_expire_at),
        has_unbounded=meta.has_unbounded,
        content_flags=meta.content_flags,
        created_at=now,
        dead_ranges=dead_ranges(store.dead_offsets(prefix, first, last + 1)) if rewritten is None else (),
        offset_index=pairs(store.offset_entries_in(prefix, first, last + 1)) if rewritten is None else rewritten,
        time_index=pairs(store.time_entries_in(prefix, first, last, meta.min_timestamp)),
    )


def multipart_etag(part_md5s: list[bytes]) -> str:
    """The S3 ETag of a multipart upload of parts with these MD5 digests."""
    return f"{hashlib.md5(b''.join(part_md5s), usedforsecurity=False).hexdigest()}-{len(part_md5s)}"


def upload_segment(
    shard: ShardTier,
    log: TieredShardLog,
    meta: SegmentMeta,
    now: int,
    *,
    source: Segment | None = None,
    offset_index: tuple[tuple[int, int], ...] | None = None,
    pace: Callable[[], None] = no_pause,
) -> int:
    """Steps 1–4 for ``meta`` (a copy, naming the generation to upload under) from the segment's local
    file, or from ``source`` (a rewritten file, with its ``offset_index``); returns the bytes uploaded.

    ``pace`` is called before each ``SLICE_BYTES`` read and each chunk read back (the offload passes
    :meth:`storage_engine.rules.pacing.Slices.check`: the upload gives way to appends in flight there)."""
    tier = shard.tier
    key = shard.data_key(meta)
    seg = source if source is not None else log.local_file(meta.base_offset)
    if seg is None or seg.size != meta.size_bytes:
        found = "gone" if seg is None else f"{seg.size} bytes"
        raise TierVerifyError(key, "the local segment file", f"{meta.size_bytes} bytes", found)
    content = checksums.content_hash()
    part_md5s: list[bytes] = []
    with_md5 = tier.content_etags
    size = meta.size_bytes

    def parts() -> Iterator[bytes]:
        """The file in ``SLICE_BYTES`` pieces, hashed as they are read (one pass over the file), with a
        give-way point before each; the store cuts them into parts of ``PART_BYTES``."""
        for pos in range(0, size, PART_BYTES):
            end = min(size, pos + PART_BYTES)
            part_md5 = hashlib.md5(usedforsecurity=False) if with_md5 else None
            for at in range(pos, end, SLICE_BYTES):
                pace()
                piece = seg.read(at, min(SLICE_BYTES, end - at))
                content.update(piece)
                if part_md5 is not None:
                    part_md5.update(piece)
                yield piece
            if part_md5 is not None:
                part_md5s.append(part_md5.digest())

    seg.retain()
    try:
        tier.put_parts(key, parts(), PART_BYTES)
    finally:
        seg.release()
    info = tier.head(key)
    if info.size != size:
        raise TierVerifyError(key, "the size", size, info.size)
    etag = (info.etag or "").strip('"').lower()
    if not with_md5 or etag != multipart_etag(part_md5s):  # no content ETag, or another scheme: read back
        back, digest = tier.digest(key, sink=lambda _chunk: pace())
        if (back, digest) != (size, content.hexdigest()):
            raise TierVerifyError(key, "the checksum read back", content.hexdigest(), f"{digest} ({back} bytes)")
    manifest = build_manifest(shard, log, meta, checksums.label(content), now, offset_index).to_bytes()
    manifest_key = shard.manifest_key(meta)
    tier.put(manifest_key, manifest)
    back_manifest = tier.get(manifest_key)
    if back_manifest != manifest:
        raise TierVerifyError(
            manifest_key, "the manifest read back", f"{len(manifest)} bytes", f"{len(back_manifest)} bytes"
        )
    tier.make_durable(key, manifest_key)
    return size
