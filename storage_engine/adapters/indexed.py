"""What the ``segment`` and ``rocksdb`` adapters share: everything above the shard.

Namespaces (persisted in the index store), argument validation, the I/O
worker pool, the data directory lock, and the read semantics of the contract
(bounds, Kafka-style progress, TTL visibility, key/tag/time lookups) are
implemented once here. A subclass only says how a shard stores its records
(:class:`ShardBase`): segment files or a RocksDB column family.
"""

from __future__ import annotations

import abc
import shutil
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from storage_engine.api import (
    AppendResult,
    EngineStats,
    NamespaceInfo,
    NewRecord,
    SegmentInfo,
    ShardFailure,
    ShardStats,
)
from storage_engine.clock import Clock
from storage_engine.compaction.store_io import CompactableShard
from storage_engine.config import Durability, EngineConfig
from storage_engine.engine import Engine
from storage_engine.errors import (
    EngineClosedError,
    InvalidArgumentError,
    NamespaceExistsError,
    StorageError,
)
from storage_engine.formats.codec import encode_records
from storage_engine.formats.ttl_import import import_dir, import_file
from storage_engine.lifecycle import LifecycleShard, TTLEntry
from storage_engine.lifecycle.counters import Counters
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.validation import (
    check_policy,
    check_shard,
    find_namespace,
    validate_namespace_name,
    validate_records,
    validate_shard_count,
)
from storage_engine.segment.datadir import DataDir, tree_bytes
from storage_engine.segment.index_keys import ttl_bound
from storage_engine.segment.index_records import NamespaceRecord
from storage_engine.segment.index_store import IndexStore
from storage_engine.segment.iopool import IOPool
from storage_engine.segment.reads import LogReads
from storage_engine.segment.shard import ShardBase
from storage_engine.segment.ttl_ingest import ingest_ttl_file
from storage_engine.subscriptions.cursors import Subscription


@dataclass(slots=True)
class _Namespace:
    record: NamespaceRecord
    shards: list[ShardBase]

    @property
    def info(self) -> NamespaceInfo:
        r = self.record
        return NamespaceInfo(name=r.name, shards=r.shards, policy=r.policy, created_at=r.created_at)


class IndexedLogAdapter(Engine):
    """Base of the log adapters; subclasses provide the shard storage."""

    name = "indexed"
    extra_column_families: tuple[str, ...] = ()

    def __init__(self, config: EngineConfig, clock: Clock) -> None:
        if config.data_dir is None:
            raise InvalidArgumentError("data_dir", f"is required for the {self.name!r} adapter")
        self.config = config
        self.clock = clock
        self.counters = Counters()
        self._lock = threading.RLock()  # namespace create/update/delete and close
        self._closed = False
        self._namespaces: dict[str, _Namespace] = {}
        self.data_dir = DataDir(Path(config.data_dir), self.name)
        try:
            stored_policy = self.data_dir.load_node_policy()  # before anything opens: a bad file fails fast
            self.store = IndexStore(self.data_dir.index_dir, self.extra_column_families)
            try:
                self._open_namespaces()
            except BaseException:
                self.store.close()
                raise
        except BaseException:
            self.data_dir.release()
            raise
        self._pool = IOPool(config.io_workers, config.max_requests_per_batch, config.fsync_interval_ms, self.name)
        self._compose(
            config,
            clock,
            stored_policy=stored_policy,
            persist_policy=self.data_dir.save_node_policy,
            persist_cursors=self._persist_cursors,
            restore_cursors=self._restore_cursors,
        )

    # -- what a subclass provides ----------------------------------------------------
    @abc.abstractmethod
    def _make_shard(self, record: NamespaceRecord, shard: int, *, create: bool) -> ShardBase:
        """Create a new empty shard or open (and recover) an existing one."""

    def _remove_namespace_files(self, record: NamespaceRecord) -> None:
        """Delete whatever the namespace has outside the index store."""

    def _remove_orphans(self, known: set[str]) -> None:
        """Remove files of namespaces that no longer exist (a crash during create or delete)."""

    # -- opening ------------------------------------------------------------------------
    def _open_namespaces(self) -> None:
        records = self.store.namespaces()
        self._remove_orphans({r.name for r in records})
        known_ids = {r.ns_id for r in records}
        orphan_ids = {p[0] for p in self.store.shard_ids()} - known_ids
        if orphan_ids:  # index entries of a namespace whose create or delete was interrupted
            wb = self.store.batch()
            for ns_id in orphan_ids:
                self.store.drop_namespace_entries(wb, ns_id)
            self.store.write(wb, sync=True)
        jobs = [(r, s) for r in records for s in range(r.shards)]
        with ThreadPoolExecutor(max_workers=max(1, self.config.io_workers)) as ex:
            shards = list(ex.map(lambda job: self._make_shard(job[0], job[1], create=False), jobs))
        it = iter(shards)
        for r in records:
            self._namespaces[r.name] = _Namespace(r, [next(it) for _ in range(r.shards)])

    # -- namespaces ---------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise EngineClosedError()

    def _namespace(self, name: str) -> _Namespace:
        self._check_open()
        return find_namespace(self._namespaces, name)

    def _shard(self, namespace: str, shard: int) -> ShardBase:
        ns = self._namespace(namespace)
        return ns.shards[check_shard(namespace, shard, len(ns.shards))]

    def _readable_shard(self, namespace: str, shard: int) -> LogReads:
        return LogReads(self._shard(namespace, shard))

    def create_namespace(self, name: str, shards: int, policy: NamespacePolicy | None = None) -> NamespaceInfo:
        self._check_open()
        validate_namespace_name(name)
        validate_shard_count(shards)
        policy = check_policy(policy if policy is not None else NamespacePolicy())
        with self._lock:
            self._check_open()
            if name in self._namespaces:
                raise NamespaceExistsError(name)
            record = NamespaceRecord(name, self.store.allocate_namespace_id(), shards, policy, self.clock.now_ms())
            logs = [self._make_shard(record, s, create=True) for s in range(shards)]
            # The namespace exists from this write on; a crash before it leaves only
            # orphans, which the next open removes.
            wb = self.store.batch()
            self.store.put_namespace(wb, record)
            self.store.write(wb, sync=True)
            ns = self._namespaces[name] = _Namespace(record, logs)
            return ns.info

    def update_namespace(self, name: str, policy: NamespacePolicy) -> NamespaceInfo:
        check_policy(policy)
        with self._lock:
            ns = self._namespace(name)
            record = replace(ns.record, policy=policy)
            wb = self.store.batch()
            self.store.put_namespace(wb, record)
            self.store.write(wb, sync=True)
            ns.record = record
            for log in ns.shards:
                log.policy = policy
            return ns.info

    def delete_namespace(self, name: str) -> None:
        with self._lock:
            ns = self._namespace(name)
            del self._namespaces[name]
            for log in ns.shards:  # waits for in-flight appends and reads
                log.close(sync=False, deleted=True)
            wb = self.store.batch()
            self.store.delete_namespace(wb, name)
            self.store.drop_namespace_entries(wb, ns.record.ns_id)
            self.store.drop_cursors(wb, ns.record.ns_id)
            self.store.write(wb, sync=True)
            self.subscriptions.forget(name)
            self._remove_namespace_files(ns.record)
            self.store.compact_namespace(ns.record.ns_id)
            self.lifecycle.read_checks.forget(name)
            self.counters.add("namespaces_deleted_total")

    def list_namespaces(self) -> list[NamespaceInfo]:
        self._check_open()
        return [ns.info for _, ns in sorted(self._namespaces.items())]

    def get_namespace(self, name: str) -> NamespaceInfo:
        return self._namespace(name).info

    # -- data ---------------------------------------------------------------------------
    def append(self, namespace: str, shard: int, records: Sequence[NewRecord]) -> AppendResult:
        with self.foreground.running():  # the TTL scan gives way while an append runs (pacing.Foreground)
            return self._append(namespace, shard, records)

    def _append(self, namespace: str, shard: int, records: Sequence[NewRecord]) -> AppendResult:
        log = self._shard(namespace, shard)
        validate_records(records, log.policy)
        if not records:
            with log.reading() as view:
                return AppendResult(view.end_offset, 0)
        policy = log.policy
        if policy.backlog_quota_bytes is not None or policy.backlog_quota_seconds is not None:
            with self.foreground.idle():  # a producer held by the quota waits: no scan waits on it
                self.backlog_quota.check_quota(namespace, policy)
        body = encode_records(records, self.clock.now_ms())
        self.lifecycle.runtime.disk.guard(body.batch_length)
        base = self._pool.submit(log, body).result()
        return AppendResult(base, len(records))

    # -- metadata -------------------------------------------------------------------------
    def list_segments(self, namespace: str, shard: int) -> list[SegmentInfo]:
        return self._shard(namespace, shard).segment_infos()

    def shard_stats(self, namespace: str, shard: int) -> ShardStats:
        return self._shard(namespace, shard).stats()

    def stats(self) -> EngineStats:
        self._check_open()
        namespaces = [ns for _, ns in sorted(self._namespaces.items())]
        shards = tuple(log.stats() for ns in namespaces for log in ns.shards)
        counters = self.counters.snapshot()
        counters.update(self.lifecycle.counters())
        counters["failed_shards"] = sum(1 for ns in namespaces for log in ns.shards if log.failure is not None)
        return EngineStats(adapter=self.name, namespaces=len(namespaces), shards=shards, counters=counters)

    def failed_shards(self) -> list[ShardFailure]:
        self._check_open()
        found = []
        for name, ns in sorted(self._namespaces.items()):
            for log in ns.shards:
                failure = log.failure
                if failure is not None:
                    code = failure.code if isinstance(failure, StorageError) else "write_failed"
                    found.append(ShardFailure(name, log.shard, code))
        return found

    # -- lifecycle hooks (ShardSource) -----------------------------------------------------
    def lifecycle_namespace(self, name: str) -> tuple[NamespacePolicy, Sequence[ShardBase]]:
        ns = self._namespace(name)
        return ns.record.policy, ns.shards

    def compaction_namespace(self, name: str) -> tuple[NamespacePolicy, Sequence[CompactableShard]]:
        return self.lifecycle_namespace(name)

    def lifecycle_namespaces(self) -> list[tuple[NamespacePolicy, Sequence[LifecycleShard]]]:
        self._check_open()
        return [(ns.record.policy, ns.shards) for _, ns in sorted(self._namespaces.items())]

    def ttl_candidates(
        self, namespace: str | None, shard: int | None, now: int, scanned: list[int]
    ) -> Iterator[TTLEntry]:
        names = {ns.record.ns_id: name for name, ns in list(self._namespaces.items())}
        wanted = None if namespace is None else self._namespace(namespace).record.ns_id
        yield from self.store.ttl_candidates(now, names, wanted, shard, scanned)

    def ttl_scan_begin(self, namespaces: Sequence[str]) -> object | None:
        known = self._namespaces
        return self.store.ttl_scan_begin([known[name].record.ns_id for name in namespaces if name in known])

    def ttl_scan_end(self, token: object | None, stop: TTLEntry | None, now: int, ok: bool) -> None:
        if not isinstance(token, dict) or not token:
            return
        if not ok:
            self.store.ttl_scan_end(token, None)
        elif stop is None:
            self.store.ttl_scan_end(token, ttl_bound(now + 1))  # every due entry is gone
        else:
            self.store.ttl_scan_end(token, stop.key or ttl_bound(stop.expire_at))

    # -- bulk TTL index load (StorageAdapter.ingest_ttl_index) -------------------------------------
    def ttl_index_info(self, namespace: str) -> dict[str, object]:
        ns = self._namespace(namespace)
        return {
            "namespace": namespace,
            "ns_id": ns.record.ns_id,
            "shards": ns.record.shards,
            "end_offsets": [s.view.end_offset for s in ns.shards],
        }

    def ttl_import_dir(self) -> Path:
        return import_dir(self.data_dir.root)

    def ingest_ttl_index(self, namespace: str, file: str) -> dict[str, object]:
        """RocksDB ``ingest_external_file`` into the ``ttl`` family after validating every key
        (:func:`~storage_engine.segment.ttl_ingest.ingest_ttl_file`); scratch space under trash/."""
        ns = self._namespace(namespace)
        path = import_file(self.ttl_import_dir(), file)
        with self.lifecycle.runtime.ops:  # not while a TTL scan or a compaction runs
            bounds = [(s.view.log_start_offset, s.view.end_offset) for s in ns.shards]
            result = ingest_ttl_file(self.store, path, ns.record.ns_id, bounds, self.data_dir.trash_dir)
        return {"namespace": namespace, **result}

    # -- subscription cursors live in the ``cursors`` family -------------------------------------
    def _persist_cursors(self, namespace: str, sub: Subscription, deleted: bool) -> None:
        ns = self._namespace(namespace)
        wb = self.store.batch()
        if deleted:
            self.store.delete_cursors(wb, ns.record.ns_id, sub.name)
        else:
            self.store.put_cursors(wb, ns.record.ns_id, sub.name, sub.pack())
        self.store.write(wb, sync=self.config.durability is Durability.FSYNC)

    def _restore_cursors(self) -> list[tuple[str, Subscription]]:
        names = {ns.record.ns_id: name for name, ns in self._namespaces.items()}
        out: list[tuple[str, Subscription]] = []
        wb = self.store.batch()
        for ns_id, sub_name, raw in self.store.all_cursors():
            namespace = names.get(ns_id)
            if namespace is None:  # left by an interrupted namespace delete
                self.store.delete_cursors(wb, ns_id, sub_name)
                continue
            out.append((namespace, Subscription.unpack(sub_name, raw)))
        self.store.write(wb, sync=True)
        return out

    def measure_disk(self) -> tuple[int, int, str]:
        """With a quota: every byte under the data directory (segments, ``.deleted`` files,
        RocksDB's files, checkpoints). Without: the filesystem's used bytes against used +
        what the node may still write (``df``'s ``Use%``: blocks reserved for root are
        neither, since the node cannot write them)."""
        root = self.data_dir.root
        if self.config.disk_capacity_bytes is not None:
            return tree_bytes(root), self.config.disk_capacity_bytes, "quota"
        usage = shutil.disk_usage(root)
        return usage.used, usage.used + usage.free, "filesystem"

    def pending_delete_bytes(self) -> int:
        namespaces = list(self._namespaces.values())  # a snapshot: creates and deletes may run meanwhile
        return sum(log.pending_file_bytes() for ns in namespaces for log in ns.shards)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop_parts()
        self._pool.close()  # finishes queued appends first
        for ns in self._namespaces.values():
            for log in ns.shards:
                log.close()
        self.store.close()
        self.data_dir.release()
