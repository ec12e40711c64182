"""The ``segment`` adapter: the production default.

Records live in segment files (``<data_dir>/segments/<namespace>/<shard>/``),
indexes and metadata in the RocksDB index store (``<data_dir>/index/``).
Everything above the shard is shared with the ``rocksdb`` adapter
(:mod:`storage_engine.segment.base_adapter`); the shard is a :class:`ShardLog`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from storage_engine.clock import Clock
from storage_engine.config import EngineConfig
from storage_engine.segment.base_adapter import IndexedLogAdapter
from storage_engine.segment.datadir import fsync_dir
from storage_engine.segment.index_records import NamespaceRecord
from storage_engine.segment.log import ShardLog
from storage_engine.segment.shard import ShardBase
from storage_engine.segment.shard_index import ShardIndex


class SegmentAdapter(IndexedLogAdapter):
    name = "segment"

    def __init__(self, config: EngineConfig, clock: Clock) -> None:
        super().__init__(config, clock)

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
        }
        if create:
            if directory.exists():  # left by a crash before the namespace was recorded
                self._trash(directory, f"{record.ns_id}-{shard}")
            return ShardLog.create(**kwargs)
        return ShardLog.open(**kwargs)

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
