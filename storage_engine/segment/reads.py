"""The log stores' side of the engine's reads (:class:`storage_engine.rules.reads.ReadableShard`).

A :class:`LogReads` wraps one :class:`~storage_engine.segment.shard.ShardBase` for a read:
records come from its segments (files or RocksDB), lookups from its RocksDB index, and two
shortcuts keep long expired stretches cheap: whole segments past their deadline are
skipped by metadata (:func:`first_visible`), and dead marks are looked up a window of
offsets per range scan, only in segments whose metadata counts dead bytes (:class:`DeadMarks`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from storage_engine.api import Record
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.expiry import segment_deadline
from storage_engine.rules.reads import ReadView
from storage_engine.rules.validation import record_size
from storage_engine.segment.shard import ShardBase


def first_visible(view: Any, offset: int, ttl_ms: int | None, now: int) -> int:
    """Skip whole segments whose deadline has passed (every record expired) from ``offset``,
    so a read at the start of a long expired stretch does not decode it record by record."""
    for m in view.metas():
        if m.last_offset < offset:
            continue
        empty = m.record_count == 0
        deadline = segment_deadline(
            m.record_count,
            None if empty else m.max_timestamp,
            None if m.max_expire_at < 0 else m.max_expire_at,
            m.has_unbounded,
            ttl_ms,
        )
        if deadline is None or deadline > now or empty:
            break
        offset = m.last_offset + 1
    return offset


class DeadMarks:
    """Offsets marked dead in one shard, for a read to skip.

    A record expired by its own fields is hidden by the read-time check anyway; a
    dead mark also hides one a bulk-loaded TTL entry expired (``ingest_ttl_index``,
    the ttl-backfill job), whose fields say nothing. Only segments whose metadata
    counts dead bytes are looked up, a window of offsets per RocksDB range scan.
    """

    WINDOW = 4096

    def __init__(self, log: ShardBase, view: Any) -> None:
        self._store, self._prefix = log.index.store, log.index.prefix
        marked = [m for m in view.metas() if m.dead_bytes > 0]
        self._bases = [m.base_offset for m in marked]
        self._lasts = [m.last_offset for m in marked]
        self._lo = self._hi = -1
        self._dead: set[int] = set()

    def __contains__(self, offset: int) -> bool:
        i = bisect_right(self._bases, offset) - 1
        if i < 0 or offset > self._lasts[i]:
            return False
        if not self._lo <= offset < self._hi:
            self._lo, self._hi = offset, offset + self.WINDOW
            self._dead = set(self._store.dead_offsets(self._prefix, self._lo, self._hi))
        return offset in self._dead


class LogReads:
    """A log shard as the engine's reads see it."""

    __slots__ = ("log",)

    def __init__(self, log: ShardBase) -> None:
        self.log = log

    @property
    def policy(self) -> NamespacePolicy:
        return self.log.policy

    def reading(self) -> AbstractContextManager[ReadView]:
        return self.log.reading()

    def current_bounds(self) -> tuple[int, int]:
        view = self.log.view
        return view.log_start_offset, view.end_offset

    def scan_live(self, view: Any, start: int, expired_before: int | None) -> Iterator[tuple[Record, int]]:
        if expired_before is not None:
            start = first_visible(view, start, self.log.policy.ttl_ms, expired_before)
        dead = DeadMarks(self.log, view)
        for r in self.log.iter_records(view, start):
            if r.offset not in dead:
                yield r, record_size(r)

    def first_at_or_after(self, view: Any, timestamp: int) -> int | None:
        # The time index says every record up to its offset is older than ``timestamp``;
        # start just after it and skip batches by header.
        log = self.log
        floor = log.index.floor_time(timestamp)
        start = max(view.log_start_offset, floor + 1 if floor is not None else 0)
        for r in log.iter_records(view, start, min_timestamp=timestamp):
            if r.timestamp >= timestamp:
                return r.offset
        return None

    def key_offset(self, key: bytes) -> int | None:
        return self.log.index.get_key(key)

    def tag_offsets(self, tag: str, start: int, end: int, limit: int) -> list[int]:
        return self.log.index.tag_offsets(tag, start, end, limit)

    def fetch(self, view: Any, offsets: Sequence[int]) -> list[Record]:
        return self.log.fetch(view, offsets)

    def record_at(self, offset: int) -> Record | None:
        return self.log.record_at(offset)
