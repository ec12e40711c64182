"""The in-memory adapter: the whole contract without files, for tests and
low-latency use. Nothing survives :meth:`MemoryAdapter.close`.

Segments are logical (DESIGN §2): they roll by :func:`record_size` and age by
the same rule as the file adapter (:func:`should_roll`), so the catalog looks
the same whichever adapter a node runs.

Lifecycle (DESIGN §3) through the engine's parts
(:class:`~storage_engine.engine.Engine`): the TTL index is a heap
per namespace over a dict per shard (the dict is the index, the heap orders
it; entries leave the heap lazily), dead records are a set per segment, a
rewrite frees the slots of dead records (offsets stay positional), and whole
segments leave the list. "Disk" use is the stored bytes against
``EngineConfig.disk_capacity_bytes``.
"""

from __future__ import annotations

import heapq
import threading
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import accumulate
from operator import attrgetter
from pathlib import Path

from storage_engine.api import (
    AppendResult,
    EngineStats,
    NamespaceInfo,
    NewRecord,
    Record,
    SegmentInfo,
    SegmentState,
    ShardStats,
    shard_stats_of,
)
from storage_engine.clock import Clock
from storage_engine.codec import RecordColumns
from storage_engine.compaction_io import CompactableShard, RecordCompactionReads
from storage_engine.config import EngineConfig
from storage_engine.engine import Engine
from storage_engine.errors import (
    EngineClosedError,
    NamespaceExistsError,
    UnknownNamespaceError,
)
from storage_engine.expiry import is_expired
from storage_engine.figures import ExpiredFigures, FiguresCache, ProfileRow, SegmentFacts
from storage_engine.lifecycle import (
    KEEP,
    LifecycleShard,
    Removal,
    ShardWork,
    TTLEntry,
    check_indexes,
    removal_rule,
)
from storage_engine.policy import NamespacePolicy, NodePolicy
from storage_engine.rolling import should_roll
from storage_engine.segment.counters import Counters
from storage_engine.ttl_import import import_dir, import_file
from storage_engine.validation import (
    check_policy,
    check_shard,
    find_namespace,
    validate_namespace_name,
    validate_records,
    validate_shard_count,
)

TTL_POP_CHUNK = 64  # entries the TTL scan takes off a namespace's heap per hold of its lock


@dataclass(slots=True, eq=False)
class _Segment:
    """A logical segment. Records are kept as the producer's (immutable)
    :class:`NewRecord` beside their final timestamp, and a :class:`Record` is
    built only when read, which keeps appends cheap."""

    base_offset: int
    created_at: int
    modified_at: int
    # ``None``: the slot of a record removed by a rewrite (offsets are positional).
    records: list[NewRecord | None] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    # Running maximum of timestamps: non-decreasing, so bisect finds the first
    # record with timestamp ≥ t even when producer timestamps go backwards.
    max_ts_so_far: list[int] = field(default_factory=list)
    size_bytes: int = 0
    min_timestamp: int | None = None
    max_expire_at: int | None = None
    min_expire_at: int | None = None  # a lower bound once a rewrite removed records (enough for the figures)
    has_unbounded: bool = False
    stored: int = 0  # records not removed by a rewrite
    dead: set[int] = field(default_factory=set)  # offsets marked dead (layer 2)
    deadlines: dict[int, int] = field(default_factory=dict)  # dead by a bulk-loaded TTL entry: its deadline
    dead_bytes: int = 0

    def extend(self, records: Sequence[NewRecord], stamps: list[int], sizes: list[int]) -> None:
        running = accumulate(stamps, max, initial=self.max_ts_so_far[-1] if self.max_ts_so_far else stamps[0])
        next(running)  # the initial value is not a record's
        self.max_ts_so_far.extend(running)
        low = min(stamps)
        self.min_timestamp = low if self.min_timestamp is None else min(low, self.min_timestamp)
        explicit = [r.expire_at for r in records if r.expire_at is not None]
        self.has_unbounded = self.has_unbounded or len(explicit) < len(records)
        if explicit:
            self.max_expire_at = max(explicit) if self.max_expire_at is None else max(self.max_expire_at, *explicit)
            self.min_expire_at = min(explicit) if self.min_expire_at is None else min(self.min_expire_at, *explicit)
        self.records.extend(records)
        self.timestamps.extend(stamps)
        self.sizes.extend(sizes)
        self.size_bytes += sum(sizes)
        self.stored += len(records)

    def record(self, i: int) -> Record | None:
        r = self.records[i]
        if r is None:
            return None
        return Record(self.base_offset + i, self.timestamps[i], r.value, r.key, r.tags, r.headers, r.expire_at)

    def present(self) -> Iterator[Record]:
        for i in range(len(self.records)):
            r = self.record(i)
            if r is not None:
                yield r

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    def facts(self) -> SegmentFacts:
        count = len(self.records)
        return SegmentFacts(
            base_offset=self.base_offset,
            last_offset=self.base_offset + count - 1,
            record_count=self.stored,
            live_count=self.stored - len(self.dead),
            size_bytes=self.size_bytes,
            dead_bytes=self.dead_bytes,
            min_timestamp=self.min_timestamp,
            max_timestamp=self.max_ts_so_far[-1] if count else None,
            min_expire_at=self.min_expire_at,
            max_expire_at=self.max_expire_at,
            has_unbounded=self.has_unbounded,
        )

    def rows(self, first: int, last: int) -> Iterator[ProfileRow]:
        """The figures' view of the stored records ``first..last`` (storage_engine.figures)."""
        for i in range(first - self.base_offset, last - self.base_offset + 1):
            r = self.records[i]
            if r is not None:
                yield self.timestamps[i], r.expire_at, self.sizes[i], self.base_offset + i in self.dead

    def info(self, namespace: str, shard: int, state: SegmentState, figures: ExpiredFigures) -> SegmentInfo:
        count = len(self.records)
        return SegmentInfo(
            namespace=namespace,
            shard=shard,
            base_offset=self.base_offset,
            last_offset=self.base_offset + count - 1,
            record_count=self.stored,
            live_count=self.stored - figures.records,
            size_bytes=self.size_bytes,
            min_timestamp=self.min_timestamp,
            max_timestamp=self.max_ts_so_far[-1] if count else None,
            max_expire_at=self.max_expire_at,
            has_unbounded=self.has_unbounded,
            state=state,
            created_at=self.created_at,
            modified_at=self.modified_at,
            expired_records=figures.records,
            expired_bytes=figures.bytes,
            deadline=figures.deadline,
            min_expire_at=self.min_expire_at,
            first_timestamp=self.timestamps[0] if count else None,
        )


@dataclass(slots=True, eq=False)
class _Namespace:
    name: str
    policy: NamespacePolicy
    created_at: int
    shards: list[_Shard] = field(default_factory=list)
    # The TTL index's order: (expire_at, shard, offset); a shard's ``ttl`` dict says
    # which entries still exist (the rest leave the heap lazily).
    ttl_heap: list[tuple[int, int, int]] = field(default_factory=list)
    ttl_lock: threading.Lock = field(default_factory=threading.Lock)

    def info(self) -> NamespaceInfo:
        return NamespaceInfo(self.name, len(self.shards), self.policy, self.created_at)


class _Shard(RecordCompactionReads):
    """One shard's log and indexes; every field is guarded by ``lock``."""

    def __init__(self, namespace: _Namespace, index: int, now: int, clock: Clock) -> None:
        self.namespace = namespace
        self.index = index
        self.shard = index
        self.clock = clock
        self.lock = threading.Lock()
        self.segments = [_Segment(0, now, now)]
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

    def roll(self, now: int) -> _Segment:
        segment = _Segment(self.end_offset, now, now)
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

    # -- reads (storage_engine.reads.ReadableShard) --------------------------------------------
    @property
    def policy(self) -> NamespacePolicy:
        return self.namespace.policy

    @contextmanager
    def reading(self) -> Iterator[_Shard]:
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

    def segment_at(self, offset: int) -> _Segment | None:
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

    def _mark_dead(self, segment: _Segment, r: Record, work: ShardWork) -> None:
        work.index_entries_deleted += self._unindex(r)
        segment.dead.add(r.offset)
        segment.dead_bytes += segment.sizes[r.offset - segment.base_offset]
        work.expired_records += 1

    def lifecycle_segments(self) -> list[SegmentInfo]:
        with self.lock:
            return self.infos()

    def due_facts(self) -> tuple[object | None, Callable[[], list[SegmentFacts]], SegmentFacts]:
        """For due times (:mod:`storage_engine.due`); no layout token: recomputed every call."""
        with self.lock:
            facts = [seg.facts() for seg in self.segments]
        return None, lambda: facts[:-1], facts[-1]

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

    # -- key compaction (storage_engine.compaction_io.CompactableShard) ------------------------
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


MEMORY_NS_ID = 0  # the namespace id TTL-index keys carry for this adapter (it has no ids)


class MemoryAdapter(Engine):
    name = "memory"

    def __init__(self, config: EngineConfig, clock: Clock) -> None:
        self._config = config
        self._clock = clock
        self.config = config
        self.clock = clock
        self._lock = threading.Lock()  # guards the namespace catalog and counters
        self._namespaces: dict[str, _Namespace] = {}
        self.counters = Counters()
        self.counters.set_many(
            dict.fromkeys(
                ("append_batches_total", "append_records_total", "append_bytes_total", "read_requests_total"), 0
            )
        )
        self._closed = False
        self._compose(config, clock)

    # -- helpers ----------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise EngineClosedError()

    def _namespace(self, name: str) -> _Namespace:
        self._check_open()
        return find_namespace(self._namespaces, name)  # a single dict read is atomic; writers hold _lock

    def _readable_shard(self, namespace: str, shard: int) -> _Shard:
        return self._shard(namespace, shard)

    def _shard(self, namespace: str, shard: int) -> _Shard:
        ns = self._namespace(namespace)
        return ns.shards[check_shard(namespace, shard, len(ns.shards))]

    @staticmethod
    def _check_live(s: _Shard) -> None:
        """Called under ``s.lock``: the namespace may have been deleted since lookup."""
        if s.deleted:
            raise UnknownNamespaceError(s.namespace.name)

    # -- namespaces ---------------------------------------------------------------
    def create_namespace(self, name: str, shards: int, policy: NamespacePolicy | None = None) -> NamespaceInfo:
        self._check_open()
        validate_namespace_name(name)
        validate_shard_count(shards)
        policy = check_policy(NamespacePolicy() if policy is None else policy)
        with self._lock:
            if name in self._namespaces:
                raise NamespaceExistsError(name)
            now = self._clock.now_ms()
            ns = _Namespace(name, policy, now)
            ns.shards = [_Shard(ns, i, now, self._clock) for i in range(shards)]
            self._namespaces[name] = ns
            return ns.info()

    def update_namespace(self, name: str, policy: NamespacePolicy) -> NamespaceInfo:
        check_policy(policy)
        ns = self._namespace(name)
        ns.policy = policy  # appends read the policy once, so a swap is atomic for them
        return ns.info()

    def delete_namespace(self, name: str) -> None:
        self._check_open()
        with self._lock:
            ns = find_namespace(self._namespaces, name)
            del self._namespaces[name]
        for s in ns.shards:
            with s.lock:
                s.deleted = True
        self.lifecycle.read_checks.forget(name)
        self.subscriptions.forget(name)

    def list_namespaces(self) -> list[NamespaceInfo]:
        self._check_open()
        with self._lock:
            namespaces = sorted(self._namespaces.values(), key=attrgetter("name"))
        return [ns.info() for ns in namespaces]

    def get_namespace(self, name: str) -> NamespaceInfo:
        return self._namespace(name).info()

    # -- data ---------------------------------------------------------------------
    def append(self, namespace: str, shard: int, records: Sequence[NewRecord]) -> AppendResult:
        with self.foreground.running():  # the TTL scan gives way while an append runs (pacing.Foreground)
            return self._append(namespace, shard, records)

    def _append(self, namespace: str, shard: int, records: Sequence[NewRecord]) -> AppendResult:
        s = self._shard(namespace, shard)
        policy = s.namespace.policy
        sizes = validate_records(records, policy)  # before the lock: the batch is all-or-nothing
        batch_bytes = sum(sizes)
        if records:
            self.lifecycle.runtime.disk.guard(batch_bytes)
            if policy.backlog_quota_bytes is not None or policy.backlog_quota_seconds is not None:
                with self.foreground.idle():  # a producer held by the quota waits: no scan waits on it
                    self.subscriptions.check_quota(namespace, policy)
        expiring: list[tuple[int, int, int]] = []
        with s.lock:
            self._check_live(s)
            base = s.end_offset
            if not records:
                return AppendResult(base, 0)
            now = self._clock.now_ms()
            segment = s.segments[-1]
            stamps = [now if r.timestamp is None else r.timestamp for r in records]
            first_ts = segment.timestamps[0] if segment.timestamps else None
            if should_roll(policy, len(segment.records), segment.size_bytes, first_ts, batch_bytes, max(stamps)):
                segment = s.roll(now)
            segment.extend(records, stamps, sizes)
            for offset, r in enumerate(records, base):
                if r.key is not None:
                    s.keys[r.key] = offset
                if r.tags:
                    for tag in dict.fromkeys(r.tags):  # a tag repeated on one record is indexed once
                        s.tags.setdefault(tag, []).append(offset)
                if r.expire_at is not None:
                    s.ttl[offset] = r.expire_at
                    expiring.append((r.expire_at, shard, offset))
            segment.modified_at = now
            s.end_offset = base + len(records)
        if expiring:
            ns = s.namespace
            with ns.ttl_lock:
                for item in expiring:
                    heapq.heappush(ns.ttl_heap, item)
        self.counters.add_many(
            {"append_batches_total": 1, "append_records_total": len(records), "append_bytes_total": batch_bytes}
        )
        return AppendResult(base, len(records))

    # -- metadata -----------------------------------------------------------------
    def list_segments(self, namespace: str, shard: int) -> list[SegmentInfo]:
        s = self._shard(namespace, shard)
        with s.lock:
            self._check_live(s)
            return s.infos()

    def shard_stats(self, namespace: str, shard: int) -> ShardStats:
        s = self._shard(namespace, shard)
        with s.lock:
            self._check_live(s)
            return s.stats()

    def stats(self) -> EngineStats:
        self._check_open()
        with self._lock:
            namespaces = sorted(self._namespaces.values(), key=attrgetter("name"))
        counters = self.counters.snapshot()
        counters.update(self.lifecycle.counters())
        shards = []
        for ns in namespaces:
            for s in ns.shards:
                with s.lock:
                    shards.append(s.stats())
        return EngineStats(self.name, len(namespaces), tuple(shards), counters)

    # -- lifecycle hooks (ShardSource) -------------------------------------------------------
    def lifecycle_namespace(self, name: str) -> tuple[NamespacePolicy, Sequence[_Shard]]:
        ns = self._namespace(name)
        return ns.policy, ns.shards

    def compaction_namespace(self, name: str) -> tuple[NamespacePolicy, Sequence[CompactableShard]]:
        return self.lifecycle_namespace(name)

    def lifecycle_namespaces(self) -> list[tuple[NamespacePolicy, Sequence[LifecycleShard]]]:
        self._check_open()
        with self._lock:
            namespaces = sorted(self._namespaces.values(), key=attrgetter("name"))
        return [(ns.policy, ns.shards) for ns in namespaces]

    def ttl_candidates(
        self, namespace: str | None, shard: int | None, now: int, scanned: list[int]
    ) -> Iterator[TTLEntry]:
        """Due entries in deadline order (each namespace keeps its own heap; a node-wide
        scan merges them by deadline)."""
        if namespace is not None:
            yield from self._ns_ttl_candidates(self._namespace(namespace), shard, now, scanned)
            return
        with self._lock:
            everything = sorted(self._namespaces.values(), key=attrgetter("name"))
        yield from heapq.merge(
            *(self._ns_ttl_candidates(ns, None, now, scanned) for ns in everything), key=attrgetter("expire_at")
        )

    def ttl_first(self) -> int | None:
        """The smallest live heap top over the namespaces (stale tops dropped on the way)."""
        with self._lock:
            everything = list(self._namespaces.values())
        first: int | None = None
        for ns in everything:
            with ns.ttl_lock:
                heap = ns.ttl_heap
                while heap and ns.shards[heap[0][1]].ttl.get(heap[0][2]) != heap[0][0]:
                    heapq.heappop(heap)
                if heap and (first is None or heap[0][0] < first):
                    first = heap[0][0]
        return first

    def _ns_ttl_candidates(self, ns: _Namespace, shard: int | None, now: int, scanned: list[int]) -> Iterator[TTLEntry]:
        """Due entries of one namespace in deadline order, taken off its heap a few at a time.

        Each hold of the heap's lock pops at most ``TTL_POP_CHUNK`` entries (processed ones
        left at the top by earlier scans are dropped on the way: the lazy part of their
        deletion), so no step holds the lock or the GIL for long, and the walk goes only as
        far as the scan does. (Walking every due entry and sorting them held the GIL for about
        a second per million.) Entries the scan has not processed when the walk ends (those
        of its last batch, past its cap, of other shards) go back on the heap.
        """
        heap = ns.ttl_heap
        shards = ns.shards
        pending: deque[tuple[int, int, int]] = deque()  # yielded, maybe not processed yet
        others: list[tuple[int, int, int]] = []  # due entries of shards this walk leaves

        def live(item: tuple[int, int, int]) -> bool:
            return shards[item[1]].ttl.get(item[2]) == item[0]

        try:
            while True:
                chunk: list[tuple[int, int, int]] = []
                popped = 0
                with ns.ttl_lock:
                    while heap and heap[0][0] <= now and popped < TTL_POP_CHUNK:
                        item = heapq.heappop(heap)
                        popped += 1
                        if live(item):
                            chunk.append(item)
                if not popped:
                    return
                while pending and not live(pending[0]):
                    pending.popleft()  # processed by the scan: nothing to put back
                for item in chunk:  # all of the chunk, before any is yielded: the walk may end at any yield
                    (others if shard is not None and item[1] != shard else pending).append(item)
                for item in chunk:
                    scanned[0] += 1
                    if shard is None or item[1] == shard:
                        yield TTLEntry(item[1], item[2], item[0], 0, 0, ns.name)
        finally:
            back = [item for item in (*pending, *others) if live(item)]
            if back:
                with ns.ttl_lock:
                    for item in back:
                        heapq.heappush(heap, item)

    # -- bulk TTL index load (StorageAdapter.ingest_ttl_index) -----------------------------------
    def ttl_index_info(self, namespace: str) -> dict[str, object]:
        ns = self._namespace(namespace)
        return {
            "namespace": namespace,
            "ns_id": MEMORY_NS_ID,
            "shards": len(ns.shards),
            "end_offsets": [s.end_offset for s in ns.shards],
        }

    def ttl_import_dir(self) -> Path:
        return import_dir(self.config.data_dir)

    def ingest_ttl_index(self, namespace: str, file: str) -> dict[str, object]:
        """Insert the SST file's entries into the shards' TTL dicts and the namespace heap (no
        namespace ids here: keys carry ``MEMORY_NS_ID``). An offset that already has an entry, a
        record that is gone or dead keeps what it has (counted as skipped)."""
        import tempfile
        import time

        from storage_engine.segment.index_store import open_sst, validated_ttl_entries

        t0 = time.perf_counter()
        ns = self._namespace(namespace)
        path = import_file(self.ttl_import_dir(), file)
        with self.lifecycle.runtime.ops, open_sst(path, Path(tempfile.gettempdir())) as db:
            ends = [s.end_offset for s in ns.shards]
            entries = list(validated_ttl_entries(db, path, MEMORY_NS_ID, ends))  # all checked before any goes in
            added: list[tuple[int, int, int]] = []
            for e in entries:
                s = ns.shards[e.shard]
                with s.lock:
                    segment = s.segment_at(e.offset)
                    r = None if segment is None else segment.record(e.offset - segment.base_offset)
                    if r is None or segment is None or e.offset in segment.dead or e.offset in s.ttl:
                        continue
                    s.ttl[e.offset] = e.expire_at
                added.append((e.expire_at, e.shard, e.offset))
            with ns.ttl_lock:
                for item in added:
                    heapq.heappush(ns.ttl_heap, item)
        return {
            "namespace": namespace,
            "file": path.name,
            "entries": len(entries),
            "ingested": len(added),
            "skipped": len(entries) - len(added),
            "min_expire_at": min((a[0] for a in added), default=None),
            "max_expire_at": max((a[0] for a in added), default=None),
            "duration_ms": round((time.perf_counter() - t0) * 1000, 3),
        }

    def measure_disk(self) -> tuple[int, int, str]:
        with self._lock:
            namespaces = list(self._namespaces.values())
        used = sum(seg.size_bytes for ns in namespaces for s in ns.shards for seg in s.segments)
        return used, self._config.disk_capacity_bytes or 0, "memory"

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop_parts()
        with self._lock:
            self._namespaces.clear()  # release the memory; nothing outlives close
