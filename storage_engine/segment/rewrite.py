"""Rewriting one sealed segment file without some of its records: the ``.cleaned`` file.

:class:`SegmentRewrite` streams ``<base>.log`` a read chunk of batches at a time
and writes what stays to ``<base>.log.cleaned``, in the same batch format
(:mod:`storage_engine.formats.codec`) with the same offsets: a batch that loses records
keeps its records' offsets (gaps are legal; the header is rebuilt by
:func:`storage_engine.formats.columnar.rebuild_many`, the records are copied as encoded),
a batch that keeps every record is copied byte for byte, a batch that keeps none
is left out. The file is only started at the first batch that changes (the
unchanged prefix is copied then), so a segment where nothing goes writes nothing.

What goes: dead records (marked in the index), expired ones (marked dead with
their index entries as the walk meets them, through the shard's ``kill``, a chunk
per WriteBatch), and what the removal rule says. Tag and TTL entries of removed
records go into the swap's WriteBatch; removed records that may be their key's
latest entry are listed in ``check_keys`` for the swap to unindex. So the new file
holds exactly the records that are not dead, and the index never points at a
removed one.

Memory: the read chunk (``SCAN_CHUNK``), a 256 KiB output buffer, the columns of
the chunk's batches, a chunk of expired records, the new sparse offset entries (16
bytes per ``index_interval_bytes`` of output) and, for removed records that carry
tags, a deadline or their key's latest entry, their index deletions.

The swap itself (``.cleaned`` → ``.swap`` → ``.log``, with the index) is
:meth:`storage_engine.segment.log.ShardLog.rewrite_segment`.
"""

from __future__ import annotations

import os
import struct
from array import array
from collections.abc import Callable
from pathlib import Path

import numpy as np
from rocksdict import WriteBatch

from storage_engine.api import Record, SegmentState
from storage_engine.errors import CorruptSegmentError
from storage_engine.formats.codec import (
    ATTR_EXPIRE,
    ATTR_KEY,
    FLAG_HAS_EXPIRE,
    FLAG_HAS_TAGS,
    FLAG_HAS_UNBOUNDED,
    RECORD_FIXED_SIZE,
    BatchHeader,
    decode_record,
)
from storage_engine.formats.columnar import Layout, batch_groups, chunk_layout, layout_columns, rebuild_many
from storage_engine.lifecycle import KEEP, SUPERSEDED, RemovalRule, ShardWork
from storage_engine.segment.meta import SegmentMeta
from storage_engine.segment.segment import CLEANED_SUFFIX, Segment, file_name
from storage_engine.segment.shard import UNINDEX_CHUNK
from storage_engine.segment.shard_index import ShardIndex

_WRITE_CHUNK = 256 * 1024  # bytes a rewrite buffers before one pwrite
_BATCH_BASE = struct.Struct(">Q")  # a batch header's base_offset, at byte 12
_MAX_EXPIRE = struct.Struct(">q")  # a batch header's max_expire_at, at byte 52
_INDEXED_BY_RECORD = FLAG_HAS_TAGS | FLAG_HAS_EXPIRE  # entries a removed record takes with it


class SegmentRewrite:
    """One rewrite of the sealed segment ``seg`` into ``<base>.log.cleaned`` (:meth:`write`).

    After :meth:`write`: ``meta`` is the new file's metadata but for its counts
    (``kept`` records, ``size`` bytes), ``sparse`` its sparse offset entries as
    (batch base offset, position) pairs, ``check_keys`` the removed records whose
    key entry may still point at them; ``wb`` (the swap's WriteBatch) holds the
    removed records' tag and TTL deletions and ``work`` what was done so far.
    """

    wb: WriteBatch

    def __init__(
        self,
        seg: Segment,
        rule: RemovalRule | None,
        *,
        index: ShardIndex,
        ttl_ms: int | None,
        interval_bytes: int,
        now: int,
        kill: Callable[[list[Record]], ShardWork],
        directory: Path | None = None,
    ) -> None:
        old = seg.meta
        self.seg = seg
        self.rule = rule
        self.index = index
        self.ttl_ms = ttl_ms
        self.interval_bytes = interval_bytes
        self.now = now
        self.kill = kill
        self.can_expire = ttl_ms is not None or old.max_expire_at >= 0
        self.has_dead = old.live_count < old.record_count
        # Beside the segment's file (``directory``: the log's, for a segment served from the
        # object store, whose ``path`` names its object)
        self.path = (directory or seg.path.parent) / (file_name(seg.base_offset) + CLEANED_SUFFIX)
        self.work = ShardWork()
        self.sparse = array("Q")  # (batch base offset, position) pairs for the offsets index, 16 B each
        self.check_keys: list[tuple[int, bytes]] = []  # removed records whose key entry may point at them
        self.meta = old
        self.removed = self.kept = self.size = 0

    @property
    def needed(self) -> bool:
        """Whether anything could go: a rule, records that can expire, or dead ones."""
        return self.rule is not None or self.can_expire or self.has_dead

    def write(self) -> bool:
        """Stream the segment and write what stays; whether a ``.cleaned`` file was written
        (``False``: every batch kept every record). The file is fsynced and closed."""
        seg, rule, can_expire, has_dead = self.seg, self.rule, self.can_expire, self.has_dead
        base, old = seg.base_offset, seg.meta
        self.wb = self.index.store.batch()
        meta = self.meta = SegmentMeta(
            base,
            created_at=old.created_at,
            last_offset=old.last_offset,
            first_timestamp=old.first_timestamp,
            min_timestamp=old.min_timestamp,
            max_timestamp=old.max_timestamp,
            state=SegmentState.SEALED,
            modified_at=old.modified_at,
            min_expire_at=old.min_expire_at,  # a lower bound of what remains, enough for the figures
            # Where the bytes are stays the old segment's: an UPLOADING segment stays UPLOADING under its
            # generation (the next offload uploads the new file under the same names); a rewrite of an
            # offloaded segment sets its own (storage_engine.tier.rewrite).
            tier=old.tier,
            tier_generation=old.tier_generation,
            stale_generation=old.stale_generation,
        )
        sparse = self.sparse
        check_keys = self.check_keys
        work = self.work
        expired: list[Record] = []
        removed = kept = 0
        pos = since_entry = 0
        interval = self.interval_bytes
        fd = -1
        out = bytearray()
        try:
            seg.retain()
            try:
                fast = getattr(rule, "by_offset", None) if not can_expire and not has_dead else None
                for group_buf, group in batch_groups(seg.iter_batches(0, seg.size, verify=False)):
                    # batches the rule keeps whole from their offsets alone are copied undecoded
                    whole = [
                        fast is not None
                        and h.last_offset_delta == h.record_count - 1
                        and not h.flags & _INDEXED_BY_RECORD
                        and not _any(fast(h.base_offset, h.record_count))
                        for _fp, h, _off in group
                    ]
                    todo = [(off, h) for (_fp, h, off), w in zip(group, whole, strict=True) if not w]
                    n_keeps: list[int] = []
                    rebuilt: dict[int, bytes] = {}
                    if todo:
                        lay = chunk_layout(group_buf, todo, path=str(seg.path))
                        keep, gone = self._decide(group_buf, lay, todo, expired, check_keys)
                        removed += gone
                        n_keeps = np.add.reduceat(keep, lay.first[:-1], dtype=np.int64).tolist()
                        changed = [b for b, k in enumerate(n_keeps) if 0 < k < todo[b][1].record_count]
                        rebuilt = rebuild_many(lay, changed, keep)
                        if len(expired) >= UNINDEX_CHUNK:
                            work.add(self.kill(expired))
                            expired = []
                    b = -1  # the batch's index among those decided
                    for (file_pos, h, off), is_whole in zip(group, whole, strict=True):
                        n = n_keep = h.record_count
                        if not is_whole:
                            b += 1
                            n_keep = n_keeps[b]
                            if n_keep < n and fd < 0:  # the first batch that changes: start the new file
                                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                                _copy_range(seg, fd, file_pos)
                            if not n_keep:
                                continue
                        if n_keep == n:
                            data: bytes | memoryview = memoryview(group_buf)[off : off + h.length]
                            first, flags, max_exp = h.base_offset, h.flags, h.max_expire_at
                        else:
                            data = rebuilt[b]  # only the header and offset deltas changed
                            (first,) = _BATCH_BASE.unpack_from(data, 12)
                            flags = data[11]
                            (max_exp,) = _MAX_EXPIRE.unpack_from(data, 52)
                        if pos == 0 or since_entry >= interval:
                            sparse.append(first)
                            sparse.append(pos)
                            since_entry = 0
                        if fd >= 0:
                            out += data
                            if len(out) >= _WRITE_CHUNK:
                                _write_all(fd, out, pos + len(data) - len(out))
                                out.clear()
                        pos += len(data)
                        since_entry += len(data)
                        kept += n_keep
                        meta.max_expire_at = max(meta.max_expire_at, max_exp)
                        meta.has_unbounded = meta.has_unbounded or bool(flags & FLAG_HAS_UNBOUNDED)
                        meta.content_flags |= flags
            finally:
                seg.release()
            if expired:
                work.add(self.kill(expired))
            if fd >= 0:
                if out:
                    _write_all(fd, out, pos - len(out))
                os.fsync(fd)
        finally:
            if fd >= 0:
                os.close(fd)
        self.removed, self.kept, self.size = removed, kept, pos
        return fd >= 0

    def _decide(
        self,
        buf: bytes,
        lay: Layout,
        todo: list[tuple[int, BatchHeader]],
        expired: list[Record],
        check_keys: list[tuple[int, bytes]],
    ) -> tuple[np.ndarray, int]:
        """What a rewrite keeps of the batches ``todo`` of one read chunk (laid out in
        ``lay``): dead records go, expired ones go to ``expired`` (to be marked dead), the
        rule decides the rest (over the whole chunk when it has ``decide_layout``). Index
        entries of removed records that carry tags or a deadline go into ``wb``; removed
        records that may be their key's latest entry go to ``check_keys``. Returns the mask
        of kept records and how many the rule removed."""
        rule, now, work = self.rule, self.now, self.work
        vectorised = getattr(rule, "decide_layout", None)
        if vectorised is not None:
            decided = vectorised(lay)
        elif rule is not None:
            decided = np.concatenate(
                [np.array(rule(layout_columns(buf, lay, b)), dtype=np.uint8) for b in range(len(todo))]
            )
        else:
            decided = np.zeros(lay.starts.size, dtype=np.uint8)
        keep = decided == KEEP
        gone = ~keep
        if self.has_dead:
            dead = self.index.store.dead_offsets(self.index.prefix, todo[0][1].base_offset, todo[-1][1].last_offset + 1)
            if dead:
                is_dead = np.isin(lay.offsets, np.array(dead, dtype=np.int64))
                keep &= ~is_dead
                gone &= ~is_dead
        if self.can_expire:
            fx = lay.fixed(np.arange(lay.starts.size))
            late = ((fx["attrs"] & ATTR_EXPIRE) != 0) & (fx["exp"] <= now)
            ttl_ms = self.ttl_ms
            if ttl_ms is not None:
                late |= fx["ts"] + ttl_ms <= now
            late &= keep | gone  # dead records are not expired again
            for i in np.flatnonzero(late).tolist():
                expired.append(decode_record(bytes(buf[lay.starts[i] : lay.ends[i]]), int(lay.offsets[i])))
            keep &= ~late
            gone &= ~late
        gone_at = np.flatnonzero(gone)
        if gone_at.size:  # what the swap's WriteBatch must unindex
            attrs = lay.attrs[gone_at]
            batch_flags = np.array([h.flags & _INDEXED_BY_RECORD for _, h in todo], dtype=np.int64)
            indexed = np.repeat(batch_flags, np.diff(lay.first))[gone_at] != 0
            if indexed.any():
                by_record = indexed & (((attrs & ATTR_EXPIRE) != 0) | (lay.fixed(gone_at)["ntags"] != 0))
                for i in gone_at[by_record].tolist():
                    r = decode_record(bytes(buf[lay.starts[i] : lay.ends[i]]), int(lay.offsets[i]))
                    work.index_entries_deleted += self.index.unindex(self.wb, r.offset, None, r.tags, r.expire_at)
            latest = ((attrs & ATTR_KEY) != 0) & (decided[gone_at] != SUPERSEDED)
            for i in gone_at[latest].tolist():  # removed records that may be their key's latest
                q = int(lay.starts[i]) + RECORD_FIXED_SIZE
                check_keys.append((int(lay.offsets[i]), bytes(buf[q : q + int(lay.klen[i])])))
        return keep, int(gone_at.size)


def _any(decisions: np.ndarray | None) -> bool:
    """Whether a rule's decisions by offset remove anything (``None``: it cannot tell)."""
    return decisions is None or bool(decisions.any())


def _write_all(fd: int, data: bytes | bytearray, pos: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, pos)
        view, pos = view[n:], pos + n


def _copy_range(seg: Segment, fd: int, end: int) -> None:
    """Copy bytes ``[0, end)`` of ``seg`` to the start of ``fd`` (the unchanged prefix)."""
    pos = 0
    while pos < end:
        chunk = seg.read(pos, min(_WRITE_CHUNK, end - pos))
        if not chunk:
            raise CorruptSegmentError(str(seg.path), pos, "segment shorter than its batches")
        _write_all(fd, chunk, pos)
        pos += len(chunk)
