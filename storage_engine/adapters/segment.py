"""The ``segment`` adapter: the production default.

Records live in segment files (``<data_dir>/segments/<namespace>/<shard>/``),
indexes and metadata in the RocksDB index store (``<data_dir>/index/``), sealed
segments of namespaces with ``remote_storage_enabled`` also (or only) in the
object-store tier (``EngineConfig.tier_uri``, :mod:`storage_engine.tier`).
Everything above the shard is shared with the ``rocksdb`` adapter
(:mod:`storage_engine.adapters.indexed`); the shard is a
:class:`~storage_engine.segment.tiered_log.TieredShardLog`.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from storage_engine.adapters.indexed import IndexedLogAdapter
from storage_engine.api import EngineStats, LifecycleResult, VerifyReport
from storage_engine.clock import Clock
from storage_engine.config import EngineConfig
from storage_engine.errors import TierError
from storage_engine.lifecycle import MAX_PROBLEMS
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.pacing import Foreground
from storage_engine.segment.datadir import fsync_dir
from storage_engine.segment.index_records import NamespaceRecord
from storage_engine.segment.meta import TierState
from storage_engine.segment.shard import ShardBase
from storage_engine.segment.shard_index import ShardIndex
from storage_engine.segment.tiered_log import TieredShardLog
from storage_engine.tier.context import TierContext
from storage_engine.tier.figures import tier_gauges
from storage_engine.tier.offload import Offloader
from storage_engine.tier.recall import Recaller
from storage_engine.tier.rewrite import rewrite_offloaded
from storage_engine.tier.store import default_tier_uri
from storage_engine.tier.verify import verify_tier

log = logging.getLogger(__name__)


class SegmentAdapter(IndexedLogAdapter):
    name = "segment"

    def __init__(self, config: EngineConfig, clock: Clock) -> None:
        self._tier: TierContext | None = None
        self._offloader: Offloader | None = None
        self._recaller: Recaller | None = None
        super().__init__(config, clock)
        # Under disk pressure the file cleaner offloads before it deletes (DESIGN §3 "Tiers").
        self.lifecycle.cleaner.offload_first = lambda limit: self.offload(None, limit=limit)

    @property
    def tier(self) -> TierContext:
        """The object-store tier (built when the first shard opens; the store is only contacted
        when something is offloaded or read from it)."""
        if self._tier is None:
            uri = self.config.tier_uri or default_tier_uri(self.data_dir.root)
            self._tier = TierContext(uri, self.data_dir.root, self._tier_cache_bytes, self.counters, self._foreground)
        return self._tier

    def _tier_cache_bytes(self) -> int:
        """The node policy's cache bound (while the engine opens, before its parts exist: the configured one)."""
        lifecycle = getattr(self, "lifecycle", None)
        policy = self.config.node_policy if lifecycle is None else lifecycle.runtime.node_policy
        return policy.tier_cache_bytes

    def _foreground(self) -> Foreground | None:
        """The appends in flight uploads give way to (none while the engine opens, before its parts exist)."""
        lifecycle = getattr(self, "lifecycle", None)
        return None if lifecycle is None else lifecycle.runtime.foreground

    def _shard_dir(self, record: NamespaceRecord, shard: int) -> Path:
        return self.data_dir.segments_dir / record.name / str(shard)

    def _make_shard(self, record: NamespaceRecord, shard: int, *, create: bool) -> ShardBase:
        directory = self._shard_dir(record, shard)
        kwargs = {
            "namespace": record.name,
            "shard": shard,
            "directory": directory,
            "index": ShardIndex(self.store, record.ns_id, shard),
            "policy": record.policy,
            "config": self.config,
            "clock": self.clock,
            "counters": self.counters,
            "tier": self.tier.shard(record.name, record.ns_id, shard),
            "rewriter": rewrite_offloaded,  # compaction and reclamation of offloaded segments
        }
        if create:
            if directory.exists():  # left by a crash before the namespace was recorded
                self._trash(directory, f"{record.ns_id}-{shard}")
            return TieredShardLog.create(**kwargs)
        return TieredShardLog.open(**kwargs)

    # -- tiered storage ---------------------------------------------------------------------------
    def _tiered(self, name: str | None) -> list[tuple[str, NamespacePolicy, Sequence[TieredShardLog]]]:
        names = self.namespace_names() if name is None else [name]
        out: list[tuple[str, NamespacePolicy, Sequence[TieredShardLog]]] = []
        for n in names:
            ns = self._namespace(n)
            out.append((n, ns.record.policy, [s for s in ns.shards if isinstance(s, TieredShardLog)]))
        return out

    def offload(
        self, namespace: str | None, shard: int | None = None, limit: int | None = None, *, dry_run: bool = False
    ) -> LifecycleResult:
        if self._offloader is None:
            self._offloader = Offloader(self.lifecycle.runtime, self._tiered)
        return self._offloader.offload(namespace, shard, limit, dry_run=dry_run)

    def recall(
        self, namespace: str | None, shard: int | None = None, limit: int | None = None, *, dry_run: bool = False
    ) -> LifecycleResult:
        if self._recaller is None:
            self._recaller = Recaller(self.lifecycle.runtime, self._tiered)
        return self._recaller.recall(namespace, shard, limit, dry_run=dry_run)

    def stats(self) -> EngineStats:
        """Also the tier's gauges (:mod:`storage_engine.tier.figures`)."""
        stats = super().stats()
        shards = [
            (ns.record.policy.remote_storage_enabled, s.view.metas())
            for _, ns in sorted(self._namespaces.items())
            for s in ns.shards
        ]
        cached = 0 if self._tier is None else self._tier.cache.cached_bytes
        stats.counters.update(tier_gauges(shards, self.clock.now_ms(), cached))
        return stats

    def verify(self, namespace: str) -> VerifyReport:
        """The indexes against the data (every record, offloaded ones read from the object store),
        and the object store against the catalog (:mod:`storage_engine.tier.verify`)."""
        report = super().verify(namespace)
        _, policy, shards = self._tiered(namespace)[0]
        checked, problems = verify_tier(shards, policy.remote_storage_enabled)
        if not checked and not problems:
            return report
        every = [*report.problems, *problems]
        return VerifyReport(
            namespace,
            report.records_checked,
            report.index_entries_checked + checked,
            report.problem_count + len(problems),
            tuple(every[:MAX_PROBLEMS]),
        )

    def delete_namespace(self, name: str) -> None:
        """Also deletes the namespace's objects in the tier, after its data is gone locally (a
        tier that fails then is logged, not raised: the namespace is already deleted)."""
        ns = self._namespace(name)
        record = ns.record
        tiered = record.policy.remote_storage_enabled or any(
            m.tier is not TierState.LOCAL for s in ns.shards for m in s.view.metas()
        )
        super().delete_namespace(name)
        if tiered:
            try:
                self.tier.delete_namespace(record.name, record.ns_id)
            except TierError as exc:
                log.warning("namespace %s deleted; its objects in the tier were not: %s", name, exc)

    def _remove_namespace_files(self, record: NamespaceRecord) -> None:
        directory = self.data_dir.segments_dir / record.name
        if directory.exists():
            self._trash(directory, f"{record.ns_id}-{record.name}")
        self._empty_trash()

    def _remove_orphans(self, known: set[str]) -> None:
        segments = self.data_dir.segments_dir
        segments.mkdir(parents=True, exist_ok=True)
        for entry in os.scandir(segments):
            if entry.is_dir() and entry.name not in known:
                self._trash(Path(entry.path), f"orphan-{entry.name}")
        self._empty_trash()

    def _trash(self, directory: Path, label: str) -> None:
        """Move a directory out of the live tree in one rename, so a crash never leaves it half deleted."""
        trash = self.data_dir.trash_dir
        trash.mkdir(parents=True, exist_ok=True)
        target = trash / label
        n = 0
        while target.exists():
            n += 1
            target = trash / f"{label}.{n}"
        os.rename(directory, target)
        fsync_dir(directory.parent)

    def _empty_trash(self) -> None:
        trash = self.data_dir.trash_dir
        if trash.exists():
            for entry in os.scandir(trash):
                shutil.rmtree(entry.path, ignore_errors=True)
