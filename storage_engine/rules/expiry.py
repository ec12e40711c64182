"""The TTL rules (DESIGN §3, layer 1), in one place for every adapter.

A record's *effective expiry* is ``min(expire_at, timestamp + ttl_ms)``, where
either side may be absent (absent = never). A record is expired, and hidden
from every read, once its effective expiry is ≤ now. A segment's *deadline*
is an upper bound of the effective expiry of all its records: once it has
passed, the whole segment is expired and can go in one piece (layer 3).

Records that carry no explicit ``expire_at`` but expire through the
namespace's ``ttl_ms`` have no TTL-index entry (the index would hold one entry
per stored record and the scan would no longer follow the expired count).
They are hidden by :func:`is_expired` on every read, and reclaimed when their
segment's deadline (``max_timestamp + ttl_ms``) passes and reclamation drops
the segment whole, or when a rewrite of a partly dead segment leaves them out.
"""

from __future__ import annotations

from storage_engine.api import Record, SegmentInfo


def effective_expiry(timestamp: int, expire_at: int | None, ttl_ms: int | None) -> int | None:
    """``min(expire_at, timestamp + ttl_ms)``; ``None`` when the record never expires."""
    if ttl_ms is None:
        return expire_at
    by_ttl = timestamp + ttl_ms
    return by_ttl if expire_at is None or by_ttl < expire_at else expire_at


def is_expired(timestamp: int, expire_at: int | None, ttl_ms: int | None, now: int) -> bool:
    """The visibility rule: hidden when the effective expiry is ≤ ``now``.

    The one function every adapter's read path asks (inlined arithmetic; it
    runs once per record read).
    """
    if expire_at is not None and expire_at <= now:
        return True
    return ttl_ms is not None and timestamp + ttl_ms <= now


def record_expired(record: Record, ttl_ms: int | None, now: int) -> bool:
    return is_expired(record.timestamp, record.expire_at, ttl_ms, now)


def segment_deadline(
    record_count: int, max_timestamp: int | None, max_expire_at: int | None, has_unbounded: bool, ttl_ms: int | None
) -> int | None:
    """When every record of a segment has expired, or ``None`` if some record never does.

    Every record expires by ``max_timestamp + ttl_ms`` (with a ``ttl_ms``);
    records with an explicit deadline also by ``max_expire_at``, so without
    unbounded records the earlier of the two bounds them all. An empty segment
    has nothing left to expire: its deadline is 0 (already passed).
    """
    if record_count == 0:
        return 0
    by_ttl = None if ttl_ms is None or max_timestamp is None else max_timestamp + ttl_ms
    if has_unbounded:
        return by_ttl
    if max_expire_at is None:
        return by_ttl
    return max_expire_at if by_ttl is None else min(by_ttl, max_expire_at)


def segment_expired(segment: SegmentInfo, ttl_ms: int | None, now: int) -> bool:
    """Whether every record of ``segment`` is expired at ``now`` (its deadline ≤ now)."""
    deadline = segment_deadline(
        segment.record_count, segment.max_timestamp, segment.max_expire_at, segment.has_unbounded, ttl_ms
    )
    return deadline is not None and deadline <= now
