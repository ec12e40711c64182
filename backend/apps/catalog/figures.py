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

from storage_engine.api import SegmentTier

# Tiered storage (DESIGN §3 "Tiers"): where a shard's stored bytes are is the engine's split
# (storage_engine.model.tier_split, ShardStats.local_bytes / remote_only_bytes): local = segments with a local
# file (tiers local and both, the active one included), remote only = segments only in the object store. The
# two come in the same /v1/stats row as size_bytes and add up to it; the catalog stores the three together from
# one answer, and every total above a shard sums the same rows, so stored = local + remote only on every page.
SEGMENT_TIERS = tuple(tier.value for tier in SegmentTier)
# The byte figures that split a shard's stored bytes (ShardStatus columns, API fields).
TIER_SPLIT = ("local_bytes", "remote_only_bytes")


def ratio(part: float, whole: float) -> float:
    """``part / whole``, 0 when ``whole`` is 0 (an empty shard, namespace or cluster)."""
    return part / whole if whole else 0.0
