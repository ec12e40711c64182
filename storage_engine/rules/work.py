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

Freed and pending bytes (one definition for every step that deletes: retention,
reclamation, file cleaning, the deadline-driven sweeps; :func:`count_freed`): a
drop or rewrite counts the bytes that leave the store, but a dropped segment's
file may stay on disk renamed ``.deleted`` (``file_delete_delay_ms``, or a reader
holding it) — those bytes are not free yet. So a step's ``bytes_reclaimed`` is
what it freed: the bytes its drops and rewrites took out of the store, minus what
became pending, plus what it removed of the files pending before it (``bytes
taken out + pending before − pending after``); ``pending_delete_bytes`` is what
is still pending after it. A later step (or the cleaner) that removes a pending
file counts its bytes freed then. Stores without files (memory, RocksDB) have
nothing pending: what they drop is freed at once. A dry run computes the pending
bytes the real step would leave from the same rules (the files due now, and
those a drop would keep: ``due_files`` / ``drop_files`` of the
shards), so it reports the same two figures.

A dry run takes no pacing tokens, sleeps never, has no per-call budget (it
reports the whole backlog of work at once, so ``more`` stays false) and leaves
counters, checkpoints and scan positions alone.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from storage_engine.api import DiskStatus, SegmentInfo
from storage_engine.policies.policy import NodePolicy
from storage_engine.rules.cleaning import disk_status


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


def freed(taken_out: int, pending_before: int, pending_after: int) -> int:
    """Bytes actually freed by a step that took ``taken_out`` bytes out of the store while the
    ``.deleted`` files on disk went from ``pending_before`` to ``pending_after`` bytes."""
    return taken_out + pending_before - pending_after


def count_freed(totals: dict[str, Any], pending_before: int, pending_after: int) -> None:
    """Make a step's ``bytes_reclaimed`` (so far: the bytes its drops and rewrites took out of the
    store) the bytes it freed, and its ``pending_delete_bytes`` what is still pending after it
    (see the module docstring)."""
    totals["bytes_reclaimed"] = freed(totals.get("bytes_reclaimed", 0), pending_before, pending_after)
    totals["pending_delete_bytes"] = pending_after


def pending_bytes(shards: Iterable[Any]) -> int:
    """Bytes of the ``.deleted`` files of ``shards`` (``LifecycleShard``) still on disk."""
    return sum(s.pending_file_bytes() for s in shards)


@dataclass(slots=True)
class DryFiles:
    """A dry run's view of the ``.deleted`` files of the shards it works on: the bytes the real step would
    leave pending and the files it would remove — the files due now first (its opening ``remove_files``),
    then those its drops remove at once — from the same rules (``due_files`` / ``drop_files``)."""

    pending: int
    removed: int = 0

    @classmethod
    def start(
        cls, shards: Iterable[Any], now: int, node: NodePolicy, pending_before: int, *, purge: bool = False
    ) -> DryFiles:
        dry = cls(pending_before)
        for s in shards:
            files, nbytes = s.due_files(now, node, purge=purge)
            dry.removed += files
            dry.pending -= nbytes
        return dry

    def drop(self, shard: Any, bases: Collection[int], delay_ms: int) -> None:
        removed, pending = shard.drop_files(bases, delay_ms)
        self.removed += removed
        self.pending += pending

    def finish(self, totals: dict[str, Any], pending_before: int) -> None:
        totals["files_removed"] = totals.get("files_removed", 0) + self.removed
        count_freed(totals, pending_before, self.pending)


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
