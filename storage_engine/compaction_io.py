"""How key compaction reads the segments of a shard of any adapter: its records, its
keys (hashed, vectorised, from segment files: :mod:`storage_engine.columnar`), its
columns for a dry run, and what a rewrite would reclaim."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any, Protocol

import numpy as np

from storage_engine.api import Record, SegmentInfo
from storage_engine.codec import ATTR_KEY, HEADER_SIZE, BatchHeader, RecordColumns, batch_columns, batch_keys
from storage_engine.columnar import batch_groups, chunk_layout
from storage_engine.keymap import hash_keys, layout_key_hashes
from storage_engine.lifecycle import LifecycleShard

COLUMN_CHUNK = 1_000  # records per RecordColumns for adapters that yield Record objects


# -- what a shard of any adapter provides ----------------------------------------------------------
class CompactableShard(LifecycleShard, Protocol):
    """What key compaction asks of a shard of any adapter beyond the lifecycle's
    (``rewrite_segment(base, now, remove)`` is :class:`LifecycleShard`'s)."""


def segment_records(shard: Any, base: int) -> Iterator[Record]:
    """Every stored record of a sealed segment (dead ones included), in offset order."""
    hook = getattr(shard, "compaction_records", None)
    if hook is not None:
        yield from hook(base)
        return
    for m in shard.view.metas():
        if m.base_offset == base:
            yield from shard._segment_records(m)
            return


def _segment_file(shard: Any, base: int) -> Any:
    """The segment adapter's file of segment ``base`` (``None`` for other adapters)."""
    if getattr(shard, "compaction_records", None) is not None:
        return None
    lookup = getattr(shard, "_segment_file", None)
    return None if lookup is None else lookup(base)


def segment_keys(shard: Any, base: int) -> Iterator[tuple[list[int], list[bytes], int]]:
    """``(offsets, keys, records read)`` of the keyed records of a sealed segment, a batch
    (or a chunk) at a time, in offset order; from files only keys and offsets are decoded."""
    seg = _segment_file(shard, base)
    if seg is None:
        for chunk in _chunks(segment_records(shard, base)):
            keyed = [r for r in chunk if r.key is not None]
            yield [r.offset for r in keyed], [r.key for r in keyed if r.key is not None], len(chunk)
        return
    seg.retain()
    try:
        for _p, h, buf, off in seg.iter_batches(0, seg.size, verify=False):
            offsets, keys = batch_keys(buf, off, h, path=str(seg.path))
            yield offsets, keys, h.record_count
    finally:
        seg.release()


def segment_key_hashes(shard: Any, base: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, int]]:
    """``(offsets, h, c, records read)`` of the keyed records of a sealed segment (their key
    hashes, :func:`storage_engine.keymap.key_hashes`), in offset order; from files a read
    chunk of batches at a time, vectorised (:func:`storage_engine.columnar.chunk_layout`)."""
    seg = _segment_file(shard, base)
    if seg is None:
        for offsets, keys, count in segment_keys(shard, base):
            h, c = hash_keys(keys)
            yield np.array(offsets, dtype=np.int64), h, c, count
        return
    path = str(seg.path)

    def hashed(buf: bytes, group: list[tuple[int, BatchHeader]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        layout = chunk_layout(buf, group, path=path)
        idx = np.flatnonzero(layout.attrs & ATTR_KEY)
        h, c = layout_key_hashes(layout, idx)
        return layout.offsets[idx], h, c, layout.starts.size

    seg.retain()
    try:
        for buf, group in batch_groups(seg.iter_batches(0, seg.size, verify=False)):
            yield hashed(buf, [(off, h) for _p, h, off in group])
    finally:
        seg.release()


def segment_columns(shard: Any, base: int) -> Iterator[tuple[RecordColumns, list[int]]]:
    """``(columns, stored size of each record)`` of a sealed segment, a batch (or a chunk)
    at a time; the sizes are what a segment file spends on each record."""
    seg = _segment_file(shard, base)
    if seg is None:
        from storage_engine.codec import encoded_size

        for chunk in _chunks(segment_records(shard, base)):
            yield RecordColumns.of_records(chunk), [encoded_size(r) for r in chunk]
        return
    seg.retain()
    try:
        for _p, h, buf, off in seg.iter_batches(0, seg.size, verify=False):
            cols = batch_columns(buf, off, h, path=str(seg.path))
            yield cols, [e - s for s, e in zip(cols.starts, cols.ends, strict=True)]
    finally:
        seg.release()


def _chunks(records: Iterator[Record]) -> Iterator[list[Record]]:
    chunk: list[Record] = []
    for r in records:
        chunk.append(r)
        if len(chunk) >= COLUMN_CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def reclaimable_bytes(shard: Any, info: SegmentInfo, remove: Collection[int]) -> int:
    """Bytes a rewrite of segment ``info`` without ``remove`` reclaims, exactly as the adapter's
    ``rewrite_segment`` (or a whole drop when nothing would remain) reports them."""
    if not remove:
        return 0
    if len(remove) >= info.record_count:
        return info.size_bytes
    hook = getattr(shard, "compaction_removed_bytes", None)
    if hook is not None:  # memory adapter
        return int(hook(info.base_offset, remove))
    seg = _segment_file(shard, info.base_offset)
    if seg is None:  # rocksdb adapter: one key + value per record
        from storage_engine.rocksdb_adapter import _KEY_BYTES

        store, prefix = shard.index.store, shard.index.prefix
        return sum(
            len(v) + _KEY_BYTES for o, v in store.records(prefix, info.base_offset, info.last_offset + 1) if o in remove
        )
    size = 0
    seg.retain()
    try:
        for _p, h, buf, off in seg.iter_batches(0, seg.size, verify=False):
            cols = batch_columns(buf, off, h, path=str(seg.path), times=False)
            kept = [e - s for o, s, e in zip(cols.offsets, cols.starts, cols.ends, strict=True) if o not in remove]
            if len(kept) == len(cols.offsets):
                size += h.length
            elif kept:
                size += HEADER_SIZE + sum(kept)
    finally:
        seg.release()
    return max(0, info.size_bytes - size)
