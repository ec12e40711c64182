"""One logical segment of the memory store: its records, sizes, dead marks and figures."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from storage_engine.api import (
    NewRecord,
    Record,
    SegmentInfo,
    SegmentState,
)
from storage_engine.rules.figures import ExpiredFigures, ProfileRow, SegmentFacts


@dataclass(slots=True, eq=False)
class MemorySegment:
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
        """The figures' view of the stored records ``first..last`` (storage_engine.rules.figures)."""
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
