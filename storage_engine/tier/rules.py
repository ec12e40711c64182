"""The tier's rules (DESIGN §3 "Tiers"): which segments are offloaded, which local copies go.

- :func:`offload_candidates`: every sealed, non-empty segment whose bytes are only local, oldest
  first (the active segment never: it is still written);
- :func:`local_copies_to_drop`: Kafka's ``local.retention.*`` over the segments that still have a
  local copy (the active one included in the size), from the oldest: a copy goes when its segment
  breaks the local time rule (``now − max_timestamp > local_retention_ms``) or the local size rule
  (only when the local total ≥ ``local_retention_bytes``: drop while ``local total − size of the
  oldest ≥ local_retention_bytes``), and only if the segment is uploaded and verified; the walk
  stops at the first copy that breaks neither rule or exists nowhere else. Unset local retention
  is the total retention (:func:`~storage_engine.policies.policy.effective_local_retention`); the total
  retention itself (``apply_retention``) still runs over every segment, local or remote;
- :func:`recall_candidates`: the segments only in the object store whose local copies the policy
  keeps — every one when remote storage is disabled (nothing drops local copies then), else those
  :func:`local_copies_to_drop` would keep if they were local again, so a recall is never undone by
  the next offload step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from storage_engine.api import SegmentInfo, SegmentState, SegmentTier
from storage_engine.policies.policy import NamespacePolicy, effective_local_retention


def offload_candidates(segments: Sequence[SegmentInfo]) -> list[SegmentInfo]:
    """Sealed, non-empty, local-only segments in offset order (``segments``: the shard's, active last)."""
    return [
        s
        for s in segments[:-1]
        if s.state is SegmentState.SEALED and s.tier is SegmentTier.LOCAL and s.record_count > 0
    ]


def local_copies_to_drop(segments: Sequence[SegmentInfo], policy: NamespacePolicy, now: int) -> list[int]:
    """Base offsets of the segments whose local copies go (see the module docstring)."""
    ms, size = effective_local_retention(policy)
    if ms is None and size is None:
        return []
    local = [s for s in segments if s.tier is not SegmentTier.REMOTE]
    total = sum(s.size_bytes for s in local)
    out: list[int] = []
    for s in local[:-1]:
        if s.state is not SegmentState.SEALED:
            break
        by_time = ms is not None and s.max_timestamp is not None and now - s.max_timestamp > ms
        by_size = size is not None and total - s.size_bytes >= size
        if not (by_time or by_size) or s.tier is not SegmentTier.BOTH:
            break
        out.append(s.base_offset)
        total -= s.size_bytes
    return out


def recall_candidates(segments: Sequence[SegmentInfo], policy: NamespacePolicy, now: int) -> list[SegmentInfo]:
    """Sealed segments only in the object store (``remote``) that the policy keeps local, oldest
    first (see the module docstring): local retention is run as if every one of them were local
    again (``both``); those it would not drop come back."""
    remote = [s for s in segments[:-1] if s.tier is SegmentTier.REMOTE and s.state is SegmentState.SEALED]
    if not remote or not policy.remote_storage_enabled:
        return remote
    as_local = [replace(s, tier=SegmentTier.BOTH) if s.tier is SegmentTier.REMOTE else s for s in segments]
    dropped = set(local_copies_to_drop(as_local, policy, now))
    return [s for s in remote if s.base_offset not in dropped]
