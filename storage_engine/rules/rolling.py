"""When the active segment of a shard rolls (DESIGN §2), in one place so that
file-backed and logical segments seal at the same points, whether an append or
a lifecycle step finds the segment due (DESIGN §3 "Idle shards").

Two paths seal an active segment: an append (:func:`should_roll`: size and age, from the
segment's metadata, before the batch is written) and a lifecycle step
(:func:`idle_segment_due`: the same, plus whole expiry and the expired share). The expired
share is decided at lifecycle steps only, on idle and busy shards alike: sealing is only
worth it when reclamation follows in the same step (sealing alone frees nothing), the
figure needs the segment's expiry profile (:mod:`storage_engine.rules.figures`), which an append
must not pay for, and the node's due times (:func:`expired_roll_due`) put a reclaim sweep
at the moment the share passes the threshold, appends or not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from storage_engine.api import SegmentInfo, SegmentState
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.expiry import segment_expired

EXPIRED_ROLL_MIN_AGE_MS = 10_000
"""An active segment younger than this (since it was created, on the node's clock) is not
rolled for its expired share: the rule then rolls a shard at most once per 10 s, however
short its records' TTLs, instead of sealing a tiny segment at every sweep (a roll costs a
new file, an fsync and an index write whatever the segment holds). A floor of time rather
than of records or bytes: it bounds that cost per shard whatever the traffic, while a
trickle with short TTLs (tens of records a minute) still rolls within seconds of passing
the ratio; 10 s is far below any ``segment_ms`` worth having."""


def roll_after_ms(policy: NamespacePolicy) -> int:
    """How old (in record time) an active segment may grow before it rolls.

    ``segment_ms``, or for a compacted namespace ``max_compaction_lag_ms`` when
    smaller (Kafka's ``maxSegmentMs``): the cleaner never touches the active
    segment, so dirty data could otherwise wait there past its maximum lag. A
    lag of 0 (always due) is left out as Kafka does, or every append at a new
    millisecond would roll.
    """
    lag = policy.max_compaction_lag_ms
    if policy.compacts and lag is not None and 0 < lag < policy.segment_ms:
        return lag
    return policy.segment_ms


def should_roll(
    policy: NamespacePolicy,
    record_count: int,
    size_bytes: int,
    first_timestamp: int | None,
    batch_bytes: int,
    batch_max_timestamp: int,
) -> bool:
    """Whether to seal the active segment before appending a batch of ``batch_bytes``.

    An empty segment never rolls (so no empty segment is ever sealed and an
    empty append, which never calls this, leaves segments alone). A batch is
    never split: it rolls the segment when it would push it past
    ``segment_bytes``, so a sealed segment only exceeds ``segment_bytes`` when
    a single batch does. Age is Kafka's: the batch's largest record timestamp
    (broker time for records without one) minus the segment's first record
    timestamp must exceed :func:`roll_after_ms`; measuring against record time
    rather than the clock keeps a replay of old producer timestamps from
    rolling on every append.
    """
    if record_count == 0:
        return False
    if size_bytes + batch_bytes > policy.segment_bytes:
        return True
    return first_timestamp is not None and batch_max_timestamp - first_timestamp > roll_after_ms(policy)


def idle_segment_due(segment: SegmentInfo, policy: NamespacePolicy, now: int) -> bool:
    """Whether a lifecycle step seals this active segment although no append came.

    A shard nobody writes to must still expire, retain and compact (DESIGN §3
    "Idle shards"), yet an append is what rolls a segment. So a lifecycle step
    seals a non-empty active segment that the next append would roll (an
    append stamped ``now``: older than :func:`roll_after_ms` by its first
    record's time, or past ``segment_bytes``), or whose every record is past
    its deadline, or whose expired share passed ``segment_expired_roll_ratio``
    (:func:`expired_share_passed`); then it is an ordinary sealed segment. An empty active
    segment is never sealed (nothing to free, and the end offset lives there).
    """
    if segment.state is not SegmentState.ACTIVE or segment.record_count == 0:
        return False
    if should_roll(policy, segment.record_count, segment.size_bytes, segment.first_timestamp, 0, now):
        return True
    return segment_expired(segment, policy.ttl_ms, now) or expired_share_passed(segment, policy, now)


def expired_roll_count(policy: NamespacePolicy, record_count: int) -> int | None:
    """How many expired records make an active segment of ``record_count`` records pass
    ``segment_expired_roll_ratio`` (the smallest count above ``ratio × record_count``);
    ``None`` when no count does (the rule is off, the ratio is 1, or the segment is empty)."""
    ratio = policy.segment_expired_roll_ratio
    if ratio is None or record_count == 0:
        return None
    needed = int(ratio * record_count) + 1  # the smallest integer above ratio × count
    return needed if needed <= record_count else None


def expired_share_passed(segment: SegmentInfo, policy: NamespacePolicy, now: int) -> bool:
    """Whether an active segment is rolled for its expired share (DESIGN §3 "Idle shards":
    a busy shard too): more than ``segment_expired_roll_ratio`` of its records are expired
    (``expired_records``, the engine's one figure: dead or past their effective expiry) and it
    is at least :data:`EXPIRED_ROLL_MIN_AGE_MS` old. Then reclamation drops or rewrites it
    (rewritten when the share is also above ``reclaim_dead_ratio``; with the defaults, 0.5
    both, at once), instead of leaving expired data in a segment that never fills."""
    if segment.state is not SegmentState.ACTIVE:
        return False
    needed = expired_roll_count(policy, segment.record_count)
    return (
        needed is not None and segment.expired_records >= needed and now - segment.created_at >= EXPIRED_ROLL_MIN_AGE_MS
    )


def expired_roll_due(
    policy: NamespacePolicy, record_count: int, created_at: int, expired_by: Callable[[int], int | None]
) -> int | None:
    """When :func:`expired_share_passed` holds for an active segment of ``record_count`` records
    created at ``created_at`` (``None``: not before more is appended). ``expired_by(n)`` answers
    when at least ``n`` of its records are expired (a lower bound is allowed: the due time is then
    asked again at that moment, with the records' profile by then)."""
    needed = expired_roll_count(policy, record_count)
    if needed is None:
        return None
    when = expired_by(needed)
    return None if when is None else max(when, created_at + EXPIRED_ROLL_MIN_AGE_MS)


def sealed_view(segments: Sequence[SegmentInfo], policy: NamespacePolicy, now: int) -> list[SegmentInfo]:
    """``segments`` as a lifecycle step sees them once it has sealed an idle active segment
    (:func:`idle_segment_due`), without changing anything: what a dry run must count to report
    what the step would do (the compaction estimate counts :func:`rolled_view` besides)."""
    out = list(segments)
    if out and idle_segment_due(out[-1], policy, now):
        out[-1] = replace(out[-1], state=SegmentState.SEALED)
    return out


def rolled_view(segments: Sequence[SegmentInfo]) -> list[SegmentInfo]:
    """``segments`` as they are once a non-empty active segment has rolled, whenever that comes (an
    append past ``segment_bytes``/``segment_ms`` or :func:`idle_segment_due`), without changing
    anything: what the compaction estimate counts, so that data waiting in the active segment is
    not left out of it."""
    out = list(segments)
    if out and out[-1].state is SegmentState.ACTIVE and out[-1].record_count:
        out[-1] = replace(out[-1], state=SegmentState.SEALED)
    return out
