"""The tier's gauges (``EngineStats.counters``, published on the node's ``/metrics``): where the
bytes of sealed segments are, what the read cache holds and how far offloading is behind.

- ``tier_local_bytes``: bytes of segments with a local file (the active one included);
- ``tier_remote_bytes``: bytes of segments in the object store (``both`` and ``remote``);
- ``tier_remote_only_bytes``: of those, the bytes whose local copy is gone (``remote``);
  ``tier_local_bytes + tier_remote_only_bytes`` is every stored byte of the node, the sums of the
  shards' ``local_bytes`` and ``remote_only_bytes`` (:func:`storage_engine.model.tier_split`);
  ``tier_remote_bytes`` overlaps ``tier_local_bytes`` by the ``both`` segments and is no part of
  that split;
- ``tier_offload_pending_segments``: sealed, non-empty segments of namespaces with remote storage
  enabled whose bytes are not in the object store yet (``local`` or ``uploading``);
- ``tier_offload_lag_seconds``: how long the oldest of those has been waiting — now minus the
  segment's last write (``modified_at``: when it stopped growing, on the engine's clock); 0 when
  none waits;
- ``tier_cache_bytes``: bytes of object blocks in the read cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from storage_engine.segment.meta import SegmentMeta, TierState

PENDING = (TierState.LOCAL, TierState.UPLOADING)


def tier_gauges(shards: Iterable[tuple[bool, Sequence[SegmentMeta]]], now: int, cache_bytes: int) -> dict[str, float]:
    """The gauges over ``shards``: per shard ``(remote storage enabled, its metas, the active one last)``."""
    local = remote = remote_only = pending = 0
    oldest: int | None = None
    for enabled, metas in shards:
        for i, m in enumerate(metas):
            sealed = i < len(metas) - 1
            if m.tier is TierState.REMOTE:
                remote_only += m.size_bytes
            else:
                local += m.size_bytes
            if sealed and m.tier in (TierState.BOTH, TierState.REMOTE):
                remote += m.size_bytes
            if enabled and sealed and m.tier in PENDING and m.record_count > 0:
                pending += 1
                oldest = m.modified_at if oldest is None else min(oldest, m.modified_at)
    return {
        "tier_local_bytes": local,
        "tier_remote_bytes": remote,
        "tier_remote_only_bytes": remote_only,
        "tier_offload_pending_segments": pending,
        "tier_offload_lag_seconds": 0.0 if oldest is None else max(0, now - oldest) / 1000,
        "tier_cache_bytes": cache_bytes,
    }
