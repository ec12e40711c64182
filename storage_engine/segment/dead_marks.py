"""Dead marks from the TTL scan (DESIGN §3, layer 2): what one WriteBatch of expired
entries holds.

A dead mark is an empty value at ``P | offset`` in the ``dead`` column family
(:mod:`storage_engine.segment.index_keys`), or the deadline of the bulk-loaded TTL
entry that killed the record (:func:`~storage_engine.segment.index_keys.deadline_value`).
Marking a record dead deletes its tag entries, its key entry where it still points
at the record, and its TTL entry, in the same WriteBatch as the mark; the
segment's live count and dead bytes follow in its metadata.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from rocksdict import WriteBatch

from storage_engine.api import Record
from storage_engine.formats.codec import encoded_size
from storage_engine.lifecycle import TTLEntry
from storage_engine.rules.figures import FiguresCache
from storage_engine.segment.index_keys import CF_DEAD, CF_TTL, deadline_value, offset_key, ttl_key
from storage_engine.segment.meta import SegmentMeta
from storage_engine.segment.shard_index import ShardIndex


def mark_expired_entries(
    wb: WriteBatch,
    index: ShardIndex,
    metas: list[SegmentMeta],
    entries: Sequence[TTLEntry],
    found: dict[int, Record],
    figures: FiguresCache,
) -> tuple[dict[int, SegmentMeta], int, int]:
    """Put into ``wb``, per TTL entry: its record's index entries' deletion, the TTL
    entry's deletion and the record's dead mark; account the dead records to their
    segment in ``metas`` (the live segments, in offset order). Call it under the
    shard's write lock.

    ``found`` holds the records whose entry says they have a key or tags (only
    those are read). An entry whose record is gone (below the log start, in a
    segment being deleted) just has its TTL entry deleted. The common entry (no
    key, no tags) costs two WriteBatch operations, its keys sliced from the TTL key
    the scan read (``P | offset`` is its tail), and a bisect only when it lies in
    another segment than the entry before.

    A record killed by a bulk-loaded deadline (not its own) keeps that deadline
    on its dead mark, and its segment's expiry figures are forgotten. Returns the
    segments whose metadata changed (by base offset), the records marked dead and
    the index entries deleted.
    """
    store = index.store
    prefix = index.prefix
    ttl_handle, dead_handle = store.handle(CF_TTL), store.handle(CF_DEAD)
    ns_id, shard = index.ns_id, index.shard
    unknown = any(e.flags < 0 for e in entries)
    bases = [m.base_offset for m in metas]
    delete, put = wb.delete, wb.put
    dirty: dict[int, SegmentMeta] = {}
    expired = deleted = 0
    marked: set[int] = set()
    meta: SegmentMeta | None = None
    lo, hi = 0, -1  # the offsets of ``meta``
    for e in entries:
        offset = e.offset
        if not lo <= offset <= hi:
            i = bisect.bisect_right(bases, offset) - 1
            meta = metas[i] if i >= 0 and offset <= metas[i].last_offset else None
            lo, hi = (meta.base_offset, meta.last_offset) if meta is not None else (0, -1)
        key = e.key or ttl_key(e.expire_at, ns_id, shard, offset)
        flags = e.flags
        if not flags:  # no key, no tags: nothing to read or unindex
            delete(key, ttl_handle)
            deleted += 1
            if meta is None:
                continue
            if unknown:
                marked.add(offset)
            put(key[8:], b"", dead_handle)  # the TTL key's tail is P | offset: the dead mark's key
            meta.live_count -= 1
            meta.dead_bytes += e.size
            dirty[lo] = meta
            expired += 1
            continue
        r = found.get(offset)
        # An entry of unknown flags may be a bulk-loaded one (TTL backfill) for a record that
        # already died by another entry: drop it, never count the record dead twice.
        again = flags < 0 and (offset in marked or store.is_dead(prefix, offset))
        if meta is None or r is None or again:
            delete(key, ttl_handle)
            deleted += 1
            continue
        marked.add(offset)
        deleted += index.unindex(wb, offset, r.key, r.tags, e.expire_at)
        # A bulk-loaded deadline (not the record's own) is kept on the mark: verify needs to know why.
        bulk = r.expire_at != e.expire_at
        put(offset_key(prefix, offset), deadline_value(e.expire_at) if bulk else b"", dead_handle)
        if bulk:  # killed before its own deadline, maybe: its expiry key changes
            figures.forget(meta.base_offset)
        meta.live_count -= 1
        meta.dead_bytes += e.size if flags >= 0 else encoded_size(r)
        dirty[lo] = meta
        expired += 1
    return dirty, expired, deleted


def mark_dead(
    wb: WriteBatch, index: ShardIndex, offset: int, size: int, meta: SegmentMeta, dirty: dict[int, SegmentMeta]
) -> None:
    """Put into ``wb`` the dead mark of the record at ``offset`` (``size`` bytes) and account it
    to its segment ``meta``, marked ``dirty``; its index entries are the caller's to delete."""
    wb.put(offset_key(index.prefix, offset), b"", index.store.handle(CF_DEAD))
    meta.live_count -= 1
    meta.dead_bytes += size
    dirty[meta.base_offset] = meta
