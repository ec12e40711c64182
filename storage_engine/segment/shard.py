"""What every shard store has, whatever holds its records: the single-writer lock,
reader pinning, the failure state, durability scheduling and the metadata views."""

from __future__ import annotations

import abc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from storage_engine.api import Record, SegmentInfo, ShardStats
from storage_engine.clock import Clock
from storage_engine.codec import EncodedRecords
from storage_engine.config import EngineConfig
from storage_engine.errors import CorruptSegmentError, EngineClosedError, UnknownNamespaceError
from storage_engine.policy import NamespacePolicy
from storage_engine.segment.counters import Counters
from storage_engine.segment.index_store import ShardIndex
from storage_engine.segment.iopool import SyncSchedule
from storage_engine.segment.meta import SegmentMeta


class ShardBase(abc.ABC):
    """Base of :class:`~storage_engine.segment.log.ShardLog` and the ``rocksdb`` adapter's shard.

    ``view`` is an immutable snapshot with at least ``log_start_offset``,
    ``end_offset`` and ``metas()``; writers swap it, readers take it once.
    """

    view: Any

    def __init__(
        self,
        *,
        namespace: str,
        shard: int,
        index: ShardIndex,
        policy: NamespacePolicy,
        config: EngineConfig,
        clock: Clock,
        counters: Counters,
    ) -> None:
        self.namespace = namespace
        self.shard = shard
        self.route = f"{namespace}/{shard}"
        self.index = index
        self.policy = policy
        self.clock = clock
        self.counters = counters
        self.sync_schedule = SyncSchedule(config.durability, config.fsync_interval_ms)
        self.write_lock = threading.Lock()  # held by the I/O worker for a group, and by close
        self._readers = 0
        self._readers_done = threading.Condition()
        self._closed = False
        self._deleted = False
        # Set when the shard cannot be served (a damaged sealed segment, a failed write);
        # reads and appends raise it, other shards are unaffected.
        self.failure: Exception | None = None

    def check_usable(self) -> None:
        if self._closed:
            raise UnknownNamespaceError(self.namespace) if self._deleted else EngineClosedError()
        f = self.failure
        if isinstance(f, CorruptSegmentError):
            raise CorruptSegmentError(f.path, f.position, f.reason)
        if f is not None:
            raise f

    @contextmanager
    def reading(self) -> Iterator[Any]:
        """Pin the shard's storage for the duration of a read; yields the current view."""
        with self._readers_done:
            self.check_usable()
            self._readers += 1
        try:
            yield self.view
        finally:
            with self._readers_done:
                self._readers -= 1
                if self._readers == 0:
                    self._readers_done.notify_all()

    # -- records: what each store implements --------------------------------------------------
    @abc.abstractmethod
    def append_group(self, bodies: list[EncodedRecords]) -> list[int]:
        """Append batches in order (only ever called by this shard's I/O worker); return base offsets."""

    @abc.abstractmethod
    def iter_records(self, view: Any, start: int, *, min_timestamp: int | None = None) -> Iterator[Record]:
        """Records at or after ``start`` up to ``view.end_offset`` in offset order. Batches whose
        records are all older than ``min_timestamp`` may be skipped (a hint, not a filter)."""

    @abc.abstractmethod
    def record_at(self, offset: int) -> Record | None:
        """The record stored at ``offset``, or ``None``; call within :meth:`reading`."""

    # -- metadata -------------------------------------------------------------------------
    def segment_infos(self) -> list[SegmentInfo]:
        return [m.to_info(self.namespace, self.shard) for m in self.view.metas()]

    def stats(self) -> ShardStats:
        view = self.view
        metas: list[SegmentMeta] = view.metas()
        return ShardStats(
            namespace=self.namespace,
            shard=self.shard,
            log_start_offset=view.log_start_offset,
            end_offset=view.end_offset,
            record_count=sum(m.record_count for m in metas),
            live_count=sum(m.live_count for m in metas),
            size_bytes=sum(m.size_bytes for m in metas),
            segment_count=len(metas),
        )

    # -- durability and closing ----------------------------------------------------------------
    def sync_if_due(self) -> bool:
        """Called by the I/O worker: fsync once the ``interval`` has passed; whether data is still unsynced."""
        with self.write_lock:
            if self._closed or self.failure is not None:
                return False
            if self.sync_schedule.due():
                self._sync()
            return self.sync_schedule.dirty

    def _sync(self) -> None:
        self._sync_storage()
        self.sync_schedule.synced()
        self.counters.add("fsyncs_total")

    @abc.abstractmethod
    def _sync_storage(self) -> None:
        """Make every acknowledged write durable."""

    @abc.abstractmethod
    def _release(self) -> None:
        """Close files or handles; called once, with no reader or writer left."""

    def close(self, *, sync: bool = True, deleted: bool = False) -> None:
        """Wait for the running group commit and in-flight reads, fsync, release. Idempotent.

        ``deleted``: the namespace is being deleted; later calls report it unknown.
        """
        with self.write_lock:
            if self._closed:
                return
            with self._readers_done:
                self._closed = True
                self._deleted = deleted
                while self._readers:
                    self._readers_done.wait()
            if sync and self.failure is None:
                self._sync()
            self._release()
