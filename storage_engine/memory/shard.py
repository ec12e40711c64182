"""A shard of the memory store (its log, key/tag/TTL indexes and lifecycle mechanisms) and its namespace."""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from storage_engine.api import (
    NamespaceInfo,
    Record,
    SegmentInfo,
    SegmentState,
    ShardStats,
    shard_stats_of,
)
from storage_engine.clock import Clock
from storage_engine.compaction.store_io import RecordCompactionReads
from storage_engine.errors import (
    UnknownNamespaceError,
)
from storage_engine.formats.batch_columns import RecordColumns
from storage_engine.lifecycle import (
    KEEP,
    Removal,
    ShardWork,
    TTLEntry,
    check_indexes,
    removal_rule,
)
from storage_engine.memory.segment import MemorySegment
from storage_engine.policies.policy import NamespacePolicy, NodePolicy
from storage_engine.rules.expiry import is_expired
from storage_engine.rules.figures import FiguresCache, SegmentFacts
from storage_engine.rules.rolling import expired_roll_due


@dataclass(slots=True, eq=False)
class MemoryNamespace:
    name: str
    policy: NamespacePolicy
    created_at: int
    shards: list[MemoryShard] = field(default_factory=list)
    # The TTL index's order: (expire_at, shard, offset); a shard's ``ttl`` dict says
    # which entries still exist (the rest leave the heap lazily).
    ttl_heap: list[tuple[int, int, int]] = field(default_factory=list)
    ttl_lock: threading.Lock = field(default_factory=threading.Lock)

    def info(self) -> NamespaceInfo:
        return NamespaceInfo(self.name, len(self.shards), self.policy, self.created_at)


class MemoryShard(RecordCompactionReads):
    """One shard's log and indexes; every field is guarded by ``lock``."""

    def __init__(self, namespace: MemoryNamespace, index: int, now: int, clock: Clock) -> None:
        self.namespace = namespace
        self.index = index
        self.shard = index
        self.clock = clock
        self.lock = threading.Lock()
        self.segments = [MemorySegment(0, now, now)]
        self.bases = [0]
        self.end_offset = 0
        self.keys: dict[bytes, int] = {}  # key → latest offset
        self.tags: dict[str, list[int]] = {}  # tag → ascending offsets
        self.ttl: dict[int, int] = {}  # offset → expire_at: the TTL index of this shard
        self.deleted = False
        self.figures = FiguresCache()  # expired figures of partly expired segments
        self._cleaner_checkpoint: bytes | None = None  # key compaction's (CleanerState.pack())

    @property
    def log_start_offset(self) -> int:
        return self.segments[0].base_offset

    def roll(self, now: int) -> MemorySegment:
        segment = MemorySegment(self.end_offset, now, now)
        self.segments.append(segment)
        self.bases.append(segment.base_offset)
        return segment

    def scan(self, offset: int, *, skip_dead: bool = False) -> Iterator[tuple[Record, int]]:
        """Records at or after ``offset`` with their sizes (without those marked dead, if asked)."""
        first = max(bisect_right(self.bases, offset) - 1, 0)
        for segment in self.segments[first:]:
            sizes = segment.sizes
            dead = segment.dead if skip_dead else ()
            for i in range(max(offset - segment.base_offset, 0), len(sizes)):
                r = segment.record(i)
                if r is not None and r.offset not in dead:
                    yield r, sizes[i]

    # -- reads (storage_engine.rules.reads.ReadableShard) --------------------------------------------
    @property
    def policy(self) -> NamespacePolicy:
        return self.namespace.policy

    @contextmanager
    def reading(self) -> Iterator[MemoryShard]:
        with self.lock:
            if self.deleted:
                raise UnknownNamespaceError(self.namespace.name)
            yield self

    def current_bounds(self) -> tuple[int, int]:
        return self.log_start_offset, self.end_offset

    def scan_live(self, view: object, start: int, expired_before: int | None) -> Iterator[tuple[Record, int]]:
        # Dead records are gone even when their own fields do not say so (a bulk-loaded TTL fired).
        return self.scan(start, skip_dead=True)

    def first_at_or_after(self, view: object, timestamp: int) -> int | None:
        for segment in self.segments:
            if segment.max_ts_so_far and segment.max_ts_so_far[-1] >= timestamp:
                return segment.base_offset + bisect_left(segment.max_ts_so_far, timestamp)
        return None

    def key_offset(self, key: bytes) -> int | None:
        return self.keys.get(key)

    def tag_offsets(self, tag: str, start: int, end: int, limit: int) -> list[int]:
        offsets = self.tags.get(tag, [])
        i = bisect_left(offsets, start)
        return [o for o in offsets[i : i + limit] if o < end]

    def fetch(self, view: object, offsets: Sequence[int]) -> list[Record]:
        found = (self.record_at(o) for o in offsets)
        return [r for r in found if r is not None]

    def segment_at(self, offset: int) -> MemorySegment | None:
        segment = self.segments[max(bisect_right(self.bases, offset) - 1, 0)]
        return segment if segment.base_offset <= offset <= segment.last_offset else None

    def record_at(self, offset: int) -> Record | None:
        segment = self.segment_at(offset)
        return None if segment is None else segment.record(offset - segment.base_offset)

    def infos(self) -> list[SegmentInfo]:
        """The segments with their expired figures at the clock's now."""
        last = len(self.segments) - 1
        now, ttl_ms = self.clock.now_ms(), self.namespace.policy.ttl_ms
        infos = [
            seg.info(
                self.namespace.name,
                self.index,
                SegmentState.ACTIVE if i == last else SegmentState.SEALED,
                self.figures.figures(seg.facts(), ttl_ms, now, seg.rows),
            )
            for i, seg in enumerate(self.segments)
        ]
        self.figures.retain(seg.base_offset for seg in self.segments)
        return infos

    def stats(self) -> ShardStats:
        return shard_stats_of(self.namespace.name, self.index, self.log_start_offset, self.end_offset, self.infos())

    # -- lifecycle (LifecycleShard) ----------------------------------------------------------
    def _unindex(self, r: Record) -> int:
        """Delete a record's tag entries, its key entry if it still points at it, its TTL entry."""
        n = 0
        for tag in dict.fromkeys(r.tags):
            offsets = self.tags.get(tag)
            if offsets is not None:
                i = bisect_left(offsets, r.offset)
                if i < len(offsets) and offsets[i] == r.offset:
                    del offsets[i]
                    n += 1
                if not offsets:
                    del self.tags[tag]
        if r.key is not None and self.keys.get(r.key) == r.offset:
            del self.keys[r.key]
            n += 1
        if self.ttl.pop(r.offset, None) is not None:
            n += 1
        return n

    def _mark_dead(self, segment: MemorySegment, r: Record, work: ShardWork) -> None:
        work.index_entries_deleted += self._unindex(r)
        segment.dead.add(r.offset)
        segment.dead_bytes += segment.sizes[r.offset - segment.base_offset]
        work.expired_records += 1

    def lifecycle_segments(self) -> list[SegmentInfo]:
        with self.lock:
            return self.infos()

    def due_facts(self) -> tuple[object | None, Callable[[], list[SegmentFacts]], SegmentFacts]:
        """For due times (:mod:`storage_engine.rules.due`); no layout token: recomputed every call."""
        with self.lock:
            facts = [seg.facts() for seg in self.segments]
        return None, lambda: facts[:-1], facts[-1]

    def expired_roll_due(self, policy: NamespacePolicy, now: int) -> int | None:
        """When the active segment passes its expired-share roll threshold (:mod:`storage_engine.rules.due`)."""
        with self.lock:
            active = self.segments[-1]
            facts = active.facts()
            return expired_roll_due(
                policy,
                facts.record_count,
                active.created_at,
                lambda n: self.figures.expired_by(facts, policy.ttl_ms, now, active.rows, n),
            )

    def roll_empty(self, now: int) -> bool:
        with self.lock:
            if not self.segments[-1].records:
                return False
            self.roll(now)
            return True

    def drop_segments(self, bases: Sequence[int], now: int, delay_ms: int) -> ShardWork:
        work = ShardWork()
        wanted = set(bases)
        with self.lock:
            doomed = [seg for seg in self.segments[:-1] if seg.base_offset in wanted]
            for seg in doomed:
                for r in seg.present():
                    if r.offset not in seg.dead:
                        work.index_entries_deleted += self._unindex(r)
                work.segments_deleted += 1
                work.records_removed += seg.stored
                work.bytes_reclaimed += seg.size_bytes
            gone = {id(seg) for seg in doomed}
            self.segments = [seg for seg in self.segments if id(seg) not in gone]
            self.bases = [seg.base_offset for seg in self.segments]
        return work

    def rewrite_segment(self, base: int, now: int, remove: Removal = ()) -> ShardWork:
        """Mark the segment's expired records dead, then free the slots of the dead ones
        and of the live records ``remove`` names (key compaction: offsets or a
        :data:`~storage_engine.lifecycle.RemovalRule`; their index entries go)."""
        work = ShardWork()
        ttl_ms = self.namespace.policy.ttl_ms
        rule = removal_rule(remove)
        with self.lock:
            seg = next((s for s in self.segments[:-1] if s.base_offset == base), None)
            if seg is None:
                return work
            for r in list(seg.present()):
                if r.offset not in seg.dead and is_expired(r.timestamp, r.expire_at, ttl_ms, now):
                    self._mark_dead(seg, r, work)
            if rule is not None:
                live = [r for r in seg.present() if r.offset not in seg.dead]
                for r, d in zip(live, rule(RecordColumns.of_records(live)), strict=True):
                    if d != KEEP:
                        work.index_entries_deleted += self._unindex(r)
                        seg.dead.add(r.offset)  # freed below with the dead ones
            if not seg.dead:
                return work
            if len(seg.dead) < seg.stored:
                for offset in seg.dead:
                    i = offset - seg.base_offset
                    seg.records[i] = None
                    work.bytes_reclaimed += seg.sizes[i]
                    seg.size_bytes -= seg.sizes[i]
                    seg.sizes[i] = 0
                work.records_removed += len(seg.dead)
                seg.stored -= len(seg.dead)
                seg.dead = set()
                seg.dead_bytes = 0
                work.segments_rewritten += 1
                return work
        return work.add(self.drop_segments([base], now, 0))

    # -- key compaction (storage_engine.compaction.store_io.CompactableShard) ------------------------
    def compaction_records(self, base: int) -> list[Record]:
        """Every stored record of segment ``base`` (key compaction reads them)."""
        with self.lock:
            seg = next((s for s in self.segments if s.base_offset == base), None)
            return [] if seg is None else list(seg.present())

    def removed_bytes(self, info: SegmentInfo, remove: Collection[int]) -> int:
        """Bytes a rewrite of segment ``info`` without ``remove`` frees."""
        with self.lock:
            seg = next((s for s in self.segments if s.base_offset == info.base_offset), None)
            if seg is None:
                return 0
            return sum(seg.sizes[o - seg.base_offset] for o in remove if seg.base_offset <= o <= seg.last_offset)

    def cleaner_checkpoint(self) -> bytes | None:
        return self._cleaner_checkpoint

    def save_cleaner_checkpoint(self, raw: bytes) -> None:
        self._cleaner_checkpoint = raw

    def expire_entries(self, entries: Sequence[TTLEntry], now: int) -> ShardWork:
        work = ShardWork()
        with self.lock:
            for e in entries:
                if self.ttl.get(e.offset) != e.expire_at:
                    continue  # already gone (its segment was dropped)
                segment = self.segment_at(e.offset)
                r = None if segment is None else segment.record(e.offset - segment.base_offset)
                if segment is None or r is None:
                    del self.ttl[e.offset]
                    work.index_entries_deleted += 1
                    continue
                if r.expire_at != e.expire_at:  # a bulk-loaded deadline: verify needs to know why it died
                    segment.deadlines[e.offset] = e.expire_at
                    self.figures.forget(segment.base_offset)  # killed before its own deadline, maybe
                self._mark_dead(segment, r, work)
        return work

    def expire_offsets(self, offsets: Sequence[int], now: int) -> ShardWork:
        work = ShardWork()
        ttl_ms = self.namespace.policy.ttl_ms
        with self.lock:
            for offset in offsets:
                segment = self.segment_at(offset)
                r = None if segment is None else segment.record(offset - segment.base_offset)
                if segment is None or r is None or offset in segment.dead:
                    continue
                if is_expired(r.timestamp, r.expire_at, ttl_ms, now):
                    self._mark_dead(segment, r, work)
        return work

    def remove_due_files(self, now: int, node: NodePolicy, *, purge: bool = False) -> ShardWork:
        return ShardWork()  # no files: a dropped segment's memory is released at once

    def pending_file_bytes(self) -> int:
        return 0  # no files: nothing ever waits for removal

    def due_files(self, now: int, node: NodePolicy, *, purge: bool = False) -> tuple[int, int]:
        return 0, 0

    def drop_files(self, bases: Collection[int], delay_ms: int) -> tuple[int, int]:
        return 0, 0

    def compact_deleted(self) -> None:
        """Nothing to compact in memory."""

    def verify(self, now: int) -> tuple[int, int, list[str]]:
        with self.lock:
            records = {r.offset: r for seg in self.segments for r in seg.present()}
            dead = set().union(*(seg.dead for seg in self.segments))
            counts = {seg.base_offset: (seg.stored, seg.stored - len(seg.dead)) for seg in self.segments}
            keys = list(self.keys.items())
            tags = [(t, o) for t, offsets in self.tags.items() for o in offsets]
            ttl = [(e, o) for o, e in self.ttl.items()]

            def segment_of(offset: int) -> int | None:
                seg = self.segment_at(offset)
                return None if seg is None else seg.base_offset

            checked, problems = check_indexes(
                f"{self.namespace.name}/{self.index}",
                records,
                segment_of,
                counts,
                dead,
                keys,
                tags,
                ttl,
                self.namespace.policy.ttl_ms,
                now,
                {o: d for seg in self.segments for o, d in seg.deadlines.items()},
            )
        return len(records), checked, problems
