"""The in-memory adapter: the whole contract without files, for tests and
low-latency use. Nothing survives :meth:`MemoryAdapter.close`.

Segments are logical (DESIGN §2): they roll by :func:`record_size` and age by
the same rule as the file adapter (:func:`should_roll`), so the catalog looks
the same whichever adapter a node runs.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from operator import attrgetter

from storage_engine.api import (
    AppendResult,
    EngineStats,
    NamespaceInfo,
    NewRecord,
    ReadResult,
    Record,
    SegmentInfo,
    SegmentState,
    ShardStats,
    StorageAdapter,
)
from storage_engine.clock import Clock
from storage_engine.config import EngineConfig
from storage_engine.errors import (
    EngineClosedError,
    InvalidArgumentError,
    NamespaceExistsError,
    OffsetOutOfRangeError,
    UnknownNamespaceError,
    UnknownShardError,
)
from storage_engine.policy import NamespacePolicy, validate_namespace_policy
from storage_engine.rolling import should_roll
from storage_engine.validation import (
    validate_namespace_name,
    validate_read_limits,
    validate_records,
    validate_shard_count,
)


def _require_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(name, "must be an integer")
    return value


@dataclass(slots=True, eq=False)
class _Segment:
    """A logical segment. Records are kept as the producer's (immutable)
    :class:`NewRecord` beside their final timestamp, and a :class:`Record` is
    built only when read, which keeps appends cheap."""

    base_offset: int
    created_at: int
    modified_at: int
    records: list[NewRecord] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    # Running maximum of timestamps: non-decreasing, so bisect finds the first
    # record with timestamp ≥ t even when producer timestamps go backwards.
    max_ts_so_far: list[int] = field(default_factory=list)
    size_bytes: int = 0
    min_timestamp: int | None = None
    max_expire_at: int | None = None
    has_unbounded: bool = False

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
        self.records.extend(records)
        self.timestamps.extend(stamps)
        self.sizes.extend(sizes)
        self.size_bytes += sum(sizes)

    def record(self, i: int) -> Record:
        r = self.records[i]
        return Record(self.base_offset + i, self.timestamps[i], r.value, r.key, r.tags, r.headers, r.expire_at)

    def info(self, namespace: str, shard: int, state: SegmentState) -> SegmentInfo:
        count = len(self.records)
        return SegmentInfo(
            namespace=namespace,
            shard=shard,
            base_offset=self.base_offset,
            last_offset=self.base_offset + count - 1,
            record_count=count,
            live_count=count,
            size_bytes=self.size_bytes,
            min_timestamp=self.min_timestamp,
            max_timestamp=self.max_ts_so_far[-1] if count else None,
            max_expire_at=self.max_expire_at,
            has_unbounded=self.has_unbounded,
            state=state,
            created_at=self.created_at,
            modified_at=self.modified_at,
        )


@dataclass(slots=True, eq=False)
class _Namespace:
    name: str
    policy: NamespacePolicy
    created_at: int
    shards: list[_Shard] = field(default_factory=list)

    def info(self) -> NamespaceInfo:
        return NamespaceInfo(self.name, len(self.shards), self.policy, self.created_at)


class _Shard:
    """One shard's log and indexes; every field is guarded by ``lock``."""

    def __init__(self, namespace: _Namespace, index: int, now: int) -> None:
        self.namespace = namespace
        self.index = index
        self.lock = threading.Lock()
        self.segments = [_Segment(0, now, now)]
        self.bases = [0]
        self.end_offset = 0
        self.keys: dict[bytes, int] = {}  # key → latest offset
        self.tags: dict[str, list[int]] = {}  # tag → ascending offsets
        self.deleted = False

    @property
    def log_start_offset(self) -> int:
        return self.segments[0].base_offset

    def roll(self, now: int) -> _Segment:
        segment = _Segment(self.end_offset, now, now)
        self.segments.append(segment)
        self.bases.append(segment.base_offset)
        return segment

    def scan(self, offset: int) -> Iterator[tuple[Record, int]]:
        """Records at or after ``offset`` with their sizes."""
        first = max(bisect_right(self.bases, offset) - 1, 0)
        for segment in self.segments[first:]:
            sizes = segment.sizes
            for i in range(max(offset - segment.base_offset, 0), len(sizes)):
                yield segment.record(i), sizes[i]

    def record_at(self, offset: int) -> Record | None:
        segment = self.segments[max(bisect_right(self.bases, offset) - 1, 0)]
        i = offset - segment.base_offset
        return segment.record(i) if 0 <= i < len(segment.records) else None

    def stats(self) -> ShardStats:
        count = sum(len(s.records) for s in self.segments)
        return ShardStats(
            namespace=self.namespace.name,
            shard=self.index,
            log_start_offset=self.log_start_offset,
            end_offset=self.end_offset,
            record_count=count,
            live_count=count,
            size_bytes=sum(s.size_bytes for s in self.segments),
            segment_count=len(self.segments),
        )


class MemoryAdapter(StorageAdapter):
    name = "memory"

    def __init__(self, config: EngineConfig, clock: Clock) -> None:
        self._config = config
        self._clock = clock
        self._lock = threading.Lock()  # guards the namespace catalog and counters
        self._namespaces: dict[str, _Namespace] = {}
        self._counters: dict[str, float] = dict.fromkeys(
            ("append_batches_total", "append_records_total", "append_bytes_total", "read_requests_total"), 0
        )
        self._closed = False

    # -- helpers ----------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise EngineClosedError()

    def _namespace(self, name: str) -> _Namespace:
        self._check_open()
        ns = self._namespaces.get(name)  # a single dict read is atomic; writers hold _lock
        if ns is None:
            raise UnknownNamespaceError(name)
        return ns

    def _shard(self, namespace: str, shard: int) -> _Shard:
        ns = self._namespace(namespace)
        if isinstance(shard, bool) or not isinstance(shard, int) or not 0 <= shard < len(ns.shards):
            raise UnknownShardError(namespace, shard, len(ns.shards))
        return ns.shards[shard]

    @staticmethod
    def _check_live(s: _Shard) -> None:
        """Called under ``s.lock``: the namespace may have been deleted since lookup."""
        if s.deleted:
            raise UnknownNamespaceError(s.namespace.name)

    def _count(self, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                self._counters[name] += delta

    # -- namespaces ---------------------------------------------------------------
    def create_namespace(self, name: str, shards: int, policy: NamespacePolicy | None = None) -> NamespaceInfo:
        self._check_open()
        validate_namespace_name(name)
        validate_shard_count(shards)
        policy = NamespacePolicy() if policy is None else policy
        if not isinstance(policy, NamespacePolicy):
            raise InvalidArgumentError("policy", "must be a NamespacePolicy")
        validate_namespace_policy(policy)
        with self._lock:
            if name in self._namespaces:
                raise NamespaceExistsError(name)
            now = self._clock.now_ms()
            ns = _Namespace(name, policy, now)
            ns.shards = [_Shard(ns, i, now) for i in range(shards)]
            self._namespaces[name] = ns
            return ns.info()

    def update_namespace(self, name: str, policy: NamespacePolicy) -> NamespaceInfo:
        ns = self._namespace(name)
        if not isinstance(policy, NamespacePolicy):
            raise InvalidArgumentError("policy", "must be a NamespacePolicy")
        validate_namespace_policy(policy)
        ns.policy = policy  # appends read the policy once, so a swap is atomic for them
        return ns.info()

    def delete_namespace(self, name: str) -> None:
        self._check_open()
        with self._lock:
            ns = self._namespaces.pop(name, None)
        if ns is None:
            raise UnknownNamespaceError(name)
        for s in ns.shards:
            with s.lock:
                s.deleted = True

    def list_namespaces(self) -> list[NamespaceInfo]:
        self._check_open()
        with self._lock:
            namespaces = sorted(self._namespaces.values(), key=attrgetter("name"))
        return [ns.info() for ns in namespaces]

    def get_namespace(self, name: str) -> NamespaceInfo:
        return self._namespace(name).info()

    # -- data ---------------------------------------------------------------------
    def append(self, namespace: str, shard: int, records: Sequence[NewRecord]) -> AppendResult:
        s = self._shard(namespace, shard)
        policy = s.namespace.policy
        sizes = validate_records(records, policy)  # before the lock: the batch is all-or-nothing
        batch_bytes = sum(sizes)
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
            segment.modified_at = now
            s.end_offset = base + len(records)
        self._count(append_batches_total=1, append_records_total=len(records), append_bytes_total=batch_bytes)
        return AppendResult(base, len(records))

    def read(
        self, namespace: str, shard: int, offset: int, max_records: int = 500, max_bytes: int = 1 << 20
    ) -> ReadResult:
        s = self._shard(namespace, shard)
        validate_read_limits(max_records, max_bytes)
        _require_int(offset, "offset")
        out: list[Record] = []
        with s.lock:
            self._check_live(s)
            start, end = s.log_start_offset, s.end_offset
            if not start <= offset <= end:
                raise OffsetOutOfRangeError(namespace, shard, offset, start, end)
            total = 0
            for record, size in s.scan(offset):
                # The first record always goes out so that a consumer makes progress.
                if out and (len(out) >= max_records or total + size > max_bytes):
                    break
                out.append(record)
                total += size
        self._count(read_requests_total=1)
        # Nothing returned means nothing is stored at or after offset: resume at the end.
        next_offset = out[-1].offset + 1 if out else end
        return ReadResult(tuple(out), next_offset, start, end)

    def offset_for_timestamp(self, namespace: str, shard: int, timestamp: int) -> int | None:
        s = self._shard(namespace, shard)
        _require_int(timestamp, "timestamp")
        with s.lock:
            self._check_live(s)
            for segment in s.segments:
                if segment.max_ts_so_far and segment.max_ts_so_far[-1] >= timestamp:
                    return segment.base_offset + bisect_left(segment.max_ts_so_far, timestamp)
        return None

    def read_key(self, namespace: str, shard: int, key: bytes) -> Record | None:
        s = self._shard(namespace, shard)
        if not isinstance(key, bytes):
            raise InvalidArgumentError("key", "must be bytes")
        with s.lock:
            self._check_live(s)
            offset = s.keys.get(key)
            return None if offset is None else s.record_at(offset)

    def read_tag(self, namespace: str, shard: int, tag: str, offset: int = 0, max_records: int = 500) -> ReadResult:
        s = self._shard(namespace, shard)
        validate_read_limits(max_records, 1)
        _require_int(offset, "offset")
        if not isinstance(tag, str):
            raise InvalidArgumentError("tag", "must be a string")
        with s.lock:
            self._check_live(s)
            start, end = s.log_start_offset, s.end_offset
            if offset > end:
                raise OffsetOutOfRangeError(namespace, shard, offset, start, end)
            offsets = s.tags.get(tag, [])
            i = bisect_left(offsets, max(offset, start))
            found = [s.record_at(o) for o in offsets[i : i + max_records]]
        records = tuple(r for r in found if r is not None)
        return ReadResult(records, records[-1].offset + 1 if records else end, start, end)

    # -- metadata -----------------------------------------------------------------
    def list_segments(self, namespace: str, shard: int) -> list[SegmentInfo]:
        s = self._shard(namespace, shard)
        with s.lock:
            self._check_live(s)
            last = len(s.segments) - 1
            return [
                seg.info(namespace, shard, SegmentState.ACTIVE if i == last else SegmentState.SEALED)
                for i, seg in enumerate(s.segments)
            ]

    def shard_stats(self, namespace: str, shard: int) -> ShardStats:
        s = self._shard(namespace, shard)
        with s.lock:
            self._check_live(s)
            return s.stats()

    def stats(self) -> EngineStats:
        self._check_open()
        with self._lock:
            namespaces = sorted(self._namespaces.values(), key=attrgetter("name"))
            counters = dict(self._counters)
        shards = []
        for ns in namespaces:
            for s in ns.shards:
                with s.lock:
                    shards.append(s.stats())
        return EngineStats(self.name, len(namespaces), tuple(shards), counters)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._namespaces.clear()  # release the memory; nothing outlives close
