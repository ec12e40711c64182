"""Key and value formats of the RocksDB index store's column families
(:mod:`storage_engine.segment.index_store`).

Column families (key → value)::

    offsets      P | offset u64                      → segment_base u64 | position u64
                 sparse: the first batch of a segment, then a batch every
                 index_interval_bytes; the offset is the batch's base offset
    times        P | max_timestamp u64               → offset u64
                 sparse; "every record at or below offset has a timestamp
                 ≤ max_timestamp" (running maximum, so keys rise with offsets)
    keys         P | key bytes                       → offset u64 (latest record with the key)
    tags         P | len u8 | tag UTF-8 | offset u64 → b""
    ttl          expire_at u64 | ns_id u32 | shard u16 | offset u64 → size u32 | flags u8
                 records with an explicit expire_at, in deadline order; the value
                 is the record's encoded size and EXPIRE_HAS_KEY/EXPIRE_HAS_TAGS,
                 so the TTL scan reads only records whose key or tags it must
                 unindex (an empty value, from before, means "read it"); entries may
                 also be bulk-loaded from an SST file (:func:`ingest_ttl_file`, the
                 ``ttl-backfill`` Spark job), validated key by key first
    dead         P | offset u64                      → b"" or deadline u64
                 records the TTL scan (or a read check) marked dead: expired,
                 index entries gone, bytes not yet reclaimed. The value is the
                 deadline when a bulk-loaded TTL entry killed a record whose own
                 fields carry none (verify reads it; reads skip dead records)
    segments     P | base_offset u64                 → SegmentMeta.pack()
    checkpoints  P                                   → Checkpoint.pack()
    namespaces   name UTF-8                          → JSON {id, shards, policy, created_at}
                 b"\\x00next_id"                      → u32 (next namespace id)
    records      P | offset u64                      → one encoded record (``rocksdb`` adapter only)
"""

from __future__ import annotations

import struct

SHARD_PREFIX = struct.Struct(">IH")


NS_ID = struct.Struct(">I")


U64 = struct.Struct(">Q")


POSITION = struct.Struct(">QQ")


TTL_KEY = struct.Struct(">QIHQ")


TTL_VALUE_FORMAT = struct.Struct(">IB")


NEXT_NS_ID_KEY = b"\x00next_id"


NO_TTL_KEY_BELOW = b"\xff" * TTL_KEY.size  # a TTL scan's start for a namespace without entries


CF_OFFSETS = "offsets"


CF_TIMES = "times"


CF_KEYS = "keys"


CF_TAGS = "tags"


CF_TTL = "ttl"


CF_SEGMENTS = "segments"


CF_CHECKPOINTS = "checkpoints"


CF_NAMESPACES = "namespaces"


CF_RECORDS = "records"


CF_DEAD = "dead"


CF_CURSORS = "cursors"  # ns_id u32 | subscription name UTF-8 → JSON {created_at, cursors}


# What re-indexing a shard rebuilds: everything derived from the data, never the data itself.
# Dead marks go too: re-indexing gives expired records their TTL entries back, and the
# next scan marks them dead again.
INDEX_ONLY_CFS = (CF_OFFSETS, CF_TIMES, CF_KEYS, CF_TAGS, CF_SEGMENTS, CF_CHECKPOINTS, CF_DEAD)


# Families keyed P | offset, where a segment's entries are one key range.
OFFSET_KEYED_CFS = (CF_OFFSETS, CF_RECORDS, CF_DEAD)


# Key compaction's per-shard cleaner checkpoint: P → storage_engine.compaction.checkpoint.CleanerState.pack()
# (first dirty offset and cleaning passes). Kept when a shard is re-indexed (offsets never change).
CF_CLEANER = "cleaner"


INDEX_CFS = (
    CF_OFFSETS,
    CF_TIMES,
    CF_KEYS,
    CF_TAGS,
    CF_TTL,
    CF_SEGMENTS,
    CF_CHECKPOINTS,
    CF_NAMESPACES,
    CF_DEAD,
    CF_CURSORS,
    CF_CLEANER,
)


# Families whose keys start with the shard prefix (everything but ttl, namespaces and cursors).
SHARD_CFS = (CF_OFFSETS, CF_TIMES, CF_KEYS, CF_TAGS, CF_SEGMENTS, CF_CHECKPOINTS, CF_RECORDS, CF_DEAD, CF_CLEANER)


def shard_prefix(ns_id: int, shard: int) -> bytes:
    return SHARD_PREFIX.pack(ns_id, shard)


def tag_key(prefix: bytes, tag: str, offset: int) -> bytes:
    raw = tag.encode()
    return prefix + bytes((len(raw),)) + raw + U64.pack(offset)


def ttl_key(expire_at: int, ns_id: int, shard: int, offset: int) -> bytes:
    return TTL_KEY.pack(expire_at, ns_id, shard, offset)


def ttl_value(size: int, flags: int) -> bytes:
    return TTL_VALUE_FORMAT.pack(min(size, 0xFFFFFFFF), flags)


def ttl_bound(expire_at: int) -> bytes:
    """A key at or below every TTL-index key with this ``expire_at`` (and above every earlier one)."""
    return U64.pack(expire_at)


def deadline_value(expire_at: int) -> bytes:
    """The value of a dead mark left by a bulk-loaded TTL entry: its deadline (plain marks are empty)."""
    return U64.pack(expire_at)


def offset_key(prefix: bytes, offset: int) -> bytes:
    return prefix + U64.pack(offset)


def end_of(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix``."""
    as_int = int.from_bytes(prefix, "big") + 1
    return as_int.to_bytes(len(prefix), "big")


# -- bulk-loading the TTL index (``ingest_ttl_index``) -------------------------------------------
TTL_KEY_BYTES = TTL_KEY.size  # 22: expire_at u64 | ns_id u32 | shard u16 | offset u64


TTL_VALUE_BYTES = TTL_VALUE_FORMAT.size  # 5: size u32 | flags u8 (or b"": "read the record", see ttl_due)


def decode_ttl_key(key: bytes) -> tuple[int, int, int, int]:
    """``(expire_at, ns_id, shard, offset)`` of a TTL-index key (the inverse of :func:`ttl_key`)."""
    expire_at, ns_id, shard, offset = TTL_KEY.unpack(key)
    return int(expire_at), int(ns_id), int(shard), int(offset)
