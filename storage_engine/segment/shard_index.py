"""One shard's view of the index store: its key prefix, what an appended batch adds, its lookups."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from rocksdict import WriteBatch

from storage_engine.segment.index_keys import (
    CF_KEYS,
    CF_OFFSETS,
    CF_TAGS,
    CF_TIMES,
    CF_TTL,
    INDEX_ONLY_CFS,
    POSITION,
    SHARD_PREFIX,
    TTL_VALUE_FORMAT,
    U64,
    shard_prefix,
    tag_key,
    ttl_key,
)
from storage_engine.segment.index_records import Checkpoint
from storage_engine.segment.index_store import IndexStore
from storage_engine.segment.meta import SegmentMeta


class IndexedBatch(Protocol):
    """What indexing and accounting one batch reads: an appended batch
    (:class:`~storage_engine.formats.codec.EncodedRecords`) or one re-read from a segment file
    at recovery (:class:`~storage_engine.segment.recovery.RecoveredBatch`)."""

    @property
    def count(self) -> int: ...
    @property
    def last_delta(self) -> int: ...
    @property
    def first_timestamp(self) -> int: ...
    @property
    def min_timestamp(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def max_expire_at(self) -> int: ...
    @property
    def min_expire_at(self) -> int: ...
    @property
    def has_unbounded(self) -> bool: ...
    @property
    def flags(self) -> int: ...
    @property
    def keys(self) -> list[tuple[int, bytes]]: ...
    @property
    def tags(self) -> list[tuple[int, str]]: ...
    @property
    def expires(self) -> list[tuple[int, int, int, int]]: ...


class ShardIndex:
    """The index entries of one shard: writes them per batch and answers lookups.

    Both log adapters index through this class: the ``segment`` adapter passes
    file positions (so it also gets the sparse ``offsets`` index), the
    ``rocksdb`` adapter passes ``position=None`` (its records family is keyed
    by offset already).
    """

    def __init__(self, store: IndexStore, ns_id: int, shard: int) -> None:
        self.store = store
        self.prefix = shard_prefix(ns_id, shard)
        self.ns_id = ns_id
        self.shard = shard
        self.checkpoint = store.checkpoint(self.prefix) or Checkpoint()
        # No column family handles are kept here: any live handle keeps RocksDB open after close.
        self._ttl_tail = SHARD_PREFIX.pack(ns_id, shard)

    def add_batch(
        self,
        wb: WriteBatch,
        *,
        base_offset: int,
        last_offset: int,
        max_timestamp: int,
        length: int,
        keys: list[tuple[int, bytes]],
        tags: list[tuple[int, str]],
        expires: list[tuple[int, int, int, int]],
        segment_base: int,
        position: int | None,
        first_in_segment: bool,
        interval_bytes: int,
    ) -> None:
        """Put the entries of one batch into ``wb`` and advance the checkpoint (not yet written)."""
        cp = self.checkpoint
        prefix = self.prefix
        handle = self.store.handle
        sparse = first_in_segment or cp.bytes_since_entry >= interval_bytes
        if sparse:
            if position is not None:
                wb.put(prefix + U64.pack(base_offset), POSITION.pack(segment_base, position), handle(CF_OFFSETS))
            cp.bytes_since_entry = 0
        cp.bytes_since_entry += length
        if max_timestamp > cp.max_timestamp:
            cp.max_timestamp = max_timestamp
        if sparse and cp.max_timestamp > cp.time_entry_timestamp:
            wb.put(prefix + U64.pack(cp.max_timestamp), U64.pack(last_offset), handle(CF_TIMES))
            cp.time_entry_timestamp = cp.max_timestamp
        if keys:
            h = handle(CF_KEYS)
            for delta, key in keys:
                wb.put(prefix + key, U64.pack(base_offset + delta), h)
        if tags:
            h = handle(CF_TAGS)
            for delta, tag in tags:
                raw = tag.encode()
                wb.put(prefix + bytes((len(raw),)) + raw + U64.pack(base_offset + delta), b"", h)
        if expires:
            h = handle(CF_TTL)
            first: bytes | None = None
            for delta, expire_at, size, flags in expires:
                value = TTL_VALUE_FORMAT.pack(min(size, 0xFFFFFFFF), flags)
                key = U64.pack(expire_at) + self._ttl_tail + U64.pack(base_offset + delta)
                wb.put(key, value, h)
                if first is None or key < first:
                    first = key
            if first is not None:
                self.store.ttl_pending(wb, self.ns_id, first)  # the next TTL scan starts at or below it
        cp.next_offset = last_offset + 1
        cp.segment_base = segment_base
        cp.position = (position or 0) + length

    def index_batch(
        self,
        wb: WriteBatch,
        batch: IndexedBatch,
        meta: SegmentMeta,
        *,
        base_offset: int,
        length: int,
        position: int | None,
        first_in_segment: bool,
        interval_bytes: int,
        now: int,
    ) -> None:
        """Index ``batch``, stored at ``base_offset`` in segment ``meta`` (``length`` bytes at
        ``position``), into ``wb`` and account it to ``meta``: what both an append and
        recovery's re-indexing do per batch."""
        last = base_offset + batch.last_delta
        self.add_batch(
            wb,
            base_offset=base_offset,
            last_offset=last,
            max_timestamp=batch.max_timestamp,
            length=length,
            keys=batch.keys,
            tags=batch.tags,
            expires=batch.expires,
            segment_base=meta.base_offset,
            position=position,
            first_in_segment=first_in_segment,
            interval_bytes=interval_bytes,
        )
        meta.account(
            count=batch.count,
            nbytes=length,
            last_offset=last,
            first_timestamp=batch.first_timestamp,
            min_timestamp=batch.min_timestamp,
            max_timestamp=batch.max_timestamp,
            max_expire_at=batch.max_expire_at,
            has_unbounded=batch.has_unbounded,
            now=now,
            flags=batch.flags,
            min_expire_at=batch.min_expire_at,
        )

    def unindex(
        self, wb: WriteBatch, offset: int, key: bytes | None, tags: Sequence[str], expire_at: int | None
    ) -> int:
        """Put into ``wb`` the deletion of a record's tag entries, its key entry if it still
        points at ``offset``, then its TTL entry (DESIGN §3 order); returns entries deleted."""
        store = self.store
        prefix = self.prefix
        n = 0
        if tags:
            h = store.handle(CF_TAGS)
            for tag in dict.fromkeys(tags):
                wb.delete(tag_key(prefix, tag, offset), h)
                n += 1
        if key is not None and self.get_key(key) == offset:
            wb.delete(prefix + key, store.handle(CF_KEYS))
            n += 1
        if expire_at is not None:
            wb.delete(ttl_key(expire_at, self.ns_id, self.shard, offset), store.handle(CF_TTL))
            n += 1
        return n

    def commit(self, wb: WriteBatch, metas: Iterable[SegmentMeta]) -> None:
        """Add the checkpoint and segment metadata to ``wb``; the caller writes it."""
        for meta in metas:
            self.store.put_segment(wb, self.prefix, meta)
        self.store.put_checkpoint(wb, self.prefix, self.checkpoint)

    def reset(self, wb: WriteBatch, start_offset: int, segment_base: int) -> None:
        """Drop every entry of the shard (ttl included) to re-index it from ``start_offset``."""
        self.store.drop_prefix(wb, self.prefix, INDEX_ONLY_CFS)
        self.store.drop_ttl(wb, self.ns_id, self.shard)
        self.checkpoint = Checkpoint(next_offset=start_offset, segment_base=segment_base)

    # -- lookups ---------------------------------------------------------------------
    def floor_offset(self, offset: int) -> tuple[int, int, int] | None:
        return self.store.floor_offset(self.prefix, offset)

    def floor_time(self, below: int) -> int | None:
        return self.store.floor_time(self.prefix, below)

    def get_key(self, key: bytes) -> int | None:
        return self.store.get_key(self.prefix, key)

    def tag_offsets(self, tag: str, start: int, end: int, limit: int) -> list[int]:
        return self.store.tag_offsets(self.prefix, tag, start, end, limit)
