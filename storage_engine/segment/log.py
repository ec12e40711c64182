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
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rocksdict import WriteBatch

from storage_engine.api import Record, SegmentState
from storage_engine.codec import (
    FLAG_HAS_EXPIRE,
    FLAG_HAS_KEYS,
    FLAG_HAS_TAGS,
    BatchHeader,
    EncodedRecords,
    decode_records,
)
from storage_engine.codec import (
    iter_records as iter_batch_records,
)
from storage_engine.errors import CorruptSegmentError
from storage_engine.segment.meta import SegmentMeta
from storage_engine.segment.segment import Segment, parse_file_name
from storage_engine.segment.shard import ShardBase

log = logging.getLogger(__name__)

_REINDEX_COMMIT_EVERY = 4096  # batches per WriteBatch while re-indexing at open
_READ_CHUNK = 256 * 1024


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


class ShardLog(ShardBase):
    """Segments of one shard. Build with :meth:`create` (new shard) or :meth:`open` (recovers it)."""

    view: LogView

    def __init__(self, *, directory: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.directory = directory
        self._segments: list[Segment] = []
        self._next_offset = 0

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
        for entry in os.scandir(self.directory):
            base = parse_file_name(entry.name)
            if base is not None:
                files[base] = Path(entry.path)
            elif entry.name.endswith(".tmp"):
                os.unlink(entry.path)
        for base in sorted(set(metas) - set(files)):
            log.warning("%s: segment %d has metadata but no file; dropping the metadata", self.route, base)
            store.delete_segment(wb, prefix, base)
            del metas[base]
        cp = self.index.checkpoint
        if not files:  # never lose the end offset, even if every file is gone
            base = max([cp.next_offset, *(m.next_offset for m in metas.values())])
            meta = SegmentMeta(base, created_at=now, modified_at=now)
            self._segments = [Segment.create(self.directory, meta)]
        else:
            self._segments = [
                Segment.open(files[b], metas.get(b) or SegmentMeta(b, created_at=now, modified_at=now))
                for b in sorted(files)
            ]

        # Step 2: verify every batch; find where the valid data ends.
        ends: list[int] = []  # end offset of each segment's valid data
        for i, seg in enumerate(self._segments):
            expected = seg.base_offset
            try:
                if i and seg.base_offset != ends[-1]:
                    # Cannot follow from a crash (a roll fsyncs the full segment before
                    # creating the next file); handled like damage so offsets stay dense.
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
            cp.next_offset <= self._next_offset
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
            if cp.next_offset > self._next_offset:
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
        expires: list[tuple[int, int]] = []
        if h.flags & (FLAG_HAS_KEYS | FLAG_HAS_TAGS | FLAG_HAS_EXPIRE):
            for r in decode_records(buf, off, h, path=str(seg.path)):
                delta = r.offset - h.base_offset
                if r.key is not None:
                    keys.append((delta, r.key))
                tags.extend((delta, t) for t in r.tags)
                if r.expire_at is not None:
                    expires.append((delta, r.expire_at))
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
        )

    # -- appending (the shard's I/O worker only) -----------------------------------------
    def append_group(self, bodies: list[EncodedRecords]) -> list[int]:
        """Append a group of batches: one write, one fsync, one index WriteBatch (plus one
        more of each per roll). Returns each batch's base offset."""
        with self.write_lock:
            self.check_usable()
            try:
                return self._append_group(bodies)
            except Exception as exc:
                # Memory, files and index may now disagree, and after a failed fsync
                # the page cache cannot be trusted (fsyncgate): stop serving the
                # shard; reopening recovers it from the files.
                self.failure = exc
                raise

    def _append_group(self, bodies: list[EncodedRecords]) -> list[int]:
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
            base = self._next_offset
            pending.append(body.header(base))
            pending.append(body.data)
            last = base + body.last_delta
            self.index.add_batch(
                wb,
                base_offset=base,
                last_offset=last,
                max_timestamp=body.max_timestamp,
                length=length,
                keys=body.keys,
                tags=body.tags,
                expires=body.expires,
                segment_base=seg.base_offset,
                position=pos,
                first_in_segment=pos == 0,
                interval_bytes=policy.index_interval_bytes,
            )
            seg.meta.account(
                count=body.count,
                nbytes=length,
                last_offset=last,
                first_timestamp=body.first_timestamp,
                min_timestamp=body.min_timestamp,
                max_timestamp=body.max_timestamp,
                max_expire_at=body.max_expire_at,
                has_unbounded=body.has_unbounded,
                now=now,
            )
            dirty[seg.base_offset] = seg.meta
            pos += length
            nbytes += length
            self._next_offset = last + 1
            offsets.append(base)
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
        if old is not None and len(old.segments) == len(self._segments) and old.segments[-1] is active:
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
        pos = floor[2] if floor is not None and floor[1] == view.bases[i] else 0
        try:
            for j in range(i, len(view.segments)):
                seg = view.segments[j]
                # No CRC on the fetch path (as in Kafka): open verified every batch, and a
                # structurally damaged record still raises while decoding.
                batches = seg.iter_batches(pos, view.committed_size(j), chunk=_READ_CHUNK, verify=False)
                for _p, h, buf, off in batches:
                    if h.last_offset < start:
                        continue
                    if min_timestamp is not None and h.max_timestamp < min_timestamp:
                        continue
                    yield from iter_batch_records(buf, off, h, path=str(seg.path), min_offset=start)
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

    # -- closing --------------------------------------------------------------------------
    def _sync_storage(self) -> None:
        self._segments[-1].sync()

    def _release(self) -> None:
        for seg in self._segments:
            seg.close()
