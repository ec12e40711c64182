"""The object-store tier of one engine (:class:`TierContext`) and of one shard (:class:`ShardTier`).

One :class:`TierContext` per ``segment`` engine: the :class:`~storage_engine.tier.store.ObjectTier`
named by ``EngineConfig.tier_uri`` (default :func:`~storage_engine.tier.store.default_tier_uri`)
and the read cache under the data directory. Each shard's log gets a :class:`ShardTier`, the
hooks it calls (:class:`~storage_engine.segment.tiered_log.TierHooks`): a stand-in for a segment
served from the object store, and the deletion of a segment's objects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from storage_engine.lifecycle.counters import Counters
from storage_engine.rules.pacing import Foreground, Slices, no_pause
from storage_engine.segment.meta import SegmentMeta
from storage_engine.segment.segment import Segment
from storage_engine.tier.layout import data_key, manifest_key, namespace_prefix, shard_prefix
from storage_engine.tier.remote_reads import CACHE_DIR, RemoteSegment, TierCache
from storage_engine.tier.store import ObjectTier

log = logging.getLogger(__name__)

GIVE_WAY_TO_APPENDS = True  # uploads pause for appends in flight (the tier bench turns it off for its baseline)


class TierContext:
    """The engine's object store and read cache (``cache_limit``: the node policy's ``tier_cache_bytes``)."""

    def __init__(
        self,
        uri: str,
        data_dir: Path,
        cache_limit: Callable[[], int],
        counters: Counters,
        foreground: Callable[[], Foreground | None] = lambda: None,
    ) -> None:
        self.tier = ObjectTier(uri)
        self.counters = counters
        self.cache = TierCache(data_dir / CACHE_DIR, self.tier, cache_limit, counters)
        self._foreground = foreground  # the engine's appends in flight (its lifecycle may not exist yet)

    def transfer_pace(self) -> Callable[[], None]:
        """The give-way point of one transfer (an offload's or a rewrite's upload, a recall's download;
        its own slices, so one per thread): :meth:`storage_engine.rules.pacing.Slices.check` over the engine's
        appends in flight, which pauses while any runs; :func:`~storage_engine.rules.pacing.no_pause` without an
        engine's appends or with ``GIVE_WAY_TO_APPENDS`` off."""
        foreground = self._foreground()
        if foreground is None or not GIVE_WAY_TO_APPENDS:
            return no_pause
        return Slices(foreground).check

    def shard(self, namespace: str, ns_id: int, shard: int) -> ShardTier:
        return ShardTier(self, namespace, ns_id, shard)

    def delete_namespace(self, namespace: str, ns_id: int) -> int:
        """Delete every object of a deleted namespace; how many there were."""
        objects = self.tier.list(namespace_prefix(namespace, ns_id))
        for obj in objects:
            self.tier.delete(obj.key)
            self.cache.forget(obj.key)
        if objects:
            log.info("%s: deleted %d objects of namespace %s", self.tier.uri, len(objects), namespace)
        return len(objects)


class ShardTier:
    """One shard's part of the object store: the keys of its segments' objects and the log's hooks."""

    def __init__(self, context: TierContext, namespace: str, ns_id: int, shard: int) -> None:
        self.context = context
        self.namespace = namespace
        self.ns_id = ns_id
        self.shard = shard
        self.prefix = shard_prefix(namespace, ns_id, shard)
        # (base offset, generation) → a segment replaced by a rewrite, served from these objects, that
        # a reader still held: its objects stay until it lets go (storage_engine.tier.rewrite)
        self.retired: dict[tuple[int, int], Segment] = {}

    @property
    def tier(self) -> ObjectTier:
        return self.context.tier

    def data_key(self, meta: SegmentMeta) -> str:
        return data_key(self.prefix, meta.base_offset, meta.tier_generation)

    def manifest_key(self, meta: SegmentMeta) -> str:
        return manifest_key(self.prefix, meta.base_offset, meta.tier_generation)

    def remote_segment(self, meta: SegmentMeta) -> Segment:
        return RemoteSegment(meta, self.data_key(meta), self.context.cache)

    def delete_objects(self, meta: SegmentMeta) -> None:
        """The manifest first (a data object without one is recognisably unfinished), then the data."""
        for key in (self.manifest_key(meta), self.data_key(meta)):
            if self.tier.delete(key):
                self.context.counters.add("tier_objects_deleted_total")
            self.context.cache.forget(key)
