"""The log of one shard: its segment files, rolling, reads and file lifecycle.

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
but, in ``fsync`` mode, never behind it: :mod:`storage_engine.segment.recovery`
brings them back in line when the shard opens.

Lifecycle: deleting segments is :class:`~storage_engine.segment.shard.ShardBase`'s
three-step protocol, ending here by handing the files to the shard's retired files
(:mod:`storage_engine.segment.retired`: renamed ``.deleted``, removed once due); rewriting a segment
without its dead records is :meth:`ShardLog.rewrite_segment` (the swap; the new
file is written by :mod:`storage_engine.segment.rewrite`).
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from storage_engine.api import Record, SegmentInfo, SegmentState
from storage_engine.compaction.store_io import Columns, KeyHashes, file_columns, file_key_hashes, file_removed_bytes
from storage_engine.errors import CorruptSegmentError
from storage_engine.formats.codec import HEADER_SIZE, EncodedRecords
from storage_engine.formats.codec import iter_records as iter_batch_records
from storage_engine.lifecycle import Removal, ShardWork, removal_rule
from storage_engine.policies.policy import NodePolicy
from storage_engine.segment.datadir import fsync_dir
from storage_engine.segment.index_keys import CF_OFFSETS, POSITION, offset_key
from storage_engine.segment.meta import SegmentMeta
from storage_engine.segment.recovery import RemoteFactory, recover
from storage_engine.segment.retired import RetiredFiles
from storage_engine.segment.rewrite import SegmentRewrite
from storage_engine.segment.segment import SWAP_SUFFIX, Segment, file_name
from storage_engine.segment.shard import INDEXED_FLAGS, ShardBase

_READ_CHUNK = 256 * 1024
_BATCH_BASE = struct.Struct(">Q")  # a batch header's base_offset, at byte 12


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
        self.retired = RetiredFiles(self.route, self.counters)  # renamed .deleted, not yet removed

    # -- opening ------------------------------------------------------------------------
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
        """Open an existing shard and recover it (:mod:`storage_engine.segment.recovery`)."""
        self = cls(**kwargs)
        self.directory.mkdir(parents=True, exist_ok=True)
        found = recover(
            self.directory,
            self.index,
            route=self.route,
            counters=self.counters,
            interval_bytes=self.policy.index_interval_bytes,
            now=self.clock.now_ms(),
            remote=self._remote_factory(),
        )
        self._segments, self._dropping, self._next_offset = found.segments, found.dropping, found.next_offset
        self.failure = found.failure
        self._publish()
        if self._dropping and self.failure is None:  # a deletion was interrupted: finish it
            metas = [seg.meta for seg in self._dropping.values()]
            self._finish_drop(metas, self.clock.now_ms(), 0, ShardWork())
        return self

    def _remote_factory(self) -> RemoteFactory | None:
        """How recovery opens a segment whose bytes are only in the object store (none without a tier)."""
        return None

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

    # -- key compaction: read from the files, vectorised (storage_engine.compaction.store_io) ------------
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
        popped = [(m, seg) for m in metas if (seg := self._dropping.pop(m.base_offset, None)) is not None]
        for _m, seg in popped:
            if not seg.local:  # only in the object store (its objects went before the metadata)
                seg.remove(force=True)
        self.retired.retire([seg for _m, seg in popped if seg.local], now, delay_ms, work)

    def remove_due_files(self, now: int, node: NodePolicy, *, purge: bool = False) -> ShardWork:
        """:meth:`RetiredFiles.remove_due <storage_engine.segment.retired.RetiredFiles.remove_due>`."""
        return self.retired.remove_due(now, node, purge=purge)

    def pending_file_bytes(self) -> int:
        """:meth:`RetiredFiles.pending_bytes <storage_engine.segment.retired.RetiredFiles.pending_bytes>`."""
        return self.retired.pending_bytes()

    def due_files(self, now: int, node: NodePolicy, *, purge: bool = False) -> tuple[int, int]:
        """:meth:`RetiredFiles.due <storage_engine.segment.retired.RetiredFiles.due>`."""
        return self.retired.due(now, node, purge=purge)

    def drop_files(self, bases: Collection[int], delay_ms: int) -> tuple[int, int]:
        """What a drop of segments ``bases`` now would do to their local files (a dry run's): ``(files
        removed at once, bytes left on disk as .deleted files)``, by :meth:`RetiredFiles.stays_pending`."""
        wanted = set(bases)
        files = [seg for seg in list(self._segments) if seg.base_offset in wanted and seg.local]
        kept = [seg.size for seg in files if self.retired.stays_pending(seg, delay_ms)]
        return len(files) - len(kept), sum(kept)

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
        compaction's :class:`~storage_engine.compaction.keep_rule.CleaningRule`), once per read
        chunk of batches in numpy columns (:mod:`storage_engine.formats.columnar`); a batch
        its ``by_offset`` keeps whole is copied without being decoded. Their tag and
        TTL entries, and their key entry where it still points at them, are deleted
        in the same WriteBatch as the swap's metadata, so the index matches whichever
        file a crash leaves.

        What the new file holds, how it is written and what it costs in memory:
        :mod:`storage_engine.segment.rewrite`.

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

        Steps 1 and 3–4 are :meth:`stage_rewrite` and :meth:`swap_rewritten`, which a rewrite of
        a segment in the object store shares (:mod:`storage_engine.tier.rewrite`: its step 2 is
        an upload under a new generation, and its decision the WriteBatch of step 3).
        """
        staged = self.stage_rewrite(base, now, remove)
        if isinstance(staged, ShardWork):
            return staged
        seg, rewrite = staged
        swap = self.directory / (file_name(base) + SWAP_SUFFIX)
        os.rename(rewrite.path, swap)
        fsync_dir(self.directory)
        return self.swap_rewritten(seg, rewrite, swap)

    def stage_rewrite(self, base: int, now: int, remove: Removal = ()) -> tuple[Segment, SegmentRewrite] | ShardWork:
        """Step 1 of :meth:`rewrite_segment`: the live sealed segment ``base`` and its rewrite, whose
        complete ``.cleaned`` file (``rewrite.path``) holds what stays, or what was done when there is
        nothing to swap (no such segment, nothing removed, or nothing left: dropped whole instead).
        A failure while writing removes the ``.cleaned`` file (opening the shard would too)."""
        with self.write_lock:
            seg = next((s for s in self._segments[:-1] if s.base_offset == base), None)
        if seg is None or seg.meta.state is not SegmentState.SEALED:
            return ShardWork()
        rewrite = SegmentRewrite(
            seg,
            removal_rule(remove),
            index=self.index,
            ttl_ms=self.policy.ttl_ms,
            interval_bytes=self.policy.index_interval_bytes,
            now=now,
            kill=lambda records: self._kill(records, now),
            directory=self.directory,
        )
        work = rewrite.work
        try:
            if not rewrite.needed or not rewrite.write():  # nothing can go, or every record stayed
                return work
        except BaseException:
            rewrite.path.unlink(missing_ok=True)
            raise
        if rewrite.kept == 0:  # nothing remains: drop it whole instead (its entries go with it)
            rewrite.path.unlink()
            return work.add(self.drop_segments([base], now, 0))
        rewrite.meta.record_count = rewrite.meta.live_count = rewrite.kept
        rewrite.meta.size_bytes = rewrite.size
        return seg, rewrite

    def swap_rewritten(
        self,
        seg: Segment,
        rewrite: SegmentRewrite,
        staged: Path,
        *,
        catalog_meta: SegmentMeta | None = None,
        after: Callable[[], None] | None = None,
    ) -> ShardWork:
        """Steps 3–4 of :meth:`rewrite_segment`: the complete new file ``staged`` replaces ``seg``.

        The WriteBatch records ``catalog_meta`` (default: the new file's metadata); ``after`` runs
        under the write lock once the file is in place, before readers see it. A rewrite of an
        offloaded segment (:mod:`storage_engine.tier.rewrite`) passes its ``.cleaned`` file (its
        decision is this WriteBatch, not a ``.swap`` rename), metadata saying *remote* under the new
        generation, and an ``after`` that says *both*."""
        base, old, meta = seg.base_offset, seg.meta, rewrite.meta
        store = self.index.store
        prefix = self.index.prefix
        sparse, wb, work = rewrite.sparse, rewrite.wb, rewrite.work
        path = self.directory / file_name(base)
        with self.write_lock:
            self.check_usable()
            new = Segment.open(staged, meta)
            seg.replaced = True
            store.drop_offset_range(wb, prefix, base, old.last_offset + 1)
            for j in range(0, len(sparse), 2):
                wb.put(offset_key(prefix, sparse[j]), POSITION.pack(base, sparse[j + 1]), store.handle(CF_OFFSETS))
            store.put_segment(wb, prefix, catalog_meta or meta)
            for offset, key in rewrite.check_keys:
                work.index_entries_deleted += self._unindex(wb, offset, key, (), None)
            cp = self.index.checkpoint
            if cp.segment_base == base:
                cp.position = meta.size_bytes
                store.put_checkpoint(wb, prefix, cp)
            store.write(wb, sync=True)
            os.replace(staged, path)
            fsync_dir(self.directory)
            new.path = path
            if after is not None:
                after()
            self._segments[self._segments.index(seg)] = new
            self._layout_changed = True
            self._publish()
        seg.retire()
        work.segments_rewritten += 1
        work.records_removed += old.record_count - rewrite.kept
        work.bytes_reclaimed += max(0, old.size_bytes - meta.size_bytes)
        self.counters.add("segments_rewritten_total")
        return work

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
        self.retired.close()
