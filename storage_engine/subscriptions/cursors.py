"""A subscription's cursors (one per shard), their stored format, and the cursor math."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from storage_engine.api import (
    SegmentInfo,
    SegmentState,
)
from storage_engine.rules.expiry import segment_expired
from storage_engine.rules.retention import RetentionPlan

SUBSCRIPTION_COUNTERS = (
    "subscription_ttl_expired_total",
    "backlog_evictions_total",
    "producer_held_total",
    "producer_rejected_total",
)


@dataclass(slots=True)
class Subscription:
    """A subscription's state: guarded by the mixin's ``_subs_lock``."""

    name: str
    created_at: int
    cursors: list[int]

    def pack(self) -> bytes:
        return json.dumps({"created_at": self.created_at, "cursors": self.cursors}).encode()

    @classmethod
    def unpack(cls, name: str, raw: bytes) -> Subscription:
        body = json.loads(raw)
        return cls(name, int(body["created_at"]), [int(c) for c in body["cursors"]])


# -- pure cursor math (shared, unit-testable) -------------------------------------------------------
def first_unacked(cursor: int, log_start_offset: int) -> int:
    """The first offset still in the backlog: after the cursor, never below the log start."""
    return max(cursor + 1, log_start_offset)


def backlog_messages(cursor: int, log_start_offset: int, end_offset: int) -> int:
    """``end_offset − cursor − 1`` counting only stored offsets (≥ the log start)."""
    return max(0, end_offset - first_unacked(cursor, log_start_offset))


def backlog_bytes(segments: Sequence[SegmentInfo], start: int) -> int:
    """Stored bytes at or after ``start``: whole segments, the one holding ``start`` prorated."""
    total = 0
    for seg in segments:
        if seg.record_count == 0 or seg.last_offset < start:
            continue
        if seg.base_offset >= start:
            total += seg.size_bytes
        else:
            span = seg.last_offset - seg.base_offset + 1
            total += seg.size_bytes * (seg.last_offset - start + 1) // span
    return total


def whole_segment_expired(seg: SegmentInfo, ttl_ms: int | None, now: int) -> bool:
    """Every record of a sealed segment is past message TTL: by its deadline, or by its seal
    (last write) time, so producer timestamps in the future cannot keep it alive."""
    if seg.state is not SegmentState.SEALED or seg.record_count == 0:
        return False
    if segment_expired(seg, ttl_ms, now):
        return True
    return ttl_ms is not None and seg.modified_at + ttl_ms <= now


def cap_retention_plan(plan: RetentionPlan, segments: Sequence[SegmentInfo], floor: int) -> RetentionPlan:
    """Keep only the leading segments every subscription acknowledged (``last_offset ≤ floor``)."""
    count = 0
    for seg in segments[: plan.count]:
        if seg.record_count and seg.last_offset > floor:
            break
        count += 1
    if count == plan.count:
        return plan
    return RetentionPlan(count, False, plan.reasons[:count])
