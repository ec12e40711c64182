"""The log of one shard: its segment files, rolling, recovery and reads.

Writes come only from the shard's I/O worker (:mod:`storage_engine.segment.iopool`)
through :meth:`ShardLog.append_group`; reads come from any thread and see an
immutable :class:`LogView` that is swapped in only after the data is written
(and durable, per the durability mode).

Order of a group commit, which recovery relies on:

1. batches are written to the active segment (a roll first fsyncs and seals the
   full segment, then creates the next file and fsyncs the directory);
2. the segment is fsynced (``fsync`` mode; ``interval``/``none`` defer it);
3. the new view is published to readers;
4. one RocksDB WriteBatch puts the index entries, the segment metadata and the
   shard's checkpoint (how far it is indexed); then the producers are answered.

So after a crash the data can be ahead of the index (a torn or unindexed tail)
but, in ``fsync`` mode, never behind it.

Lifecycle: deleting segments is :class:`~storage_engine.segment.shard.ShardBase`'s
three-step protocol, ending here by renaming the file ``.deleted`` and
removing it once due (:meth:`ShardLog.remove_due_files`); rewriting a segment
without its dead records is :meth:`ShardLog.rewrite_segment`.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import threading
from array import array
from collections.abc import Collection, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from rocksdict import WriteBatch

from storage_engine.api import Record, SegmentInfo, SegmentState
from storage_engine.codec import (
    ATTR_EXPIRE,
    ATTR_KEY,
    FLAG_HAS_EXPIRE,
    FLAG_HAS_KEYS,
    FLAG_HAS_TAGS,
    FLAG_HAS_UNBOUNDED,
    HEADER_SIZE,
    RECORD_FIXED_SIZE,
    BatchHeader,
    EncodedRecords,
    decode_record,
    decode_records,
    encoded_size,
    expire_flags,
)
from storage_engine.codec import iter_records as iter_batch_records
from storage_engine.columnar import Layout, batch_groups, chunk_layout, layout_columns, rebuild_many
from storage_engine.compaction_io import Columns, KeyHashes, file_columns, file_key_hashes, file_removed_bytes
from storage_engine.errors import CorruptSegmentError
from storage_engine.lifecycle import KEEP, SUPERSEDED, Removal, RemovalRule, ShardWork, removal_rule
from storage_engine.policy import NodePolicy
from storage_engine.segment.datadir import fsync_dir
from storage_engine.segment.index_keys import CF_OFFSETS, offset_key
from storage_engine.segment.meta import SegmentMeta
from storage_engine.segment.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    SUFFIX,
    SWAP_SUFFIX,
    Segment,
    file_name,
    parse_file_name,
)
from storage_engine.segment.shard import INDEXED_FLAGS, UNINDEX_CHUNK, ShardBase

log = logging.getLogger(__name__)

_REINDEX_COMMIT_EVERY = 4096  # batches per WriteBatch while re-indexing at open
_READ_CHUNK = 256 * 1024
_POS = struct.Struct(">QQ")
_BATCH_BASE = struct.Struct(">Q")  # a batch header's base_offset, at byte 12
_MAX_EXPIRE = struct.Struct(">q")  # a batch header's max_expire_at, at byte 52
_INDEXED_BY_RECORD = FLAG_HAS_TAGS | FLAG_HAS_EXPIRE  # entries a removed record takes with it


@dataclass(frozen=True, slots=True)
class LogView:
    """What readers may see: segments in offset order and how much of the active one is committed."""

    log_start_offset: int
    end_offset: int
    segments: tuple[Segment, ...]
    bases: tuple[int, ...]
    active_size: int
    active_meta: SegmentMeta  # a copy; sealed segments' metadata no longer changes

    def committed_size(self, i: int) -> int:
        return self.active_size if i == len(self.segments) - 1 else self.segments[i].size

    def metas(self) -> list[SegmentMeta]:
        return [s.meta for s in self.segments[:-1]] + [self.active_meta]

    def due_layout(self) -> tuple[object, SegmentMeta]:
        """(an object every roll, drop and rewrite swap replaces, the active segment's metadata)."""
        return self.segments, self.active_meta


class ShardLog(ShardBase):
    """Segments of one shard. Build with :meth:`create` (new shard) or :meth:`open` (recovers it)."""

    view: LogView

    def __init__(self, *, directory: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.directory = directory
        self._segments: list[Segment] = []
        self._layout_changed = False  # segments left or were swapped: rebuild the view's tuples
        self._dropping: dict[int, Segment] = {}  # DELETING: out of the log, file not yet renamed
        self._trash: list[tuple[Segment, int, int]] = []  # (.deleted file, deleted at, delay ms)
        self._trash_lock = threading.Lock()
        self._reindex_all = False  # a rewrite swap was finished at open: rebuild every index entry

    # -- opening and recovery ---------------------------------------------------------
    @classmethod
    def create(cls, **kwargs: Any) -> ShardLog:
        """A new, empty shard: directory, first segment file, metadata and checkpoint."""
        self = cls(**kwargs)
        self.directory.mkdir(parents=True, exist_ok=True)
        now = self.clock.now_ms()
        self._segments = [Segment.create(self.directory, SegmentMeta(0, created_at=now, modified_at=now))]
        wb = self.index.store.batch()
        self.index.commit(wb, [self._segments[0].meta])
        self.index.store.write(wb)  # made durable by the synced namespace write that follows
        self._publish()
        return self

    @classmethod
    def open(cls, **kwargs: Any) -> ShardLog:
        """Open an existing shard and recover it (see :meth:`_recover`)."""
        self = cls(**kwargs)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._recover()
        self._publish()
        if self._dropping and self.failure is None:  # a deletion was interrupted: finish it
            metas = [seg.meta for seg in self._dropping.values()]
            self._finish_drop(metas, self.clock.now_ms(), 0, ShardWork())
        return self

    def _recover(self) -> None:
        """Bring files, index and metadata back in line after any shutdown.

        1. Segment files are the truth: metadata without a file is dropped;
           a file without metadata (created just before a crash) gets fresh
           metadata from its contents.
        2. Every batch of every segment is checked (header and CRC). At the
           first damaged batch: if its segment is sealed, the damage is real
           (sealed segments are fsynced before they are marked sealed) and the
           shard fails with CorruptSegmentError, files untouched for an
           operator; otherwise it is the torn tail of an interrupted write, so
           the file is cut there and any later segment removed, which keeps
           offsets dense.
        3. If the checkpoint (last indexed offset) is within the data, the
           batches after it are re-indexed. If it points past the data (data
           lost in ``interval``/``none`` mode, or the tail cut in step 2), every
           index entry of the shard is dropped and the shard re-indexed, so no
           entry points at missing data.
        """
        store = self.index.store
        prefix = self.index.prefix
        now = self.clock.now_ms()
        wb = store.batch()
        metas = {m.base_offset: m for m in store.segments(prefix)}
        files: dict[int, Path] = {}
        for entry in sorted(os.scandir(self.directory), key=lambda e: e.name):
            base = parse_file_name(entry.name)
            if base is not None:
                files[base] = Path(entry.path)
            elif entry.name.endswith((".tmp", DELETED_SUFFIX, CLEANED_SUFFIX)):
                # A deleted file nobody can hold any more, or an unfinished rewrite.
                os.unlink(entry.path)
            elif entry.name.endswith(SUFFIX + SWAP_SUFFIX):
                # A complete rewrite whose swap was decided (see rewrite_segment): finish it,
                # then rebuild the shard's index from the files, which are the truth.
                target = Path(entry.path[: -len(SWAP_SUFFIX)])
                os.replace(entry.path, target)
                fsync_dir(self.directory)
                files[parse_file_name(target.name) or 0] = target
                self._reindex_all = True
                log.warning("%s: finished the interrupted swap of %s", self.route, target.name)
        for base in sorted(set(metas) - set(files)):
            log.warning("%s: segment %d has metadata but no file; dropping the metadata", self.route, base)
            store.delete_segment(wb, prefix, base)
            del metas[base]
        for base in sorted(b for b, m in metas.items() if m.state is SegmentState.DELETING):
            # A deletion began (the segment left the log) and was interrupted: open() finishes it.
            self._dropping[base] = Segment.open(files.pop(base), metas.pop(base))
        newest_known = max(metas, default=-1)
        for base in sorted(b for b in set(files) - set(metas) if b < newest_known):
            # Only the newest file can lack metadata legitimately (a roll just before a crash);
            # an older one is a deleted segment whose file was not renamed yet.
            log.warning("%s: removing %s, deleted before a crash", self.route, files[base].name)
            os.unlink(files.pop(base))
        cp = self.index.checkpoint
        if not files:  # never lose the end offset, even if every file is gone
            base = max([cp.next_offset, *(m.next_offset for m in metas.values())])
            meta = SegmentMeta(base, created_at=now, modified_at=now)
            self._segments = [Segment.create(self.directory, meta)]
            metas = {}
        else:
            self._segments = [
                Segment.open(files[b], metas.get(b) or SegmentMeta(b, created_at=now, modified_at=now))
                for b in sorted(files)
            ]
        known = set(metas)

        # Step 2: verify every batch; find where the valid data ends.
        ends: list[int] = []  # end offset of each segment's valid data
        for i, seg in enumerate(self._segments):
            expected = seg.base_offset
            try:
                if i and (seg.base_offset < ends[-1] or (seg.base_offset > ends[-1] and seg.base_offset not in known)):
                    # Cannot follow from a crash (a roll fsyncs the full segment before
                    # creating the next file); handled like damage so offsets stay dense.
                    # A gap before a known segment is legal: a rewrite or a whole-segment
                    # drop removed records there.
                    raise CorruptSegmentError(
                        str(seg.path), 0, f"base offset {seg.base_offset} does not follow offset {ends[-1] - 1}"
                    )
                for _pos, h, _buf, _off in seg.iter_batches(0, seg.size):
                    if h.base_offset < expected:
                        raise CorruptSegmentError(str(seg.path), _pos, f"base offset {h.base_offset} < {expected}")
                    expected = h.next_offset
            except CorruptSegmentError as err:
                if seg.meta.state is not SegmentState.ACTIVE and i < len(self._segments) - 1:
                    log.error("%s: %s; the shard is unavailable until repaired", self.route, err)
                    self.failure = err
                    self.counters.add("corrupt_segments_total")
                    self._next_offset = max(cp.next_offset, expected)
                    return
                if self._truncate_tail(i, err, wb):
                    ends.append(expected)
                break
            ends.append(expected)
        self._next_offset = ends[-1]
        for seg in self._segments[:-1]:
            seg.meta.state = SegmentState.SEALED
        self._segments[-1].meta.state = SegmentState.ACTIVE

        # Step 3: re-index what the checkpoint does not cover.
        bases = [s.base_offset for s in self._segments]
        i = bisect.bisect_right(bases, cp.segment_base) - 1
        checkpoint_ok = (
            not self._reindex_all
            and cp.next_offset <= self._next_offset
            and i >= 0
            and bases[i] == cp.segment_base
            and cp.position <= self._segments[i].size
            and cp.next_offset >= self._segments[0].base_offset
        )
        if checkpoint_ok:
            start_index, start_pos = i, cp.position
            for seg in self._segments[i + 1 :]:  # never indexed: their metadata starts over
                seg.meta = SegmentMeta(
                    seg.base_offset, created_at=seg.meta.created_at, modified_at=now, state=seg.meta.state
                )
        else:
            if self._reindex_all:
                self.counters.add("recovery_swaps_finished_total")
            elif cp.next_offset > self._next_offset:
                lost = cp.next_offset - self._next_offset
                log.warning("%s: index reaches offset %d but data ends at %d", self.route, cp.next_offset, ends[-1])
                self.counters.add("recovery_index_past_data_total", lost)
            self.index.reset(wb, self._segments[0].base_offset, self._segments[0].base_offset)
            for seg in self._segments:
                seg.meta = SegmentMeta(
                    seg.base_offset, created_at=seg.meta.created_at, modified_at=now, state=seg.meta.state
                )
            start_index, start_pos = 0, 0
        self._reindex(wb, start_index, start_pos, now)

    def _truncate_tail(self, i: int, err: CorruptSegmentError, wb: WriteBatch) -> bool:
        """Cut segment ``i`` at the damaged batch and delete every later segment (crash recovery).

        Segment ``i`` goes too when nothing of it is valid and it is not the
        first. Returns whether segment ``i`` is kept.
        """
        keep = err.position > 0 or i == 0
        first_dropped = i + 1 if keep else i
        lost = self._segments[i].size - err.position if keep else 0
        for later in self._segments[first_dropped:]:
            lost += later.size
            later.close()
            os.unlink(later.path)
            self.index.store.delete_segment(wb, self.index.prefix, later.base_offset)
        del self._segments[first_dropped:]
        log.warning("%s: torn tail: %s; truncating %d bytes", self.route, err, lost)
        if keep:
            self._segments[i].truncate(err.position)
        self.counters.add_many({"recovery_truncations_total": 1, "recovery_truncated_bytes_total": lost})
        return keep

    def _reindex(self, wb: WriteBatch, start_index: int, start_pos: int, now: int) -> None:
        """Index every batch from segment ``start_index`` at ``start_pos`` to the end, committing as it goes."""
        store = self.index.store
        pending = 0
        reindexed = 0
        for i in range(start_index, len(self._segments)):
            seg = self._segments[i]
            pos0 = start_pos if i == start_index else 0
            for pos, h, buf, off in seg.iter_batches(pos0, seg.size, verify=False):
                self._index_batch(wb, seg, pos, h, buf, off, now)
                pending += 1
                reindexed += 1
                if pending >= _REINDEX_COMMIT_EVERY:  # the checkpoint covers these segments now
                    self.index.commit(wb, [s.meta for s in self._segments[start_index : i + 1]])
                    store.write(wb)
                    wb = store.batch()
                    pending = 0
        cp = self.index.checkpoint
        if cp.next_offset < self._next_offset:
            # Dropped segments (an idle shard's sealed tail) left a gap before an empty active
            # segment: no batch moves the checkpoint there, so it goes to the end offset.
            cp.next_offset, cp.segment_base, cp.position = self._next_offset, self._segments[-1].base_offset, 0
        self.index.commit(wb, [s.meta for s in self._segments])  # states may have changed in step 2
        store.write(wb, sync=True)
        if reindexed:
            log.info("%s: re-indexed %d batches", self.route, reindexed)
            self.counters.add("recovery_reindexed_batches_total", reindexed)

    def _index_batch(
        self, wb: WriteBatch, seg: Segment, pos: int, h: BatchHeader, buf: bytes, off: int, now: int
    ) -> None:
        keys: list[tuple[int, bytes]] = []
        tags: list[tuple[int, str]] = []
        expires: list[tuple[int, int, int, int]] = []
        if h.flags & (FLAG_HAS_KEYS | FLAG_HAS_TAGS | FLAG_HAS_EXPIRE):
            for r in decode_records(buf, off, h, path=str(seg.path)):
                delta = r.offset - h.base_offset
                if r.key is not None:
                    keys.append((delta, r.key))
                tags.extend((delta, t) for t in r.tags)
                if r.expire_at is not None:
                    expires.append((delta, r.expire_at, encoded_size(r), expire_flags(r)))
        self.index.add_batch(
            wb,
            base_offset=h.base_offset,
            last_offset=h.last_offset,
            max_timestamp=h.max_timestamp,
            length=h.length,
            keys=keys,
            tags=tags,
            expires=expires,
            segment_base=seg.base_offset,
            position=pos,
            first_in_segment=pos == 0,
            interval_bytes=self.policy.index_interval_bytes,
        )
        seg.meta.account(
            count=h.record_count,
            nbytes=h.length,
            last_offset=h.last_offset,
            first_timestamp=h.first_timestamp,
            min_timestamp=h.min_timestamp,
            max_timestamp=h.max_timestamp,
            max_expire_at=h.max_expire_at,
            has_unbounded=h.has_unbounded,
            now=now,
            flags=h.flags,
            # The header keeps no minimum: 0 is a lower bound, enough for the figures to stay exact.
            min_expire_at=0 if h.max_expire_at >= 0 else -1,
        )

    # -- appending (the shard's I/O worker only) -----------------------------------------
    def _append_group(self, bodies: list[EncodedRecords]) -> list[int]:
        """A group of batches: one write, one fsync, one index WriteBatch (plus one more of
        each per roll); a failure stops the shard until it is reopened (recovered from the files)."""
        store = self.index.store
        policy = self.policy
        now = self.clock.now_ms()
        wb = store.batch()
        seg = self._segments[-1]
        dirty: dict[int, SegmentMeta] = {}
        pending: list[bytes] = []
        pos = seg.size
        offsets: list[int] = []
        nbytes = 0
        for body in bodies:
            length = body.batch_length
            if seg.meta.should_roll(policy, length, body.max_timestamp):
                seg.append(pending)
                pending = []
                seg = self._roll(dirty, now)
                pos = 0
            pending.append(body.header(self._next_offset))
            pending.append(body.data)
            offsets.append(self._index_appended(wb, body, seg.meta, length, pos, now, dirty))
            pos += length
            nbytes += length
        seg.append(pending)
        if self.sync_schedule.sync_now():
            self._sync()
        # Readers may see the batches before their index entries exist: any earlier
        # sparse entry is a valid place to start scanning. The other way round, an
        # indexed key or tag always lies inside the published view.
        self._publish()
        self.index.commit(wb, dirty.values())
        store.write(wb)
        self.counters.add_many(
            {
                "append_groups_total": 1,
                "append_batches_total": len(bodies),
                "appended_records_total": sum(b.count for b in bodies),
                "appended_bytes_total": nbytes,
            }
        )
        return offsets

    def _roll(self, dirty: dict[int, SegmentMeta], now: int) -> Segment:
        """Seal the active segment (fsync first, whatever the durability mode, so a sealed
        segment is always complete on disk) and start the next one at the next offset."""
        old = self._segments[-1]
        old.seal()
        self.sync_schedule.synced()
        dirty[old.base_offset] = old.meta
        seg = Segment.create(self.directory, SegmentMeta(self._next_offset, created_at=now, modified_at=now))
        self._segments.append(seg)
        dirty[seg.base_offset] = seg.meta
        self.counters.add("segment_rolls_total")
        return seg

    def _publish(self) -> None:
        active = self._segments[-1]
        old = getattr(self, "view", None)
        changed, self._layout_changed = self._layout_changed, False
        if not changed and old is not None and len(old.segments) == len(self._segments) and old.segments[-1] is active:
            segments, bases = old.segments, old.bases  # no roll since: reuse the tuples
        else:
            segments = tuple(self._segments)
            bases = tuple(s.base_offset for s in segments)
        self.view = LogView(
            log_start_offset=segments[0].base_offset,
            end_offset=self._next_offset,
            segments=segments,
            bases=bases,
            active_size=active.size,
            active_meta=replace(active.meta),
        )

    # -- reading (any thread) -----------------------------------------------------------
    def iter_records(self, view: LogView, start: int, *, min_timestamp: int | None = None) -> Iterator[Record]:
        """Records at or after ``start`` up to ``view.end_offset``, in offset order.

        Uses the sparse offset index to find where to start, then scans.
        Batches whose max timestamp is below ``min_timestamp`` are skipped by
        their header alone.
        """
        if start >= view.end_offset:
            return
        # Every segment has an entry for its first batch, so the floor entry lies in
        # the segment holding ``start``; without one (never expected) scan it whole.
        i = max(0, bisect.bisect_right(view.bases, start) - 1)
        floor = self.index.floor_offset(start)
        # Read the floor before looking at ``replaced``: a rewrite sets it before the index
        # gets the new file's positions, which are meaningless in the old file.
        pos = floor[2] if floor is not None and floor[1] == view.bases[i] and not view.segments[i].replaced else 0
        try:
            for j in range(i, len(view.segments)):
                seg = view.segments[j]
                seg.retain()  # a deleted or replaced file stays open while this reader holds it
                try:
                    # No CRC on the fetch path (as in Kafka): open verified every batch, and a
                    # structurally damaged record still raises while decoding.
                    batches = seg.iter_batches(pos, view.committed_size(j), chunk=_READ_CHUNK, verify=False)
                    for _p, h, buf, off in batches:
                        if h.last_offset < start:
                            continue
                        if min_timestamp is not None and h.max_timestamp < min_timestamp:
                            continue
                        yield from iter_batch_records(buf, off, h, path=str(seg.path), min_offset=start)
                finally:
                    seg.release()
                pos = 0
        except CorruptSegmentError as err:
            self.counters.add("corrupt_segments_total")
            self.failure = err
            raise

    def record_at(self, offset: int) -> Record | None:
        """The record stored at ``offset`` (call within :meth:`reading`)."""
        view = self.view
        for r in self.iter_records(view, offset):
            return r if r.offset == offset else None
        return None

    # -- lifecycle --------------------------------------------------------------------------
    def _live_metas(self) -> list[SegmentMeta]:
        return [s.meta for s in self._segments]

    def _detach(self, metas: list[SegmentMeta]) -> None:
        bases = {m.base_offset for m in metas}
        for seg in self._segments:
            if seg.base_offset in bases:
                self._dropping[seg.base_offset] = seg
        self._segments = [s for s in self._segments if s.base_offset not in bases]
        self._layout_changed = True
        self._publish()

    def _segment_file(self, base: int) -> Segment | None:
        seg = self._dropping.get(base)
        if seg is not None:
            return seg
        for seg in self._segments:
            if seg.base_offset == base:
                return seg
        return None

    # -- key compaction: read from the files, vectorised (storage_engine.compaction_io) ------------
    def compaction_key_hashes(self, base: int) -> Iterator[KeyHashes]:
        seg = self._segment_file(base)
        return super().compaction_key_hashes(base) if seg is None else file_key_hashes(seg)

    def compaction_columns(self, base: int) -> Iterator[Columns]:
        seg = self._segment_file(base)
        return super().compaction_columns(base) if seg is None else file_columns(seg)

    def removed_bytes(self, info: SegmentInfo, remove: Collection[int]) -> int:
        seg = self._segment_file(info.base_offset)
        return 0 if seg is None else file_removed_bytes(seg, info, remove)

    def _segment_records(self, meta: SegmentMeta, indexed_only: bool = False) -> Iterator[Record]:
        seg = self._segment_file(meta.base_offset)
        if seg is None:
            return
        seg.retain()
        try:
            for _pos, h, buf, off in seg.iter_batches(0, seg.size, verify=False):
                if indexed_only and not h.flags & INDEXED_FLAGS:
                    continue  # decided by the header alone: nothing of this batch is indexed
                yield from iter_batch_records(buf, off, h, path=str(seg.path))
        finally:
            seg.release()

    def _release_dropped(self, metas: list[SegmentMeta], now: int, delay_ms: int, work: ShardWork) -> None:
        """Rename deleted segments' files ``.deleted``; remove them now when there is no
        delay and no reader, else a later :meth:`remove_due_files` does."""
        renamed = [(m, seg) for m in metas if (seg := self._dropping.pop(m.base_offset, None)) is not None]
        for m, seg in renamed:
            seg.rename(seg.path.with_name(file_name(m.base_offset) + DELETED_SUFFIX), sync=False)
        if renamed:
            fsync_dir(renamed[0][1].path.parent)  # one directory fsync for every rename of the drop
        for _m, seg in renamed:
            size = seg.size
            if delay_ms <= 0 and seg.remove():
                work.files_removed += 1
                work.files_removed_bytes += size
            else:
                with self._trash_lock:
                    self._trash.append((seg, now, delay_ms))

    def remove_due_files(self, now: int, node: NodePolicy, *, purge: bool = False) -> ShardWork:
        """Remove ``.deleted`` files whose delay has passed (with ``purge``: every one, the
        disk is above a watermark) and that no reader holds; one held longer than
        ``destroy_forcibly_after_ms`` goes anyway. A purge respects readers exactly as
        the delay does: a held file stays pending."""
        work = ShardWork()
        with self._trash_lock:
            keep: list[tuple[Segment, int, int]] = []
            for seg, at, delay in self._trash:
                if not (purge or now - at >= delay):
                    keep.append((seg, at, delay))
                    continue
                size = seg.size
                if seg.remove():
                    pass
                elif now - at >= node.destroy_forcibly_after_ms:
                    seg.remove(force=True)
                    self.counters.add("segments_destroyed_forcibly_total")
                    log.warning("%s: removed %s although a reader still holds it", self.route, seg.path.name)
                else:
                    keep.append((seg, at, delay))
                    continue
                work.files_removed += 1
                work.files_removed_bytes += size
            self._trash = keep
        return work

    def pending_file_bytes(self) -> int:
        """Bytes of ``.deleted`` files not yet removed (part of the disk's used bytes)."""
        with self._trash_lock:
            return sum(seg.size for seg, _, _ in self._trash)

    def roll_empty(self, now: int) -> bool:
        with self.write_lock:
            self.check_usable()
            if self._segments[-1].meta.record_count == 0:
                return False
            dirty: dict[int, SegmentMeta] = {}
            new = self._roll(dirty, now)
            # The checkpoint follows to the new (empty) active segment, as an append's first
            # batch there would move it: the sealed one may be dropped next (an idle shard's
            # expired segment), and recovery resumes indexing from the checkpoint's segment.
            cp = self.index.checkpoint
            cp.segment_base, cp.position = new.base_offset, 0
            wb = self.index.store.batch()
            self.index.commit(wb, dirty.values())
            self.index.store.write(wb, sync=True)
            self._publish()
            return True

    def rewrite_segment(self, base: int, now: int, remove: Removal = ()) -> ShardWork:
        """Rewrite a sealed segment without its dead and expired records, swapping the file
        atomically.

        ``remove`` (key compaction) names further live records to leave out: a
        collection of offsets, or a :data:`~storage_engine.lifecycle.RemovalRule`
        asked while the segment streams through (so memory does not grow with the
        segment): once per batch, or, for a rule with ``decide_layout`` (key
        compaction's :class:`~storage_engine.keep_rule.CleaningRule`), once per read
        chunk of batches in numpy columns (:mod:`storage_engine.columnar`); a batch
        its ``by_offset`` keeps whole is copied without being decoded. Their tag and TTL entries, and their key entry
        where it still points at them, are deleted in the same WriteBatch as the
        swap's metadata, so the index matches whichever file a crash leaves.

        Expired records are marked dead with their index entries as the walk meets
        them, a chunk per WriteBatch (as the TTL scan does), so the new file holds
        exactly the records that are not dead and the index never points at a
        removed one. Offsets never change: a batch that loses records keeps its
        records' offsets (gaps are legal; the header is rebuilt, the records are
        copied as encoded) and the metadata keeps the segment's last offset. The
        ``.cleaned`` file is only started at the first batch that changes (the
        unchanged prefix is copied then); a segment where nothing goes is left
        alone without writing anything.

        Memory: the read chunk (``SCAN_CHUNK``), a 256 KiB output buffer, the
        columns of the chunk's batches, a chunk of expired records, the new sparse offset
        entries (16 bytes per ``index_interval_bytes`` of output) and, for removed
        records that carry tags, a deadline or their key's latest entry, their
        index deletions.

        The swap, and what opening the shard does after a crash at each point:

        1. write ``<base>.log.cleaned`` and fsync it (crash: ``.cleaned`` is
           deleted on open; the old file is untouched);
        2. rename it ``<base>.log.swap`` and fsync the directory: the swap is
           decided (crash from here: open renames ``.swap`` over ``.log`` and
           re-indexes the shard from its files);
        3. under the write lock: mark the old file ``replaced`` (readers stop
           trusting index positions in it), then one synced WriteBatch with
           the new sparse offsets, metadata and checkpoint, dead marks of the
           segment dropped;
        4. rename ``.swap`` over ``.log``, fsync the directory, publish the new
           view; the old file closes when its last reader lets go.
        """
        work = ShardWork()
        with self.write_lock:
            seg = next((s for s in self._segments[:-1] if s.base_offset == base), None)
        if seg is None or seg.meta.state is not SegmentState.SEALED:
            return work
        rule = removal_rule(remove)
        old = seg.meta
        store = self.index.store
        prefix = self.index.prefix
        ttl_ms = self.policy.ttl_ms
        can_expire = ttl_ms is not None or old.max_expire_at >= 0
        has_dead = old.live_count < old.record_count
        if rule is None and not can_expire and not has_dead:
            return work
        cleaned = seg.path.with_name(file_name(base) + CLEANED_SUFFIX)
        swap = seg.path.with_name(file_name(base) + SWAP_SUFFIX)
        meta = SegmentMeta(
            base,
            created_at=old.created_at,
            last_offset=old.last_offset,
            first_timestamp=old.first_timestamp,
            min_timestamp=old.min_timestamp,
            max_timestamp=old.max_timestamp,
            state=SegmentState.SEALED,
            modified_at=old.modified_at,
            min_expire_at=old.min_expire_at,  # a lower bound of what remains, enough for the figures
        )
        path = str(seg.path)
        sparse = array("Q")  # (batch base offset, position) pairs for the offsets index, 16 B each
        wb = store.batch()  # the swap's WriteBatch: tag/TTL deletions of removed records go in now
        check_keys: list[tuple[int, bytes]] = []  # removed records whose key entry may point at them
        expired: list[Record] = []
        removed = kept = 0
        pos = since_entry = 0
        interval = self.policy.index_interval_bytes
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
                        lay = chunk_layout(group_buf, todo, path=path)
                        keep, gone = self._rewrite_decide(
                            group_buf, lay, todo, rule, has_dead, can_expire, now, wb, work, expired, check_keys
                        )
                        removed += gone
                        n_keeps = np.add.reduceat(keep, lay.first[:-1], dtype=np.int64).tolist()
                        changed = [b for b, k in enumerate(n_keeps) if 0 < k < todo[b][1].record_count]
                        rebuilt = rebuild_many(lay, changed, keep)
                        if len(expired) >= UNINDEX_CHUNK:
                            work.add(self._kill(expired, now))
                            expired = []
                    b = -1  # the batch's index among those decided
                    for (file_pos, h, off), is_whole in zip(group, whole, strict=True):
                        n = n_keep = h.record_count
                        if not is_whole:
                            b += 1
                            n_keep = n_keeps[b]
                            if n_keep < n and fd < 0:  # the first batch that changes: start the new file
                                fd = os.open(cleaned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
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
                work.add(self._kill(expired, now))
            if fd >= 0:
                if out:
                    _write_all(fd, out, pos - len(out))
                os.fsync(fd)
        finally:
            if fd >= 0:
                os.close(fd)
        if fd < 0:  # every batch kept every record: nothing to do
            return work
        gone = old.record_count - kept
        if kept == 0:  # nothing remains: drop it whole instead (its entries go with it)
            cleaned.unlink()
            return work.add(self.drop_segments([base], now, 0))
        meta.record_count = meta.live_count = kept
        meta.size_bytes = pos
        os.rename(cleaned, swap)
        fsync_dir(self.directory)
        with self.write_lock:
            self.check_usable()
            new = Segment.open(swap, meta)
            seg.replaced = True
            store.drop_offset_range(wb, prefix, base, old.last_offset + 1)
            for j in range(0, len(sparse), 2):
                wb.put(offset_key(prefix, sparse[j]), _POS.pack(base, sparse[j + 1]), store.handle(CF_OFFSETS))
            store.put_segment(wb, prefix, meta)
            for offset, key in check_keys:
                work.index_entries_deleted += self._unindex(wb, offset, key, (), None)
            cp = self.index.checkpoint
            if cp.segment_base == base:
                cp.position = meta.size_bytes
                store.put_checkpoint(wb, prefix, cp)
            store.write(wb, sync=True)
            os.replace(swap, seg.path)
            fsync_dir(self.directory)
            new.path = seg.path
            self._segments[self._segments.index(seg)] = new
            self._layout_changed = True
            self._publish()
        seg.retire()
        work.segments_rewritten += 1
        work.records_removed += gone
        work.bytes_reclaimed += max(0, old.size_bytes - meta.size_bytes)
        self.counters.add("segments_rewritten_total")
        return work

    def _rewrite_decide(
        self,
        buf: bytes,
        lay: Layout,
        todo: list[tuple[int, BatchHeader]],
        rule: RemovalRule | None,
        has_dead: bool,
        can_expire: bool,
        now: int,
        wb: WriteBatch,
        work: ShardWork,
        expired: list[Record],
        check_keys: list[tuple[int, bytes]],
    ) -> tuple[np.ndarray, int]:
        """What a rewrite keeps of the batches ``todo`` of one read chunk (laid out in
        ``lay``): dead records go, expired ones go to ``expired`` (to be marked dead), the
        rule decides the rest (over the whole chunk when it has ``decide_layout``). Index
        entries of removed records that carry tags or a deadline go into ``wb``; removed
        records that may be their key's latest entry go to ``check_keys``. Returns the mask
        of kept records and how many the rule removed."""
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
        if has_dead:
            dead = self.index.store.dead_offsets(self.index.prefix, todo[0][1].base_offset, todo[-1][1].last_offset + 1)
            if dead:
                is_dead = np.isin(lay.offsets, np.array(dead, dtype=np.int64))
                keep &= ~is_dead
                gone &= ~is_dead
        if can_expire:
            fx = lay.fixed(np.arange(lay.starts.size))
            late = ((fx["attrs"] & ATTR_EXPIRE) != 0) & (fx["exp"] <= now)
            ttl_ms = self.policy.ttl_ms
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
                    work.index_entries_deleted += self._unindex(wb, r.offset, None, r.tags, r.expire_at)
            latest = ((attrs & ATTR_KEY) != 0) & (decided[gone_at] != SUPERSEDED)
            for i in gone_at[latest].tolist():  # removed records that may be their key's latest
                q = int(lay.starts[i]) + RECORD_FIXED_SIZE
                check_keys.append((int(lay.offsets[i]), bytes(buf[q : q + int(lay.klen[i])])))
        return keep, int(gone_at.size)

    def _verify_storage(self, view: Any) -> tuple[int, list[str]]:
        """Every sparse offset entry points at a batch with that base offset in a live segment,
        and every non-empty segment has one for its first batch."""
        problems: list[str] = []
        by_base = {s.base_offset: (j, s) for j, s in enumerate(view.segments)}
        entries = self.index.store.offset_entries(self.index.prefix)
        first = {(seg_base, pos) for _, seg_base, pos in entries}
        for offset, seg_base, pos in entries:
            found = by_base.get(seg_base)
            if found is None:
                problems.append(f"{self.route} offsets {offset} -> segment {seg_base}, which is not live")
                continue
            j, seg = found
            if pos + HEADER_SIZE > view.committed_size(j):
                problems.append(f"{self.route} offsets {offset} -> {seg_base}@{pos} past the data")
                continue
            (batch_base,) = _BATCH_BASE.unpack_from(seg.read(pos + 12, 8))
            if batch_base != offset:
                problems.append(f"{self.route} offsets {offset} -> {seg_base}@{pos} holds batch {batch_base}")
        for j, seg in enumerate(view.segments):
            if view.committed_size(j) > 0 and (seg.base_offset, 0) not in first:
                problems.append(f"{self.route} segment {seg.base_offset} has no offsets entry for its first batch")
        return len(entries), problems

    # -- closing --------------------------------------------------------------------------
    def _sync_storage(self) -> None:
        self._segments[-1].sync()

    def _release(self) -> None:
        for seg in self._segments:
            seg.close()
        for seg in self._dropping.values():
            seg.close()
        with self._trash_lock:
            for seg, _, _ in self._trash:
                seg.close()
            self._trash = []


_WRITE_CHUNK = 256 * 1024  # bytes a rewrite buffers before one pwrite


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
