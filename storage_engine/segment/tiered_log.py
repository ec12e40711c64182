"""A shard's log with an object-store tier: the state changes of offloading, and what every other
step does differently for a segment that is (also) in the object store.

Where a sealed segment's bytes are is its metadata's ``tier`` (:class:`TierState`), changed only
here, each change one synced RocksDB write under the shard's write lock:

1. :meth:`TieredShardLog.begin_offload` — LOCAL → UPLOADING with a fresh generation (the object
   names), before any byte is uploaded; a restarted offload finds UPLOADING and keeps the
   generation, so it overwrites whatever the interrupted one wrote, and nothing is duplicated;
2. :meth:`TieredShardLog.finish_offload` — UPLOADING → BOTH, only after the data object and its
   manifest are uploaded and verified (:mod:`storage_engine.tier.offload`);
3. :meth:`TieredShardLog.drop_local_copies` — BOTH → REMOTE, then the segment is swapped in the
   log for a :class:`~storage_engine.tier.remote_reads.RemoteSegment` and its file renamed
   ``.deleted`` (removed after ``file_delete_delay_ms`` like any deleted file). A crash after the
   write leaves a file that opening the shard removes (:mod:`storage_engine.segment.recovery`).

A recall (:mod:`storage_engine.tier.recall`) undoes step 3: :meth:`TieredShardLog.finish_recall`
— REMOTE → BOTH once a verified copy is in place under the segment's file name.

Deleting a segment (retention, TTL, file cleaning) deletes its objects too, between the index
clean-up and the metadata's removal (:meth:`TieredShardLog._before_forget`). A rewrite
(reclamation, compaction) of a segment in the object store (*both* or *remote*) is
:mod:`storage_engine.tier.rewrite`: it records its new generation as the segment's
``stale_generation`` (:meth:`TieredShardLog.begin_rewrite`) before uploading under it, and swaps
(:meth:`TieredShardLog.swap_offloaded_rewrite`) so that the old generation becomes the stale one;
stale objects are deleted by the next tier step (:meth:`TieredShardLog.clear_stale`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from storage_engine.api import Record
from storage_engine.errors import SegmentDeletedError
from storage_engine.lifecycle import Removal, ShardWork
from storage_engine.segment.log import LogView, ShardLog
from storage_engine.segment.meta import SegmentMeta, TierState
from storage_engine.segment.recovery import RemoteFactory
from storage_engine.segment.rewrite import SegmentRewrite
from storage_engine.segment.segment import Segment, file_name


class TierHooks(Protocol):
    """What the log needs from the object-store tier (:class:`storage_engine.tier.context.ShardTier`)."""

    def remote_segment(self, meta: SegmentMeta) -> Segment:
        """A stand-in serving the segment's bytes from the object store."""
        ...

    def delete_objects(self, meta: SegmentMeta) -> None:
        """Delete the segment's data object and manifest (missing ones are fine)."""
        ...


OffloadedRewrite = Callable[["TieredShardLog", int, int, Removal], ShardWork]
"""Rewrites a segment in the object store: ``(log, base offset, now, removal)``
(:func:`storage_engine.tier.rewrite.rewrite_offloaded`, given by the adapter)."""


class TieredShardLog(ShardLog):
    """:class:`ShardLog` with an object-store tier (``tier`` ``None``: none configured) and what
    rewrites its offloaded segments (``rewriter`` ``None``: they are left as they are)."""

    def __init__(
        self, *, tier: TierHooks | None = None, rewriter: OffloadedRewrite | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.tier = tier
        self.rewriter = rewriter

    def _remote_factory(self) -> RemoteFactory | None:
        return None if self.tier is None else self.tier.remote_segment

    def _sealed(self, base: int) -> Segment | None:
        """The live sealed segment with this base (write lock held)."""
        return next((s for s in self._segments[:-1] if s.base_offset == base), None)

    def local_file(self, base: int) -> Segment | None:
        """The local file of live sealed segment ``base`` (``None``: no such segment, or only remote)."""
        with self.write_lock:
            seg = self._sealed(base)
            return seg if seg is not None and seg.local else None

    def _persist(self, metas: Sequence[SegmentMeta]) -> None:
        store = self.index.store
        wb = store.batch()
        for m in metas:
            store.put_segment(wb, self.index.prefix, m)
        store.write(wb, sync=True)

    # -- offloading: the three state changes ---------------------------------------------------
    def begin_offload(self, base: int, generation: int) -> SegmentMeta | None:
        """Step 1: a copy of the segment's metadata, UPLOADING under its generation (the one given
        for a LOCAL segment, the recorded one for an UPLOADING segment); ``None`` when ``base`` is
        not a live, sealed, non-empty segment with a local file waiting for an upload."""
        with self.write_lock:
            self.check_usable()
            seg = self._sealed(base)
            if seg is None or not seg.local or seg.meta.record_count == 0:
                return None
            m = seg.meta
            if m.tier is TierState.LOCAL:
                m.tier, m.tier_generation = TierState.UPLOADING, generation
                self._persist([m])
            elif m.tier is not TierState.UPLOADING:
                return None
            return replace(m)

    def finish_offload(self, base: int, generation: int, size: int) -> bool:
        """Step 2: UPLOADING → BOTH, if the segment is still the one uploaded (same generation and
        size); whether it changed."""
        with self.write_lock:
            self.check_usable()
            seg = self._sealed(base)
            m = None if seg is None else seg.meta
            if m is None or m.tier is not TierState.UPLOADING or m.tier_generation != generation:
                return False
            if m.size_bytes != size:
                return False
            m.tier = TierState.BOTH
            self._persist([m])
            self._publish()
            return True

    def drop_local_copies(self, bases: Collection[int], now: int, delay_ms: int) -> tuple[int, int, ShardWork]:
        """Step 3 for the segments ``bases`` names whose tier is BOTH: ``(copies dropped, their
        bytes, files removed now)``. Readers holding the old file keep reading it until they let go."""
        work = ShardWork()
        if self.tier is None:
            return 0, 0, work
        wanted = set(bases)
        with self.write_lock:
            self.check_usable()
            chosen = [
                s for s in self._segments[:-1] if s.base_offset in wanted and s.local and s.meta.tier is TierState.BOTH
            ]
            if not chosen:
                return 0, 0, work
            for seg in chosen:
                seg.meta.tier = TierState.REMOTE
            self._persist([seg.meta for seg in chosen])  # from here the catalog says remote
            by_base = {seg.base_offset: self.tier.remote_segment(seg.meta) for seg in chosen}
            self._segments = [by_base.get(s.base_offset, s) for s in self._segments]
            self._layout_changed = True
            self._publish()
        self.retired.retire(chosen, now, delay_ms, work)
        self.counters.add_many({"tier_local_copies_dropped_total": len(chosen)})
        return len(chosen), sum(seg.size for seg in chosen), work

    # -- recall: step 3 undone (storage_engine.tier.recall) -------------------------------------
    def recall_path(self, base: int) -> Path:
        """Where a recalled copy of segment ``base`` goes: the segment's own file name."""
        return self.directory / file_name(base)

    def remote_meta(self, base: int) -> SegmentMeta | None:
        """A copy of live sealed segment ``base``'s metadata if only the object store holds it (REMOTE)."""
        with self.write_lock:
            seg = self._sealed(base)
            if seg is None or seg.local or seg.meta.tier is not TierState.REMOTE:
                return None
            return replace(seg.meta)

    def finish_recall(self, base: int, generation: int, size: int) -> bool:
        """REMOTE → BOTH (one synced write): the verified, fsynced copy already renamed to
        :meth:`recall_path` becomes the segment's local file and reads go local again; only if
        the segment is still the one downloaded (REMOTE, same generation and size). Whether it
        changed (if not, the caller removes the file). A crash before the write leaves a file
        that opening the shard removes (a REMOTE segment has no local file), so the next recall
        downloads it again."""
        with self.write_lock:
            self.check_usable()
            seg = self._sealed(base)
            m = None if seg is None else seg.meta
            if seg is not None and seg.local:
                return False  # never: only a REMOTE segment's copy is downloaded (its file is left alone)
            path = self.recall_path(base)
            stale = m is None or m.tier is not TierState.REMOTE or m.tier_generation != generation
            if m is None or stale or m.size_bytes != size:
                path.unlink(missing_ok=True)  # the segment went or changed meanwhile: the copy is no one's
                return False
            local = Segment.open(path, m)
            if local.size != size:
                local.close()
                path.unlink(missing_ok=True)
                return False
            m.tier = TierState.BOTH
            self._persist([m])  # from here the catalog says both: the file is the local copy
            # The stand-in is left as it is: a reader holding it goes on through the read cache.
            self._segments = [local if s is seg else s for s in self._segments]
            self._layout_changed = True
            self._publish()
            return True

    # -- what other steps do differently ---------------------------------------------------------
    def iter_records(self, view: LogView, start: int, *, min_timestamp: int | None = None) -> Iterator[Record]:
        """As :meth:`ShardLog.iter_records`; a reader whose view still held a local copy that was
        dropped meanwhile (and removed at once: ``file_delete_delay_ms`` 0) goes on from the
        object store, up to its view's end, instead of failing as if the records were deleted."""
        end = view.end_offset
        resume = start
        while True:
            try:
                for r in super().iter_records(view, resume, min_timestamp=min_timestamp):
                    if r.offset >= end:
                        return
                    resume = r.offset + 1
                    yield r
                return
            except SegmentDeletedError:
                current = self.view
                i = bisect_right(current.bases, resume) - 1
                if current is view or i < 0 or current.segments[i].local:
                    raise  # deleted for real (retention, TTL, cleaning): the reader reports it
                self.counters.add("tier_reads_moved_to_remote_total")
                view = current

    def rewrite_segment(self, base: int, now: int, remove: Removal = ()) -> ShardWork:
        """A segment in the object store (*both*, *remote*) is rewritten under a new generation
        (:mod:`storage_engine.tier.rewrite`); others as :meth:`ShardLog.rewrite_segment` (an
        *uploading* one stays *uploading* under its generation: the next offload uploads the new
        file under the same names)."""
        with self.write_lock:
            seg = self._sealed(base)
            tiered = seg is not None and seg.meta.tier.uploaded
        if tiered:
            return ShardWork() if self.rewriter is None else self.rewriter(self, base, now, remove)
        return super().rewrite_segment(base, now, remove)

    # -- rewriting an offloaded segment: the state changes (storage_engine.tier.rewrite) ----------
    def begin_rewrite(self, base: int, generation: int) -> SegmentMeta | None:
        """Intent: the live segment ``base`` (in the object store, no stale generation left) records
        ``generation`` as its stale one before anything is uploaded under it (one synced write), so a
        crash from here leaves objects the next step recognises and deletes. A copy of its metadata,
        or ``None`` when it is not such a segment."""
        with self.write_lock:
            self.check_usable()
            seg = self._sealed(base)
            if seg is None or not seg.meta.tier.uploaded or seg.meta.stale_generation:
                return None
            seg.meta.stale_generation = generation
            self._persist([seg.meta])
            return replace(seg.meta)

    def swap_offloaded_rewrite(self, seg: Segment, rewrite: SegmentRewrite, generation: int) -> ShardWork:
        """The swap of a rewrite uploaded and verified under ``generation``: the shared swap
        (:meth:`ShardLog.swap_rewritten`) from the ``.cleaned`` file, whose WriteBatch is the
        decision. It records the segment *remote* under the new generation with the old one stale,
        so that a crash before the new file replaces the local one leaves a file opening the shard
        removes (:mod:`storage_engine.segment.recovery`): the segment is then read from its new
        objects. Once the file is in place a second synced write says *both*."""
        old = seg.meta
        meta = rewrite.meta
        meta.tier, meta.tier_generation, meta.stale_generation = TierState.BOTH, generation, old.tier_generation
        remote = replace(meta, tier=TierState.REMOTE)
        return self.swap_rewritten(seg, rewrite, rewrite.path, catalog_meta=remote, after=lambda: self._persist([meta]))

    def stale_metas(self) -> list[SegmentMeta]:
        """Copies of the live segments' metadata that name a stale generation."""
        with self.write_lock:
            return [replace(s.meta) for s in self._segments[:-1] if s.meta.stale_generation]

    def clear_stale(self, base: int, generation: int) -> bool:
        """The stale generation's objects are gone: forget it (one synced write), if it is still ``base``'s."""
        with self.write_lock:
            self.check_usable()
            seg = self._sealed(base)
            if seg is None or seg.meta.stale_generation != generation:
                return False
            seg.meta.stale_generation = 0
            self._persist([seg.meta])
            return True

    def _before_forget(self, metas: list[SegmentMeta]) -> None:
        """Delete the objects of deleted segments that were (being) offloaded. Their index entries
        are gone by now (step 2): the metadata first says so (no content flags, one synced write),
        so a crash after the objects went never makes a restart read them again."""
        tiered = [m for m in metas if m.tier is not TierState.LOCAL]
        if not tiered or self.tier is None:
            return
        for m in tiered:
            if m.stale_generation:  # a rewrite's leftovers (storage_engine.tier.rewrite) go first
                self.tier.delete_objects(replace(m, tier_generation=m.stale_generation))
        changed = [m for m in tiered if m.content_flags]
        for m in changed:
            m.content_flags = 0
        if changed:
            self._persist(changed)
        for m in tiered:
            self.tier.delete_objects(m)
