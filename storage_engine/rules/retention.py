"""Kafka retention (DESIGN §3): which segments a shard deletes, as small named predicates.

Shared by every adapter: an adapter lists its segments (oldest first, the
active one last), asks :func:`deletable_segments` and then deletes that many
from the front, rolling first when :attr:`RetentionPlan.roll` says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from storage_engine.api import SegmentInfo, SegmentState
from storage_engine.policies.policy import NamespacePolicy


def retention_applies(policy: NamespacePolicy) -> bool:
    """Only ``cleanup_policy`` containing ``delete`` deletes by retention (compact-only never does)."""
    return policy.deletes


def breaks_retention_ms(segment: SegmentInfo, policy: NamespacePolicy, now: int) -> bool:
    """Time rule: ``now − segment.max_timestamp > retention_ms`` (an empty segment never breaks it).

    ``retention_ms = 0`` is valid (Kafka's ``retention.ms=0``): every segment whose newest record
    is older than now breaks it; one stamped exactly ``now`` waits a millisecond."""
    if policy.retention_ms is None or segment.max_timestamp is None:
        return False
    return now - segment.max_timestamp > policy.retention_ms


def size_rule_active(total_bytes: int, policy: NamespacePolicy) -> bool:
    """The size rule applies only while the shard holds at least ``retention_bytes``."""
    return policy.retention_bytes is not None and total_bytes >= policy.retention_bytes


def breaks_retention_bytes(total_bytes: int, segment: SegmentInfo, policy: NamespacePolicy) -> bool:
    """Size rule: deleting the oldest segment still leaves at least ``retention_bytes``."""
    if not size_rule_active(total_bytes, policy):
        return False
    assert policy.retention_bytes is not None
    return total_bytes - segment.size_bytes >= policy.retention_bytes


def is_empty_active(segment: SegmentInfo) -> bool:
    return segment.state is SegmentState.ACTIVE and segment.record_count == 0


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    """Delete the first ``count`` segments; ``roll`` first when that includes the active one.

    ``reasons`` holds ``"time"`` or ``"size"`` per deleted segment.
    """

    count: int
    roll: bool
    reasons: tuple[str, ...]


def deletable_segments(segments: Sequence[SegmentInfo], policy: NamespacePolicy, now: int) -> RetentionPlan:
    """The contiguous prefix of ``segments`` (oldest first) that breaks a rule.

    Stops at the first segment breaking neither rule and at an empty active
    segment (never deleted). When the prefix covers every segment, the active
    one included, the caller rolls a new empty active segment first so the end
    offset is kept.
    """
    if not retention_applies(policy):
        return RetentionPlan(0, False, ())
    total = sum(s.size_bytes for s in segments)
    reasons: list[str] = []
    for segment in segments:
        if is_empty_active(segment):
            break
        if breaks_retention_ms(segment, policy, now):
            reasons.append("time")
        elif breaks_retention_bytes(total, segment, policy):
            reasons.append("size")
        else:
            break
        total -= segment.size_bytes
    count = len(reasons)
    return RetentionPlan(count, bool(segments) and count == len(segments), tuple(reasons))
