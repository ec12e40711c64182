"""The memory store under the engine: namespaces, appends, the TTL heap walk, bulk TTL loads."""

from __future__ import annotations

import heapq
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from operator import attrgetter
from pathlib import Path

from storage_engine.api import (
    AppendResult,
    EngineStats,
    NamespaceInfo,
    NewRecord,
    SegmentInfo,
    ShardStats,
)
from storage_engine.clock import Clock
from storage_engine.compaction.store_io import CompactableShard
from storage_engine.config import EngineConfig
from storage_engine.engine import Engine
from storage_engine.errors import (
    EngineClosedError,
    NamespaceExistsError,
    UnknownNamespaceError,
)
from storage_engine.formats.ttl_import import import_dir, import_file
from storage_engine.lifecycle import (
    LifecycleShard,
    TTLEntry,
)
from storage_engine.lifecycle.counters import Counters
from storage_engine.memory.shard import MemoryNamespace, MemoryShard
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.rolling import should_roll
from storage_engine.rules.validation import (
    check_policy,
    check_shard,
    find_namespace,
    validate_namespace_name,
    validate_records,
    validate_shard_count,
)

TTL_POP_CHUNK = 64  # entries the TTL scan takes off a namespace's heap per hold of its lock
MEMORY_NS_ID = 0  # the namespace id TTL-index keys carry for this adapter (it has no ids)


class MemoryAdapter(Engine):
    name = "memory"

    def __init__(self, config: EngineConfig, clock: Clock) -> None:
        self._config = config
        self._clock = clock
        self.config = config
        self.clock = clock
        self._lock = threading.Lock()  # guards the namespace catalog and counters
        self._namespaces: dict[str, MemoryNamespace] = {}
        self.counters = Counters()
        self.counters.set_many(
            dict.fromkeys(
                ("append_batches_total", "appended_records_total", "appended_bytes_total", "read_requests_total"), 0
            )
        )
        self._closed = False
        self._compose(config, clock)

    # -- helpers ----------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise EngineClosedError()

    def _namespace(self, name: str) -> MemoryNamespace:
        self._check_open()
        return find_namespace(self._namespaces, name)  # a single dict read is atomic; writers hold _lock

    def _readable_shard(self, namespace: str, shard: int) -> MemoryShard:
        return self._shard(namespace, shard)

    def _shard(self, namespace: str, shard: int) -> MemoryShard:
        ns = self._namespace(namespace)
        return ns.shards[check_shard(namespace, shard, len(ns.shards))]

    @staticmethod
    def _check_live(s: MemoryShard) -> None:
        """Called under ``s.lock``: the namespace may have been deleted since lookup."""
        if s.deleted:
            raise UnknownNamespaceError(s.namespace.name)

    # -- namespaces ---------------------------------------------------------------
    def create_namespace(self, name: str, shards: int, policy: NamespacePolicy | None = None) -> NamespaceInfo:
        self._check_open()
        validate_namespace_name(name)
        validate_shard_count(shards)
        policy = check_policy(NamespacePolicy() if policy is None else policy)
        with self._lock:
            if name in self._namespaces:
                raise NamespaceExistsError(name)
            now = self._clock.now_ms()
            ns = MemoryNamespace(name, policy, now)
            ns.shards = [MemoryShard(ns, i, now, self._clock) for i in range(shards)]
            self._namespaces[name] = ns
            return ns.info()

    def update_namespace(self, name: str, policy: NamespacePolicy) -> NamespaceInfo:
        check_policy(policy)
        ns = self._namespace(name)
        ns.policy = policy  # appends read the policy once, so a swap is atomic for them
        return ns.info()

    def delete_namespace(self, name: str) -> None:
        self._check_open()
        with self._lock:
            ns = find_namespace(self._namespaces, name)
            del self._namespaces[name]
        for s in ns.shards:
            with s.lock:
                s.deleted = True
        self.lifecycle.read_checks.forget(name)
        self.subscriptions.forget(name)

    def list_namespaces(self) -> list[NamespaceInfo]:
        self._check_open()
        with self._lock:
            namespaces = sorted(self._namespaces.values(), key=attrgetter("name"))
        return [ns.info() for ns in namespaces]

    def get_namespace(self, name: str) -> NamespaceInfo:
        return self._namespace(name).info()

    # -- data ---------------------------------------------------------------------
    def append(self, namespace: str, shard: int, records: Sequence[NewRecord]) -> AppendResult:
        with self.foreground.running():  # the TTL scan gives way while an append runs (pacing.Foreground)
            return self._append(namespace, shard, records)

    def _append(self, namespace: str, shard: int, records: Sequence[NewRecord]) -> AppendResult:
        s = self._shard(namespace, shard)
        policy = s.namespace.policy
        sizes = validate_records(records, policy)  # before the lock: the batch is all-or-nothing
        batch_bytes = sum(sizes)
        if records:
            self.lifecycle.runtime.disk.guard(batch_bytes)
            if policy.backlog_quota_bytes is not None or policy.backlog_quota_seconds is not None:
                with self.foreground.idle():  # a producer held by the quota waits: no scan waits on it
                    self.backlog_quota.check_quota(namespace, policy)
        expiring: list[tuple[int, int, int]] = []
        with s.lock:
            self._check_live(s)
            base = s.end_offset
            if not records:
                return AppendResult(base, 0)
            now = self._clock.now_ms()
            segment = s.segments[-1]
            stamps = [now if r.timestamp is None else r.timestamp for r in records]
            first_ts = segment.timestamps[0] if segment.timestamps else None
            if should_roll(policy, len(segment.records), segment.size_bytes, first_ts, batch_bytes, max(stamps)):
                segment = s.roll(now)
            segment.extend(records, stamps, sizes)
            for offset, r in enumerate(records, base):
                if r.key is not None:
                    s.keys[r.key] = offset
                if r.tags:
                    for tag in dict.fromkeys(r.tags):  # a tag repeated on one record is indexed once
                        s.tags.setdefault(tag, []).append(offset)
                if r.expire_at is not None:
                    s.ttl[offset] = r.expire_at
                    expiring.append((r.expire_at, shard, offset))
            segment.modified_at = now
            s.end_offset = base + len(records)
        if expiring:
            ns = s.namespace
            with ns.ttl_lock:
                for item in expiring:
                    heapq.heappush(ns.ttl_heap, item)
        self.counters.add_many(
            {"append_batches_total": 1, "appended_records_total": len(records), "appended_bytes_total": batch_bytes}
        )
        return AppendResult(base, len(records))

    # -- metadata -----------------------------------------------------------------
    def list_segments(self, namespace: str, shard: int) -> list[SegmentInfo]:
        s = self._shard(namespace, shard)
        with s.lock:
            self._check_live(s)
            return s.infos()

    def shard_stats(self, namespace: str, shard: int) -> ShardStats:
        s = self._shard(namespace, shard)
        with s.lock:
            self._check_live(s)
            return s.stats()

    def stats(self) -> EngineStats:
        self._check_open()
        with self._lock:
            namespaces = sorted(self._namespaces.values(), key=attrgetter("name"))
        counters = self.counters.snapshot()
        counters.update(self.lifecycle.counters())
        shards = []
        for ns in namespaces:
            for s in ns.shards:
                with s.lock:
                    shards.append(s.stats())
        return EngineStats(self.name, len(namespaces), tuple(shards), counters)

    # -- lifecycle hooks (ShardSource) -------------------------------------------------------
    def lifecycle_namespace(self, name: str) -> tuple[NamespacePolicy, Sequence[MemoryShard]]:
        ns = self._namespace(name)
        return ns.policy, ns.shards

    def compaction_namespace(self, name: str) -> tuple[NamespacePolicy, Sequence[CompactableShard]]:
        return self.lifecycle_namespace(name)

    def lifecycle_namespaces(self) -> list[tuple[NamespacePolicy, Sequence[LifecycleShard]]]:
        self._check_open()
        with self._lock:
            namespaces = sorted(self._namespaces.values(), key=attrgetter("name"))
        return [(ns.policy, ns.shards) for ns in namespaces]

    def ttl_candidates(
        self, namespace: str | None, shard: int | None, now: int, scanned: list[int]
    ) -> Iterator[TTLEntry]:
        """Due entries in deadline order (each namespace keeps its own heap; a node-wide
        scan merges them by deadline)."""
        if namespace is not None:
            yield from self._ns_ttl_candidates(self._namespace(namespace), shard, now, scanned)
            return
        with self._lock:
            everything = sorted(self._namespaces.values(), key=attrgetter("name"))
        yield from heapq.merge(
            *(self._ns_ttl_candidates(ns, None, now, scanned) for ns in everything), key=attrgetter("expire_at")
        )

    def ttl_first(self) -> int | None:
        """The smallest live heap top over the namespaces (stale tops dropped on the way)."""
        with self._lock:
            everything = list(self._namespaces.values())
        first: int | None = None
        for ns in everything:
            with ns.ttl_lock:
                heap = ns.ttl_heap
                while heap and ns.shards[heap[0][1]].ttl.get(heap[0][2]) != heap[0][0]:
                    heapq.heappop(heap)
                if heap and (first is None or heap[0][0] < first):
                    first = heap[0][0]
        return first

    def _ns_ttl_candidates(
        self, ns: MemoryNamespace, shard: int | None, now: int, scanned: list[int]
    ) -> Iterator[TTLEntry]:
        """Due entries of one namespace in deadline order, taken off its heap a few at a time.

        Each hold of the heap's lock pops at most ``TTL_POP_CHUNK`` entries (processed ones
        left at the top by earlier scans are dropped on the way: the lazy part of their
        deletion), so no step holds the lock or the GIL for long, and the walk goes only as
        far as the scan does. (Walking every due entry and sorting them held the GIL for about
        a second per million.) Entries the scan has not processed when the walk ends (those
        of its last batch, past its cap, of other shards) go back on the heap.
        """
        heap = ns.ttl_heap
        shards = ns.shards
        pending: deque[tuple[int, int, int]] = deque()  # yielded, maybe not processed yet
        others: list[tuple[int, int, int]] = []  # due entries of shards this walk leaves

        def live(item: tuple[int, int, int]) -> bool:
            return shards[item[1]].ttl.get(item[2]) == item[0]

        try:
            while True:
                chunk: list[tuple[int, int, int]] = []
                popped = 0
                with ns.ttl_lock:
                    while heap and heap[0][0] <= now and popped < TTL_POP_CHUNK:
                        item = heapq.heappop(heap)
                        popped += 1
                        if live(item):
                            chunk.append(item)
                if not popped:
                    return
                while pending and not live(pending[0]):
                    pending.popleft()  # processed by the scan: nothing to put back
                for item in chunk:  # all of the chunk, before any is yielded: the walk may end at any yield
                    (others if shard is not None and item[1] != shard else pending).append(item)
                for item in chunk:
                    scanned[0] += 1
                    if shard is None or item[1] == shard:
                        yield TTLEntry(item[1], item[2], item[0], 0, 0, ns.name)
        finally:
            back = [item for item in (*pending, *others) if live(item)]
            if back:
                with ns.ttl_lock:
                    for item in back:
                        heapq.heappush(heap, item)

    # -- bulk TTL index load (StorageAdapter.ingest_ttl_index) -----------------------------------
    def ttl_index_info(self, namespace: str) -> dict[str, object]:
        ns = self._namespace(namespace)
        return {
            "namespace": namespace,
            "ns_id": MEMORY_NS_ID,
            "shards": len(ns.shards),
            "end_offsets": [s.end_offset for s in ns.shards],
        }

    def ttl_import_dir(self) -> Path:
        return import_dir(self.config.data_dir)

    def ingest_ttl_index(self, namespace: str, file: str) -> dict[str, object]:
        """Insert the SST file's entries into the shards' TTL dicts and the namespace heap (no
        namespace ids here: keys carry ``MEMORY_NS_ID``). An offset that already has an entry, a
        record that is gone or dead keeps what it has (counted as skipped)."""
        import tempfile
        import time

        from storage_engine.segment.ttl_ingest import open_sst, validated_ttl_entries

        t0 = time.perf_counter()
        ns = self._namespace(namespace)
        path = import_file(self.ttl_import_dir(), file)
        with self.lifecycle.runtime.ops, open_sst(path, Path(tempfile.gettempdir())) as db:
            ends = [s.end_offset for s in ns.shards]
            entries = list(validated_ttl_entries(db, path, MEMORY_NS_ID, ends))  # all checked before any goes in
            added: list[tuple[int, int, int]] = []
            for e in entries:
                s = ns.shards[e.shard]
                with s.lock:
                    segment = s.segment_at(e.offset)
                    r = None if segment is None else segment.record(e.offset - segment.base_offset)
                    if r is None or segment is None or e.offset in segment.dead or e.offset in s.ttl:
                        continue
                    s.ttl[e.offset] = e.expire_at
                added.append((e.expire_at, e.shard, e.offset))
            with ns.ttl_lock:
                for item in added:
                    heapq.heappush(ns.ttl_heap, item)
        return {
            "namespace": namespace,
            "file": path.name,
            "entries": len(entries),
            "ingested": len(added),
            "skipped": len(entries) - len(added),
            "min_expire_at": min((a[0] for a in added), default=None),
            "max_expire_at": max((a[0] for a in added), default=None),
            "duration_ms": round((time.perf_counter() - t0) * 1000, 3),
        }

    def measure_disk(self) -> tuple[int, int, str]:
        with self._lock:
            namespaces = list(self._namespaces.values())
        used = sum(seg.size_bytes for ns in namespaces for s in ns.shards for seg in s.segments)
        return used, self._config.disk_capacity_bytes or 0, "memory"

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop_parts()
        with self._lock:
            self._namespaces.clear()  # release the memory; nothing outlives close
