"""The engine: the :class:`~storage_engine.api.StorageAdapter` contract over a store, composed of
named parts.

A store (segment files + RocksDB, pure RocksDB, memory) says how namespaces and records
are kept; :class:`Engine` wires the parts that decide what happens to them and
answers the contract's lifecycle, compaction and subscription calls through them:

- :class:`~storage_engine.lifecycle.parts.LifecycleParts` — TTL scanner, read-check
  queue, retention, file cleaner, reclaimer, node-wide and deadline-driven sweeps, disk
  guard, over one :class:`~storage_engine.lifecycle.runtime.LifecycleRuntime`;
- :class:`~storage_engine.compaction.cleaner.LogCleaner` — key compaction;
- :class:`~storage_engine.subscriptions.registry.Subscriptions` — cursors, with
  :class:`~storage_engine.subscriptions.expiry.MessageExpiry` (message TTL) and
  :class:`~storage_engine.subscriptions.quota.BacklogQuota`.

A store subclass implements the data half of the contract and the
:class:`~storage_engine.lifecycle.shards.ShardSource` hooks, and calls :meth:`_compose`
once from its constructor. It reaches the parts only through the attributes set there.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from storage_engine.api import (
    BacklogInfo,
    CompactionEstimate,
    DiskStatus,
    LifecycleResult,
    NextDue,
    ReadResult,
    Record,
    StorageAdapter,
    SubscriptionInfo,
    VerifyReport,
)
from storage_engine.clock import Clock
from storage_engine.compaction.cleaner import LogCleaner
from storage_engine.compaction.store_io import CompactableShard
from storage_engine.config import EngineConfig
from storage_engine.lifecycle.counters import Counters
from storage_engine.lifecycle.parts import LifecycleParts
from storage_engine.lifecycle.runtime import LifecycleRuntime
from storage_engine.lifecycle.shards import LifecycleShard, TTLEntry
from storage_engine.lifecycle.verify import verify_shards
from storage_engine.policies.policy import NamespacePolicy, NodePolicy
from storage_engine.rules import reads
from storage_engine.rules.figures import NEVER
from storage_engine.rules.pacing import Foreground
from storage_engine.rules.reads import ReadableShard
from storage_engine.rules.validation import check_key, check_tag, check_timestamp, validate_read_args
from storage_engine.subscriptions.cursors import Subscription
from storage_engine.subscriptions.expiry import MessageExpiry
from storage_engine.subscriptions.quota import BacklogQuota
from storage_engine.subscriptions.registry import CursorWriter, Subscriptions, keep_in_memory


class Engine(StorageAdapter):
    """The contract's lifecycle, compaction and subscription calls, once for every store."""

    clock: Clock
    counters: Counters
    lifecycle: LifecycleParts
    log_cleaner: LogCleaner
    subscriptions: Subscriptions
    message_expiry: MessageExpiry
    backlog_quota: BacklogQuota

    def _compose(
        self,
        config: EngineConfig,
        clock: Clock,
        *,
        stored_policy: tuple[NodePolicy, int] | None = None,
        persist_policy: Callable[[NodePolicy, int], None] | None = None,
        persist_cursors: CursorWriter = keep_in_memory,
        restore_cursors: Callable[[], Sequence[tuple[str, Subscription]]] = tuple,
    ) -> None:
        """Build the parts (the store's namespaces must be open: cursors are restored here)."""
        self.lifecycle = LifecycleParts(self, config, clock, stored_policy, persist_policy)
        rt = self.lifecycle.runtime
        self.log_cleaner = LogCleaner(rt, self)
        self.subscriptions = Subscriptions(rt, self, persist_cursors, restore_cursors())
        self.message_expiry = MessageExpiry(rt, self.lifecycle.sweep, self.subscriptions, self)
        self.backlog_quota = BacklogQuota(rt, self.subscriptions, self)
        rt.retention_plan = self.subscriptions.retention_plan

    @property
    def runtime(self) -> LifecycleRuntime:
        return self.lifecycle.runtime

    # Pacing hooks tests and the node server reach: appends in flight, and the sleep the
    # cleaner and a held producer use (a test advances a clock instead).
    @property
    def foreground(self) -> Foreground:
        return self.lifecycle.runtime.foreground

    @property
    def sleep(self) -> Callable[[float], None]:
        return self.lifecycle.runtime.sleep

    @sleep.setter
    def sleep(self, value: Callable[[float], None]) -> None:
        self.lifecycle.runtime.sleep = value

    # -- what a store provides (ShardSource and CompactableSource) ---------------------------------
    @abc.abstractmethod
    def lifecycle_namespace(self, name: str) -> tuple[NamespacePolicy, Sequence[LifecycleShard]]: ...

    @abc.abstractmethod
    def compaction_namespace(self, name: str) -> tuple[NamespacePolicy, Sequence[CompactableShard]]: ...

    @abc.abstractmethod
    def lifecycle_namespaces(self) -> list[tuple[NamespacePolicy, Sequence[LifecycleShard]]]: ...

    @abc.abstractmethod
    def ttl_candidates(
        self, namespace: str | None, shard: int | None, now: int, scanned: list[int]
    ) -> Iterator[TTLEntry]: ...

    @abc.abstractmethod
    def measure_disk(self) -> tuple[int, int, str]: ...

    def namespace_names(self) -> list[str]:
        return [info.name for info in self.list_namespaces()]

    def ttl_first(self) -> int | None:
        """The first entry of one ordered walk of the TTL index; stores with a faster answer override it."""
        entry = next(self.ttl_candidates(None, None, NEVER, [0]), None)
        return None if entry is None else entry.expire_at

    def ttl_scan_begin(self, namespaces: Sequence[str]) -> object | None:
        return None

    def ttl_scan_end(self, token: object | None, stop: TTLEntry | None, now: int, ok: bool) -> None:
        return None

    def pending_delete_bytes(self) -> int:
        return 0

    def _check_open(self) -> None:
        """Raise for a closed engine (stores override)."""

    @abc.abstractmethod
    def _readable_shard(self, namespace: str, shard: int) -> ReadableShard:
        """The shard as the reads see it (raises for an unknown namespace or shard)."""

    # -- reads (storage_engine.rules.reads: the semantics, once) ----------------------------------------
    def read(
        self, namespace: str, shard: int, offset: int, max_records: int = 500, max_bytes: int = 1 << 20
    ) -> ReadResult:
        validate_read_args(shard, offset, max_records, max_bytes)
        s = self._readable_shard(namespace, shard)
        self.counters.add("read_requests_total")
        hide = self._hider(namespace, shard, s.policy)
        return reads.read_records(s, namespace, shard, offset, max_records, max_bytes, self.clock.now_ms(), hide)

    def offset_for_timestamp(self, namespace: str, shard: int, timestamp: int) -> int | None:
        s = self._readable_shard(namespace, shard)
        check_timestamp(timestamp)
        return reads.offset_for_timestamp(s, timestamp)

    def read_key(self, namespace: str, shard: int, key: bytes) -> Record | None:
        s = self._readable_shard(namespace, shard)
        check_key(key)
        return reads.read_key(s, key, self.clock.now_ms(), self._hider(namespace, shard, s.policy))

    def read_tag(self, namespace: str, shard: int, tag: str, offset: int = 0, max_records: int = 500) -> ReadResult:
        validate_read_args(shard, offset, max_records)
        check_tag(tag)
        s = self._readable_shard(namespace, shard)
        hide = self._hider(namespace, shard, s.policy)
        return reads.read_tag(s, namespace, shard, tag, offset, max_records, self.clock.now_ms(), hide)

    def _hider(self, namespace: str, shard: int, policy: NamespacePolicy) -> reads.Hide:
        """What a read does with an expired record it hid: queue the clean-up of its index entries, if any."""
        queue = self.lifecycle.read_checks

        def hide(r: Record) -> None:
            if r.key is not None or r.tags or r.expire_at is not None:
                queue.enqueue(namespace, shard, r.offset, policy.read_check_queue_size)

        return hide

    # -- node policy and disk ----------------------------------------------------------------------------
    def set_node_policy(self, policy: NodePolicy) -> NodePolicy:
        return self.lifecycle.runtime.set_node_policy(policy)

    def node_policy(self) -> NodePolicy:
        return self.lifecycle.runtime.node_policy

    def node_policy_version(self) -> int:
        return self.lifecycle.runtime.node_policy_version

    def check_disk(self) -> DiskStatus:
        self._check_open()
        return self.lifecycle.runtime.disk.check()

    # -- lifecycle ----------------------------------------------------------------------------------------
    def next_due(self) -> NextDue:
        return self.lifecycle.due.next_due()

    def sweep_due(self, operation: str, limit: int | None = None) -> LifecycleResult:
        return self.lifecycle.due.sweep_due(operation, limit)

    def expire_scan(
        self,
        namespace: str | None,
        shard: int | None = None,
        limit: int | None = None,
        *,
        manual: bool = False,
        dry_run: bool = False,
    ) -> LifecycleResult:
        return self.lifecycle.scanner.expire_scan(namespace, shard, limit, manual=manual, dry_run=dry_run)

    def drain_read_checks(self, limit: int | None = None) -> LifecycleResult:
        return self.lifecycle.read_checks.drain(limit)

    def apply_retention(
        self, namespace: str | None, shard: int | None = None, *, dry_run: bool = False
    ) -> LifecycleResult:
        return self.lifecycle.retention.apply_retention(namespace, shard, dry_run=dry_run)

    def clean_files(self, manual: bool = False, *, dry_run: bool = False) -> LifecycleResult:
        return self.lifecycle.cleaner.clean_files(manual, dry_run=dry_run)

    def reclaim(
        self,
        namespace: str | None,
        shard: int | None = None,
        limit: int | None = None,
        *,
        manual: bool = False,
        dry_run: bool = False,
    ) -> LifecycleResult:
        return self.lifecycle.reclaimer.reclaim(namespace, shard, limit, manual=manual, dry_run=dry_run)

    def verify(self, namespace: str) -> VerifyReport:
        _, shards = self.lifecycle_namespace(namespace)
        return verify_shards(namespace, shards, self.lifecycle.runtime.clock.now_ms())

    # -- compaction ---------------------------------------------------------------------------------------
    def compact(
        self,
        namespace: str,
        shard: int | None = None,
        *,
        map_budget_bytes: int | None = None,
        dry_run: bool = False,
        manual: bool = False,
        max_rounds: int | None = None,
    ) -> LifecycleResult:
        return self.log_cleaner.compact(
            namespace, shard, map_budget_bytes=map_budget_bytes, dry_run=dry_run, manual=manual, max_rounds=max_rounds
        )

    def compaction_estimate(self, namespace: str, shard: int | None = None) -> CompactionEstimate:
        return self.log_cleaner.compaction_estimate(namespace, shard)

    def compact_with_plan(self, namespace: str, shard: int, keep: dict[int, list[int]]) -> LifecycleResult:
        return self.log_cleaner.compact_with_plan(namespace, shard, keep)

    def compaction_ranges(self, namespace: str) -> list[dict[str, Any]]:
        return self.log_cleaner.compaction_ranges(namespace)

    def compact_dirtiest(
        self, limit_shards: int = 1, *, map_budget_bytes: int | None = None, dry_run: bool = False
    ) -> LifecycleResult:
        return self.log_cleaner.compact_dirtiest(limit_shards, map_budget_bytes=map_budget_bytes, dry_run=dry_run)

    # -- subscriptions ------------------------------------------------------------------------------------
    def create_subscription(self, namespace: str, name: str, *, initial: str = "earliest") -> SubscriptionInfo:
        return self.subscriptions.create_subscription(namespace, name, initial=initial)

    def delete_subscription(self, namespace: str, name: str) -> None:
        self.subscriptions.delete_subscription(namespace, name)

    def list_subscriptions(self, namespace: str) -> list[SubscriptionInfo]:
        return self.subscriptions.list_subscriptions(namespace)

    def read_subscription(
        self, namespace: str, name: str, shard: int, max_records: int = 500, max_bytes: int = 1 << 20
    ) -> ReadResult:
        return self.subscriptions.read_subscription(namespace, name, shard, max_records, max_bytes)

    def acknowledge(self, namespace: str, name: str, shard: int, offset: int) -> int:
        return self.subscriptions.acknowledge(namespace, name, shard, offset)

    def seek_subscription(
        self, namespace: str, name: str, shard: int, position: int | None = None, *, timestamp: int | None = None
    ) -> int:
        return self.subscriptions.seek_subscription(namespace, name, shard, position, timestamp=timestamp)

    def backlog(self, namespace: str, name: str | None = None) -> list[BacklogInfo]:
        return self.subscriptions.backlog(namespace, name)

    def expire_subscriptions(
        self,
        namespace: str | None,
        shard: int | None = None,
        *,
        name: str | None = None,
        position: int | None = None,
        dry_run: bool = False,
    ) -> LifecycleResult:
        return self.message_expiry.expire_subscriptions(namespace, shard, name=name, position=position, dry_run=dry_run)

    def enforce_backlog_quota(self, namespace: str, *, dry_run: bool = False) -> LifecycleResult:
        return self.backlog_quota.enforce_backlog_quota(namespace, dry_run=dry_run)

    # -- what the stores share ----------------------------------------------------------------------------
    def _stop_parts(self) -> None:
        self.lifecycle.stop()
