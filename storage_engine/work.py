"""What a lifecycle step does to a shard, and what it would do (a dry run).

:class:`ShardWork` is one shard's share of a step, summed into a
:class:`~storage_engine.api.LifecycleResult`. A dry run takes every decision a
real step takes, from the same rules, and at each point where the real step
would change the store it counts the work from the segments' metadata instead
(``would_*``), so what it reports is what the step would do now:

- a whole-segment drop (retention, reclamation, file cleaning) removes the
  segment's records and bytes, as the real drop counts them;
- a rewrite (reclamation) removes the segment's expired and dead records
  (``SegmentInfo.expired_records`` / ``expired_bytes``, the engine's one
  definition of those figures);
- a TTL scan marks each due TTL-index entry's record dead (a record already
  dead has no entry left, so none is counted twice);
- file cleaning's watermark checks see the disk as the drops so far would
  leave it (:func:`after_freeing`).

A dry run takes no pacing tokens, sleeps never, has no per-call budget (it
reports the whole backlog of work at once, so ``more`` stays false) and leaves
counters, checkpoints and scan positions alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from storage_engine.api import DiskStatus, SegmentInfo
from storage_engine.cleaning import disk_status
from storage_engine.policy import NodePolicy


@dataclass(slots=True)
class ShardWork:
    """What a shard did for one lifecycle step; summed into a :class:`LifecycleResult`."""

    scanned: int = 0
    expired_records: int = 0
    index_entries_deleted: int = 0
    segments_deleted: int = 0
    segments_rewritten: int = 0
    records_removed: int = 0
    bytes_reclaimed: int = 0
    files_removed: int = 0
    files_removed_bytes: int = 0
    forced_deletes: int = 0
    rolled: int = 0

    def add(self, other: ShardWork) -> ShardWork:
        for f in fields(other):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self


def sum_work(result: dict[str, Any], work: ShardWork) -> None:
    for f in fields(work):
        result[f.name] = result.get(f.name, 0) + getattr(work, f.name)


def would_drop(segments: Sequence[SegmentInfo]) -> ShardWork:
    """Dropping these segments whole: every record and byte they hold leaves."""
    return ShardWork(
        segments_deleted=len(segments),
        records_removed=sum(seg.record_count for seg in segments),
        bytes_reclaimed=sum(seg.size_bytes for seg in segments),
    )


def would_rewrite(segment: SegmentInfo) -> ShardWork:
    """Rewriting a segment without its dead and expired records."""
    return ShardWork(
        segments_rewritten=1, records_removed=segment.expired_records, bytes_reclaimed=segment.expired_bytes
    )


def would_expire(entries: int) -> ShardWork:
    """A TTL scan marking the records of ``entries`` due TTL-index entries dead."""
    return ShardWork(expired_records=entries)


def after_freeing(status: DiskStatus, freed: int, node: NodePolicy, pending: int | None = None) -> DiskStatus:
    """The disk as ``status`` once ``freed`` more bytes are gone, with ``pending`` bytes of
    ``.deleted`` files left (unchanged if ``None``): what a dry run's cleaner looks at."""
    return disk_status(
        max(0, status.used_bytes - freed),
        status.capacity_bytes,
        node,
        status.source,
        status.pending_delete_bytes if pending is None else pending,
    )
