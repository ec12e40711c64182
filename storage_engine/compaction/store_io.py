"""What key compaction asks of a shard (:class:`CompactableShard`), and the two ways a
shard answers it: from :class:`~storage_engine.api.Record` objects
(:class:`RecordCompactionReads`, the ``memory`` and ``rocksdb`` adapters) or from a
segment file, vectorised (the ``file_*`` functions, which the ``segment`` adapter's
shard calls with its files; :mod:`storage_engine.formats.columnar`).

Nothing here knows an adapter: each adapter's shard implements the protocol, so
compaction imports no adapter module (``tests/storage_engine/test_import_layers.py``).
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import Protocol

import numpy as np

from storage_engine.api import Record, SegmentInfo
from storage_engine.compaction.keymap import hash_keys, layout_key_hashes
from storage_engine.formats.batch_columns import RecordColumns, batch_columns
from storage_engine.formats.codec import ATTR_KEY, HEADER_SIZE, BatchHeader, encoded_size
from storage_engine.formats.columnar import batch_groups, chunk_layout
from storage_engine.lifecycle import LifecycleShard

COLUMN_CHUNK = 1_000  # records per RecordColumns for adapters that yield Record objects

KeyHashes = tuple[np.ndarray, np.ndarray, np.ndarray, int]
"""``(offsets, h, c, records read)``: the keyed records of a run of a segment, their key
hashes (:func:`storage_engine.compaction.keymap.key_hashes`) and how many records were read."""

Columns = tuple[RecordColumns, list[int]]
"""``(columns, stored size of each record)`` of a run of a segment."""


# -- what a shard of any adapter provides ----------------------------------------------------------
class CompactableShard(LifecycleShard, Protocol):
    """What key compaction asks of a shard of any adapter beyond the lifecycle's
    (``rewrite_segment(base, now, remove)`` is :class:`LifecycleShard`'s)."""

    def compaction_key_hashes(self, base: int) -> Iterator[KeyHashes]:
        """The keyed records of sealed segment ``base`` (dead ones included), in offset order,
        a batch or a chunk at a time."""
        ...

    def compaction_columns(self, base: int) -> Iterator[Columns]:
        """Every stored record of sealed segment ``base`` as columns, with what the store spends
        on each record, a batch or a chunk at a time (a dry run's rewrite)."""
        ...

    def removed_bytes(self, info: SegmentInfo, remove: Collection[int]) -> int:
        """Bytes a rewrite of segment ``info`` without the records ``remove`` (some, not all of
        them) reclaims, exactly as the shard's ``rewrite_segment`` reports them."""
        ...

    def cleaner_checkpoint(self) -> bytes | None:
        """The persisted cleaner checkpoint (``CleanerState.pack()``), ``None`` before the first."""
        ...

    def save_cleaner_checkpoint(self, raw: bytes) -> None:
        """Persist the cleaner checkpoint atomically."""
        ...


def reclaimable_bytes(shard: CompactableShard, info: SegmentInfo, remove: Collection[int]) -> int:
    """Bytes a rewrite of segment ``info`` without ``remove`` reclaims, exactly as the adapter's
    ``rewrite_segment`` (or a whole drop when nothing would remain) reports them."""
    if not remove:
        return 0
    if len(remove) >= info.record_count:
        return info.size_bytes
    return shard.removed_bytes(info, remove)


# -- shards that hand over Record objects -----------------------------------------------------------
class RecordCompactionReads(abc.ABC):
    """:meth:`CompactableShard.compaction_key_hashes` and :meth:`~CompactableShard.compaction_columns`
    from :meth:`compaction_records`, a chunk of ``COLUMN_CHUNK`` records at a time; the keys
    are hashed the way segment files' are (:func:`storage_engine.compaction.keymap.hash_keys`)."""

    @abc.abstractmethod
    def compaction_records(self, base: int) -> Iterable[Record]:
        """Every stored record of sealed segment ``base`` (dead ones included), in offset order."""

    def compaction_key_hashes(self, base: int) -> Iterator[KeyHashes]:
        for chunk in _chunks(self.compaction_records(base)):
            keyed = [r for r in chunk if r.key is not None]
            h, c = hash_keys([r.key for r in keyed if r.key is not None])
            yield np.array([r.offset for r in keyed], dtype=np.int64), h, c, len(chunk)

    def compaction_columns(self, base: int) -> Iterator[Columns]:
        for chunk in _chunks(self.compaction_records(base)):
            yield RecordColumns.of_records(chunk), [encoded_size(r) for r in chunk]


def _chunks(records: Iterable[Record]) -> Iterator[list[Record]]:
    chunk: list[Record] = []
    for r in records:
        chunk.append(r)
        if len(chunk) >= COLUMN_CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


# -- segment files ------------------------------------------------------------------------------
class SegmentFile(Protocol):
    """What compaction reads of a segment file (:class:`storage_engine.segment.segment.Segment`)."""

    path: Path
    size: int

    def retain(self) -> None: ...

    def release(self) -> None: ...

    def iter_batches(
        self, start: int, end: int, *, verify: bool = ...
    ) -> Iterator[tuple[int, BatchHeader, bytes, int]]:
        """``(file position, header, read chunk, offset in the chunk)`` of each batch."""
        ...


def file_key_hashes(seg: SegmentFile) -> Iterator[KeyHashes]:
    """:meth:`CompactableShard.compaction_key_hashes` of a segment file: a read chunk of batches
    at a time, vectorised (:func:`storage_engine.formats.columnar.chunk_layout`)."""
    path = str(seg.path)

    def hashed(buf: bytes, group: list[tuple[int, BatchHeader]]) -> KeyHashes:
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


def file_columns(seg: SegmentFile) -> Iterator[Columns]:
    """:meth:`CompactableShard.compaction_columns` of a segment file, a batch at a time; the
    sizes are what the file spends on each record."""
    seg.retain()
    try:
        for _p, h, buf, off in seg.iter_batches(0, seg.size, verify=False):
            cols = batch_columns(buf, off, h, path=str(seg.path))
            yield cols, [e - s for s, e in zip(cols.starts, cols.ends, strict=True)]
    finally:
        seg.release()


def file_removed_bytes(seg: SegmentFile, info: SegmentInfo, remove: Collection[int]) -> int:
    """:meth:`CompactableShard.removed_bytes` of a segment file: a batch keeping every record is
    copied as it is, one keeping some is rebuilt (header + kept records), one keeping none
    goes."""
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
