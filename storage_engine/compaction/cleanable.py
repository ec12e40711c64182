"""The cleanable range of a shard and when it is due (DESIGN §3 "Key compaction").

From the first dirty offset (the checkpoint) up to the first uncleanable offset: the active
segment's base, or the base of the first sealed segment holding records newer than
``min_compaction_lag_ms``. Due when the dirty ratio is above ``min_cleanable_dirty_ratio`` or
dirty data is older than ``max_compaction_lag_ms``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from storage_engine.api import SegmentInfo, SegmentState
from storage_engine.compaction.checkpoint import CleanerState
from storage_engine.policies.policy import NamespacePolicy


@dataclass(frozen=True, slots=True)
class CleanableRange:
    """Where a shard may be cleaned now and whether it is due (DESIGN §3)."""

    log_start: int
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int
    dirty_min_timestamp: int | None
    segments: tuple[SegmentInfo, ...]  # the sealed segments below the first uncleanable offset

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    def lag_due(self, policy: NamespacePolicy, now: int) -> bool:
        lag = policy.max_compaction_lag_ms
        return (
            lag is not None
            and self.dirty_bytes > 0
            and self.dirty_min_timestamp is not None
            and now - self.dirty_min_timestamp > lag
        )

    def due(self, policy: NamespacePolicy, now: int) -> bool:
        if self.dirty_bytes <= 0 or self.first_dirty >= self.first_uncleanable:
            return False
        return self.dirty_ratio > policy.min_cleanable_dirty_ratio or self.lag_due(policy, now)


def cleanable_range(
    segments: Sequence[SegmentInfo], state: CleanerState, policy: NamespacePolicy, now: int
) -> CleanableRange:
    """The cleanable range of a shard from its segments (oldest first, active last)."""
    log_start = segments[0].base_offset if segments else 0
    first_dirty = max(state.first_dirty, log_start)
    # With every segment sealed (a dry run's view of a step that seals an idle active
    # segment) the range runs to the end offset.
    first_uncleanable = max(segments[-1].base_offset, segments[-1].last_offset + 1) if segments else 0
    cleanable: list[SegmentInfo] = []
    for seg in segments:
        if seg.state is not SegmentState.SEALED:
            first_uncleanable = seg.base_offset
            break
        if seg.max_timestamp is not None and now - seg.max_timestamp < policy.min_compaction_lag_ms:
            first_uncleanable = seg.base_offset
            break
        cleanable.append(seg)
    first_dirty = min(first_dirty, first_uncleanable)
    clean = dirty = 0
    dirty_min: int | None = None
    for seg in cleanable:
        if seg.last_offset < first_dirty:
            clean += seg.size_bytes
        else:
            dirty += seg.size_bytes
            if seg.min_timestamp is not None and seg.record_count:
                dirty_min = seg.min_timestamp if dirty_min is None else min(dirty_min, seg.min_timestamp)
    return CleanableRange(log_start, first_dirty, first_uncleanable, clean, dirty, dirty_min, tuple(cleanable))
