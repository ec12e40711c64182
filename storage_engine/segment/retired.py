"""The retired segment files of one shard: files that left the log and wait to be removed
(:class:`RetiredFiles`, the part :class:`~storage_engine.segment.log.ShardLog` composes as ``retired``).

A segment file leaves the log when its segment is deleted (retention, cleaning, reclamation: the end
of :class:`~storage_engine.segment.shard.ShardBase`'s deletion protocol) or when its local copy is
dropped because the object store holds the segment
(:meth:`~storage_engine.segment.tiered_log.TieredShardLog.drop_local_copies`). Here it is:

1. renamed from ``<base>.log`` to ``<base>.log.deleted`` in the shard's directory (base offset
   in 20 digits, :func:`~storage_engine.segment.segment.file_name` +
   :data:`~storage_engine.segment.segment.DELETED_SUFFIX`); one directory fsync covers every file
   renamed in the same call;
2. removed at once when there is no delay and no reader holds it (:meth:`Segment.retain
   <storage_engine.segment.segment.Segment.retain>`), else kept pending, in memory only, with
   the time it was retired and its delay (the caller's: the node policy's
   ``file_delete_delay_ms``, or 0);
3. each pending file is removed by :meth:`RetiredFiles.remove_due` once its delay has passed
   (with ``purge``, when the disk is above a watermark: at once) and no reader holds it; one still
   held ``destroy_forcibly_after_ms`` after it was retired is removed anyway (the reader gets
   :class:`~storage_engine.errors.SegmentDeletedError` on its next read), counted in
   ``segments_destroyed_forcibly_total``.

Pending files count towards the disk's used bytes (:meth:`RetiredFiles.pending_bytes`). A crash or
a close forgets the pending list; opening the shard removes every ``.deleted`` file left
(:mod:`storage_engine.segment.recovery`).

A lifecycle step's ``bytes_reclaimed`` counts a file's bytes when the file is removed, not when it
is renamed (:func:`storage_engine.rules.work.count_freed`); a dry run asks the same rules what a real
step would remove now (:meth:`RetiredFiles.due`) and what it would leave pending
(:meth:`RetiredFiles.stays_pending`).
"""

from __future__ import annotations

import logging
import threading

from storage_engine.lifecycle import ShardWork
from storage_engine.lifecycle.counters import Counters
from storage_engine.policies.policy import NodePolicy
from storage_engine.segment.datadir import fsync_dir
from storage_engine.segment.segment import DELETED_SUFFIX, Segment, file_name

log = logging.getLogger(__name__)


class RetiredFiles:
    """One shard's ``.deleted`` files not yet removed (any thread; one lock guards the list)."""

    def __init__(self, route: str, counters: Counters) -> None:
        self._route = route
        self._counters = counters
        self._pending: list[tuple[Segment, int, int]] = []  # (.deleted file, retired at, delay ms)
        self._lock = threading.Lock()

    def retire(self, segments: list[Segment], now: int, delay_ms: int, work: ShardWork) -> None:
        """Rename the segments' files ``.deleted`` (one directory fsync for all), then remove each now
        when there is no delay and no reader holds it, else keep it for :meth:`remove_due`."""
        for seg in segments:
            seg.rename(seg.path.with_name(file_name(seg.base_offset) + DELETED_SUFFIX), sync=False)
        if segments:
            fsync_dir(segments[0].path.parent)
        for seg in segments:
            size = seg.size
            if not self.stays_pending(seg, delay_ms) and seg.remove():
                work.files_removed += 1
                work.files_removed_bytes += size
            else:
                with self._lock:
                    self._pending.append((seg, now, delay_ms))

    @staticmethod
    def stays_pending(seg: Segment, delay_ms: int) -> bool:
        """Whether retiring ``seg`` now with ``delay_ms`` leaves its file on disk as ``.deleted``:
        there is a delay, or a reader holds it."""
        return delay_ms > 0 or seg.refs > 0

    def remove_due(self, now: int, node: NodePolicy, *, purge: bool = False) -> ShardWork:
        """Remove ``.deleted`` files whose delay has passed (with ``purge``: every one, the
        disk is above a watermark) and that no reader holds; one held longer than
        ``destroy_forcibly_after_ms`` goes anyway. A purge respects readers exactly as
        the delay does: a held file stays pending."""
        work = ShardWork()
        with self._lock:
            keep: list[tuple[Segment, int, int]] = []
            for seg, at, delay in self._pending:
                if not self._due(at, delay, now, purge):
                    keep.append((seg, at, delay))
                    continue
                size = seg.size
                if seg.remove():
                    pass
                elif self._forced(at, now, node):
                    seg.remove(force=True)
                    self._counters.add("segments_destroyed_forcibly_total")
                    log.warning("%s: removed %s although a reader still holds it", self._route, seg.path.name)
                else:
                    keep.append((seg, at, delay))
                    continue
                work.files_removed += 1
                work.files_removed_bytes += size
            self._pending = keep
        return work

    def due(self, now: int, node: NodePolicy, *, purge: bool = False) -> tuple[int, int]:
        """``(files, bytes)`` :meth:`remove_due` would remove now, by the same rules (a dry run's)."""
        with self._lock:
            sizes = [
                seg.size
                for seg, at, delay in self._pending
                if self._due(at, delay, now, purge) and (seg.refs == 0 or self._forced(at, now, node))
            ]
        return len(sizes), sum(sizes)

    @staticmethod
    def _due(at: int, delay: int, now: int, purge: bool) -> bool:
        return purge or now - at >= delay

    @staticmethod
    def _forced(at: int, now: int, node: NodePolicy) -> bool:
        """Held by a reader too long: removed anyway."""
        return now - at >= node.destroy_forcibly_after_ms

    def pending_bytes(self) -> int:
        """Bytes of ``.deleted`` files not yet removed (part of the disk's used bytes)."""
        with self._lock:
            return sum(seg.size for seg, _, _ in self._pending)

    def close(self) -> None:
        """Close every pending file and forget them (the shard closes; its next open removes the files)."""
        with self._lock:
            for seg, _, _ in self._pending:
                seg.close()
            self._pending = []
