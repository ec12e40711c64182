"""The expired figures of a segment, exact at any clock time (DESIGN §3 "Figures").

A record is *expired* once its effective expiry ``min(expire_at, timestamp +
ttl_ms)`` has passed, or once it is marked dead (the TTL scan and read checks
mark only expired records; a bulk-loaded TTL entry may kill one earlier). The
figures count every stored record of a segment that is expired, whatever the
segment's state, until reclamation removes it:

- ``expired_records``: how many;
- ``expired_bytes``: the segment's ``size_bytes`` when every record is expired
  (the whole file would go), else the encoded sizes of the expired records.

Three cases, decided from the segment's metadata alone in the first two:

1. ``now`` is before the earliest effective expiry of any record
   (:func:`first_deadline`): only dead records count (the metadata's dead count
   and ``dead_bytes``);
2. ``now`` is at or past the segment's deadline (every record expired): all of it;
3. otherwise the segment is *partly expired*: an :class:`ExpiryProfile`, the
   sorted expiry keys of its records with their sizes, answers by bisection.

Cost: a profile is built by one read of the segment when it is first found
partly expired, then extended by the records appended since (an active segment
is read only past what the profile covers), and dropped once the segment is
wholly expired or gone. It holds 16 bytes per record of partly expired
segments only (usually the one or two segments per shard that straddle "now").
Appends pay nothing but keeping ``min_expire_at`` in the segment metadata.
A record marked dead keeps its key: the scan kills it at or after its deadline,
so ``key ≤ now`` already holds and the count does not change. A kill before the
record's own deadline (a bulk-loaded TTL entry) or a rewrite of the segment
invalidates its profile (:meth:`FiguresCache.forget`).

Where the stored bytes are (tiered storage) is split so that the parts add up
(:func:`storage_engine.model.tier_split`, carried in ``ShardStats``): a shard's
``size_bytes`` (stored) = ``local_bytes`` (segments with a local file: tiers
``local`` and ``both``, the active segment included) + ``remote_only_bytes``
(segments only in the object store: tier ``remote``). A segment held in both
places is counted once, as local. The three are taken from the same segments in
one call, so no answer carries a stored figure and a split of two moments; the
node, the catalog and the console carry them unchanged and add them up above a
shard, where the identity still holds. (The node's ``tier_remote_bytes`` gauge,
everything in the object store, is a different figure and is not part of it.)
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import accumulate
from typing import TypeVar

from storage_engine.rules.expiry import effective_expiry, segment_deadline

T = TypeVar("T")

NEVER = (1 << 63) - 1  # the expiry key of a record that never expires
DEAD = 0  # the expiry key of a record marked dead: expired at any time

ProfileRow = tuple[int, int | None, int, bool]
"""(timestamp, expire_at, encoded size, marked dead) of one stored record."""

ReadRows = Callable[[int, int], Iterable[ProfileRow]]
"""``read(first, last)``: the rows of the stored records with offsets ``first..last``."""


@dataclass(frozen=True, slots=True)
class SegmentFacts:
    """What the figures need of a segment's metadata (every adapter has these)."""

    base_offset: int
    last_offset: int  # −1 while empty
    record_count: int
    live_count: int  # records not marked dead
    size_bytes: int
    dead_bytes: int
    min_timestamp: int | None
    max_timestamp: int | None
    min_expire_at: int | None  # smallest explicit expire_at; None when no record has one
    max_expire_at: int | None
    has_unbounded: bool


@dataclass(frozen=True, slots=True)
class ExpiredFigures:
    records: int = 0
    bytes: int = 0
    deadline: int | None = None  # when every record will have expired (None: some never does)


def first_deadline(facts: SegmentFacts, ttl_ms: int | None) -> int | None:
    """The earliest effective expiry of any record, or ``None`` if none ever expires."""
    by_ttl = None if ttl_ms is None or facts.min_timestamp is None else facts.min_timestamp + ttl_ms
    if facts.min_expire_at is None:
        return by_ttl
    return facts.min_expire_at if by_ttl is None else min(by_ttl, facts.min_expire_at)


def expiry_key(timestamp: int, expire_at: int | None, dead: bool, ttl_ms: int | None) -> int:
    if dead:
        return DEAD
    expiry = effective_expiry(timestamp, expire_at, ttl_ms)
    return NEVER if expiry is None else expiry


class ExpiryProfile:
    """The expiry keys of a segment's records, sorted, with the running sum of their sizes."""

    __slots__ = ("_cumulative", "_keys", "_sizes", "_sorted", "count", "last_offset", "ttl_ms")

    def __init__(self, ttl_ms: int | None) -> None:
        self.ttl_ms = ttl_ms
        self.last_offset = -1  # the last offset the profile covers
        self.count = 0
        self._keys = array("q")
        self._sizes = array("q")
        self._sorted = True
        self._cumulative = array("q")

    def extend(self, rows: Iterable[ProfileRow], last_offset: int) -> None:
        keys, sizes, cumulative = self._keys, self._sizes, self._cumulative
        for timestamp, expire_at, size, dead in rows:
            key = expiry_key(timestamp, expire_at, dead, self.ttl_ms)
            if self._sorted and (not keys or key >= keys[-1]):
                cumulative.append(size + (cumulative[-1] if cumulative else 0))
            else:
                self._sorted = False
            keys.append(key)
            sizes.append(size)
        self.count = len(keys)
        self.last_offset = last_offset

    def _sort(self) -> None:
        if not self._sorted:
            # Broker timestamps make keys nearly sorted: timsort merges the few runs in linear time.
            pairs = sorted(zip(self._keys, self._sizes, strict=True))
            self._keys = array("q", (k for k, _ in pairs))
            self._sizes = array("q", (s for _, s in pairs))
            self._cumulative = array("q", accumulate(self._sizes))
            self._sorted = True

    def expired(self, now: int) -> tuple[int, int]:
        """(records, bytes) whose key is ≤ ``now``."""
        self._sort()
        n = bisect_right(self._keys, now)
        return n, (self._cumulative[n - 1] if n else 0)

    def nth_key(self, n: int) -> int:
        """The ``n``-th smallest expiry key (1-based): from then on at least ``n`` records are expired."""
        self._sort()
        return self._keys[n - 1]


class FiguresCache:
    """The expired figures of one shard's segments, with the profiles of partly expired ones."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._profiles: dict[int, ExpiryProfile] = {}

    def forget(self, base_offset: int | None = None) -> None:
        """Drop a segment's profile (all with ``None``): its records changed other than by appends."""
        with self._lock:
            if base_offset is None:
                self._profiles.clear()
            else:
                self._profiles.pop(base_offset, None)

    def retain(self, bases: Iterable[int]) -> None:
        """Drop the profiles of segments no longer in the log."""
        with self._lock:
            keep = set(bases)
            for base in [b for b in self._profiles if b not in keep]:
                del self._profiles[base]

    def figures(self, facts: SegmentFacts, ttl_ms: int | None, now: int, read: ReadRows) -> ExpiredFigures:
        count = facts.record_count
        deadline = segment_deadline(count, facts.max_timestamp, facts.max_expire_at, facts.has_unbounded, ttl_ms)
        if count == 0:
            return ExpiredFigures(0, 0, deadline)
        if deadline is not None and deadline <= now:
            self.forget(facts.base_offset)
            return ExpiredFigures(count, facts.size_bytes, deadline)
        first = first_deadline(facts, ttl_ms)
        if first is None or first > now:
            self.forget(facts.base_offset)
            records, nbytes = count - facts.live_count, facts.dead_bytes
        else:
            records, nbytes = self._partial(facts, ttl_ms, now, read)
        # Every record expired (some dead before their own deadline, say): the whole segment counts.
        return ExpiredFigures(records, facts.size_bytes if records == count else nbytes, deadline)

    def expired_by(self, facts: SegmentFacts, ttl_ms: int | None, now: int, read: ReadRows, n: int) -> int | None:
        """When at least ``n`` records of the segment are expired, as it stands (``None``: never
        without more records or kills; at or before ``now``: already). Exact once the segment is
        partly expired (from its profile, which :meth:`figures` then keeps anyway); before that the
        segment's first deadline, a lower bound, so that no profile is built for a segment none of
        whose records has expired (the caller asks again then)."""
        count = facts.record_count
        if n > count:
            return None
        if count - facts.live_count >= n:
            return now  # dead records are expired at any time
        deadline = segment_deadline(count, facts.max_timestamp, facts.max_expire_at, facts.has_unbounded, ttl_ms)
        if deadline is not None and deadline <= now:
            return deadline
        first = first_deadline(facts, ttl_ms)
        if first is None:
            return None
        if first > now:
            return first
        key = self._profile(facts, ttl_ms, read, lambda p: p.nth_key(n))
        return None if key == NEVER else key

    def _partial(self, facts: SegmentFacts, ttl_ms: int | None, now: int, read: ReadRows) -> tuple[int, int]:
        return self._profile(facts, ttl_ms, read, lambda p: p.expired(now))

    def _profile(
        self, facts: SegmentFacts, ttl_ms: int | None, read: ReadRows, answer: Callable[[ExpiryProfile], T]
    ) -> T:
        """``answer`` of the segment's profile, brought up to date (under the lock: answers sort it)."""
        base = facts.base_offset
        with self._lock:
            profile = self._profiles.get(base)
            if profile is None or profile.ttl_ms != ttl_ms or profile.last_offset > facts.last_offset:
                profile = ExpiryProfile(ttl_ms)
                profile.last_offset = base - 1
            if profile.last_offset < facts.last_offset:
                profile.extend(read(profile.last_offset + 1, facts.last_offset), facts.last_offset)
            if profile.count != facts.record_count:  # rewritten under us, or read a torn view: start again
                profile = ExpiryProfile(ttl_ms)
                profile.extend(read(base, facts.last_offset), facts.last_offset)
            self._profiles[base] = profile
            return answer(profile)


def sum_figures(figures: Iterable[ExpiredFigures]) -> tuple[int, int]:
    records = nbytes = 0
    for f in figures:
        records += f.records
        nbytes += f.bytes
    return records, nbytes
