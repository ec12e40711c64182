"""The figures the console shows, defined once (DESIGN §3 "Figures").

Per segment, shard and subscription every figure is the engine's
(:mod:`storage_engine.api`: ``SegmentInfo``, ``ShardStats``, ``BacklogInfo``),
carried unchanged by the node, the catalog, the metrics and the UI; nothing
here or anywhere in the control plane derives one from another (e.g. an
expired count from a ratio). Above a shard the control plane only adds the
engine's figures up — a namespace is the sum of its shards, the cluster the
sum of its namespaces, a subscription the sum of its shards, a shard's backlog
the sum of the subscriptions on it — and a ratio above a shard is the ratio of
those sums, as the engine takes a shard's from its segments
(:func:`storage_engine.api.shard_stats_of`).
"""

from __future__ import annotations

from collections.abc import Iterable

from storage_engine.api import SegmentTier

# Tiered storage (DESIGN §3 "Tiers"): a segment's bytes are local unless its tier is remote (the local copy
# dropped), and in the object store when its tier is both or remote — the node's ``tier_local_bytes`` and
# ``tier_remote_bytes`` gauges (storage_engine.tier.figures) count them so, and so do the shard, namespace
# and node totals here: local + remote exceeds stored by the bytes held in both tiers.
LOCAL_TIERS = (SegmentTier.LOCAL.value, SegmentTier.BOTH.value)
REMOTE_TIERS = (SegmentTier.BOTH.value, SegmentTier.REMOTE.value)
SEGMENT_TIERS = tuple(tier.value for tier in SegmentTier)


def ratio(part: float, whole: float) -> float:
    """``part / whole``, 0 when ``whole`` is 0 (an empty shard, namespace or cluster)."""
    return part / whole if whole else 0.0


def tier_bytes(segments: Iterable[tuple[str, int]]) -> tuple[int, int]:
    """``(local bytes, remote bytes)`` of segments given as ``(tier, size in bytes)``: the one definition of
    a shard's local and remote bytes (above a shard they are added up like every figure)."""
    local = remote = 0
    for tier, size in segments:
        if tier in LOCAL_TIERS:
            local += size
        if tier in REMOTE_TIERS:
            remote += size
    return local, remote
