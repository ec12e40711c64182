"""When lifecycle work is next due on a node (DESIGN §3 "Timeliness"), from metadata only.

Per kind of node-wide sweep, the earliest moment a sweep has something to do:

- ``expire-scan``: the first TTL-index entry's ``expire_at`` (the index is ordered by it);
- ``reclaim``: the earliest segment *deadline* (every record of the segment expired, the
  namespace TTL included, :func:`~storage_engine.rules.expiry.segment_deadline`): the moment a
  whole segment can go. The active segment counts too: a lifecycle step seals it once its
  deadline passes (DESIGN §3 "Idle shards"), or once more than ``segment_expired_roll_ratio``
  of its records are expired (:func:`storage_engine.rules.rolling.expired_roll_due`), busy shard or
  not, so that the reclaim sweep seals it at that moment and drops or rewrites it. Rewrites
  of partly dead segments are not timed here: the TTL scan is what makes segments dead, so
  a scan that marked records dead is followed by a reclaim (the control plane's rule), and the beat schedule stays as
  a safety net;
- ``retention`` (namespaces whose ``cleanup_policy`` deletes): the oldest segment's
  ``max_timestamp + retention_ms + 1`` (the time rule's breach), or now when the size rule
  is already broken.

``None``: nothing stored will ever make that kind due (until more is appended). A due time
at or before ``now`` means due now.

Cost: a shard's sealed segments change only by a roll, a drop or a rewrite, and each of
those replaces the shard's sealed layout (``due_facts``'s token). :class:`DueCache` keeps,
per shard, the minima over its sealed segments for the token it saw, so a call reads the
sealed segments of a shard only when they changed since the last call, and otherwise
the active segment's metadata alone: O(shards) per call at steady state, whatever the
number of segments. No record is read, except that an active segment some of whose records
have expired answers its expired-share time from its expiry profile
(:meth:`storage_engine.rules.figures.FiguresCache.expired_by`), which the figures keep for it anyway
and which reads only the records appended since it was last asked.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.expiry import segment_deadline
from storage_engine.rules.figures import SegmentFacts

DUE_KINDS = ("expire-scan", "reclaim", "retention")


class DueShard(Protocol):
    """What a shard of any adapter provides for due times."""

    def due_facts(self) -> tuple[object | None, Callable[[], Sequence[SegmentFacts]], SegmentFacts]:
        """``(token, sealed, active)``: ``token`` is replaced whenever the sealed segments change
        (``None``: no such token, recompute every call); ``sealed()`` lists the sealed segments'
        facts in offset order; ``active`` is the active segment's facts now."""
        ...

    def expired_roll_due(self, policy: NamespacePolicy, now: int) -> int | None:
        """When the active segment's expired share passes ``segment_expired_roll_ratio``
        (:func:`storage_engine.rules.rolling.expired_roll_due`; ``None``: not as it stands)."""
        ...


@dataclass(frozen=True, slots=True)
class SealedMinima:
    """What due times need of a shard's sealed segments (oldest first)."""

    deadline: int | None  # earliest deadline of a sealed segment (None: none ever expires whole)
    oldest_max_timestamp: int | None  # the oldest sealed segment's (None: no sealed segment)
    oldest_bytes: int
    total_bytes: int


def _deadline(f: SegmentFacts, ttl_ms: int | None) -> int | None:
    # An empty sealed segment (a rewrite removed everything) has deadline 0: due at once.
    return segment_deadline(f.record_count, f.max_timestamp, f.max_expire_at, f.has_unbounded, ttl_ms)


def _min(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None or a <= b else b


def sealed_minima(sealed: Iterable[SegmentFacts], ttl_ms: int | None) -> SealedMinima:
    deadline: int | None = None
    oldest: SegmentFacts | None = None
    total = 0
    for f in sealed:
        if oldest is None:
            oldest = f
        total += f.size_bytes
        deadline = _min(deadline, _deadline(f, ttl_ms))
    return SealedMinima(
        deadline=deadline,
        oldest_max_timestamp=None if oldest is None else oldest.max_timestamp,
        oldest_bytes=0 if oldest is None else oldest.size_bytes,
        total_bytes=total,
    )


def shard_due(
    minima: SealedMinima, active: SegmentFacts, policy: NamespacePolicy, now: int, active_roll: int | None = None
) -> tuple[int | None, int | None]:
    """(reclaim due, retention due) of one shard; ``active_roll``: when its active segment is
    rolled for its expired share (:meth:`DueShard.expired_roll_due`)."""
    reclaim = _min(minima.deadline, active_roll)
    if active.record_count:
        reclaim = _min(reclaim, _deadline(active, policy.ttl_ms))
    retention: int | None = None
    if policy.deletes:
        oldest_ts: int | None
        if minima.oldest_max_timestamp is not None:
            oldest_ts, oldest_bytes = minima.oldest_max_timestamp, minima.oldest_bytes
        elif active.record_count:
            oldest_ts, oldest_bytes = active.max_timestamp, active.size_bytes
        else:
            oldest_ts, oldest_bytes = None, 0
        if policy.retention_ms is not None and oldest_ts is not None:
            retention = oldest_ts + policy.retention_ms + 1  # the rule is now − max_timestamp > retention_ms
        total = minima.total_bytes + active.size_bytes
        limit = policy.retention_bytes
        if limit is not None and oldest_ts is not None and total >= limit and total - oldest_bytes >= limit:
            retention = now
    return reclaim, retention


class DueCache:
    """Per shard: the sealed minima for the sealed layout (token) and TTL they were computed for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[int, tuple[object, object, int | None, SealedMinima]] = {}  # id(shard) → ...
        self.recomputed = 0  # shards whose sealed segments were read again (for tests and profiling)

    def minima(self, shard: DueShard, ttl_ms: int | None) -> tuple[SealedMinima, SegmentFacts]:
        token, sealed, active = shard.due_facts()
        key = id(shard)
        with self._lock:
            entry = self._entries.get(key)
        if token is not None and entry is not None and entry[0] is shard and entry[1] is token and entry[2] == ttl_ms:
            return entry[3], active
        minima = sealed_minima(sealed(), ttl_ms)
        with self._lock:
            self.recomputed += 1
            if token is not None:
                # The shard itself is kept in the entry, so its id is never reused while the entry lives.
                self._entries[key] = (shard, token, ttl_ms, minima)
        return minima, active

    def retain(self, shards: Iterable[object]) -> None:
        """Forget shards no longer served (a deleted namespace)."""
        keep = {id(s) for s in shards}
        with self._lock:
            for key in [k for k in self._entries if k not in keep]:
                del self._entries[key]


def next_due(
    namespaces: Iterable[tuple[NamespacePolicy, Sequence[DueShard]]],
    ttl_first: int | None,
    now: int,
    cache: DueCache,
) -> dict[str, int | None]:
    """Kind → earliest due time (ms) over every shard of the node (see the module docstring)."""
    reclaim: int | None = None
    retention: int | None = None
    seen: list[object] = []
    for policy, shards in namespaces:
        for s in shards:
            seen.append(s)
            minima, active = cache.minima(s, policy.ttl_ms)
            r, k = shard_due(minima, active, policy, now, s.expired_roll_due(policy, now))
            reclaim, retention = _min(reclaim, r), _min(retention, k)
    cache.retain(seen)
    return {"expire-scan": ttl_first, "reclaim": reclaim, "retention": retention}
