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


def ratio(part: float, whole: float) -> float:
    """``part / whole``, 0 when ``whole`` is 0 (an empty shard, namespace or cluster)."""
    return part / whole if whole else 0.0
