"""When the active segment of a shard rolls (DESIGN §2), in one place so that
file-backed and logical segments seal at the same points, whether an append or
a lifecycle step finds the segment due (DESIGN §3 "Idle shards")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from storage_engine.api import SegmentInfo, SegmentState
from storage_engine.expiry import segment_expired
from storage_engine.policy import NamespacePolicy


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
    its deadline; then it is an ordinary sealed segment. An empty active
    segment is never sealed (nothing to free, and the end offset lives there).
    """
    if segment.state is not SegmentState.ACTIVE or segment.record_count == 0:
        return False
    if should_roll(policy, segment.record_count, segment.size_bytes, segment.first_timestamp, 0, now):
        return True
    return segment_expired(segment, policy.ttl_ms, now)


def sealed_view(segments: Sequence[SegmentInfo], policy: NamespacePolicy, now: int) -> list[SegmentInfo]:
    """``segments`` as a lifecycle step sees them once it has sealed an idle active segment
    (:func:`idle_segment_due`), without changing anything: what a dry run (and
    ``compaction_estimate``) must count to report what the step would do."""
    out = list(segments)
    if out and idle_segment_due(out[-1], policy, now):
        out[-1] = replace(out[-1], state=SegmentState.SEALED)
    return out
