"""What the lifecycle parts share: the node policy, pacing, counters, one lock, and the steps
every part takes the same way.

One :class:`LifecycleRuntime` per engine. The parts (scanner, retention, file cleaner,
reclaimer, log cleaner, subscriptions, sweeps) hold it instead of reaching into each
other: a rule that every step applies (seal an idle active segment first, remove due
``.deleted`` files, skip outside off-peak hours unless urgent, the shape of a result)
is written here once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from storage_engine.api import LifecycleResult, SegmentInfo, SegmentState, SegmentTier
from storage_engine.clock import Clock
from storage_engine.config import EngineConfig
from storage_engine.errors import InvalidArgumentError, StorageError
from storage_engine.lifecycle.counters import Counters
from storage_engine.lifecycle.disk_guard import DiskGuard
from storage_engine.lifecycle.shards import LifecycleShard, ShardSource
from storage_engine.policies.policy import NamespacePolicy, NodePolicy, validate_node_policy
from storage_engine.rules.pacing import Foreground, TokenBucket
from storage_engine.rules.retention import RetentionPlan
from storage_engine.rules.rolling import idle_segment_due, sealed_view
from storage_engine.rules.validation import check_int, select_shards
from storage_engine.rules.work import sum_work

SWEEP_COMPACT_INTERVAL_MS = 60_000  # a sweep asks RocksDB to compact a shard's dropped ranges at most this often
# Counters present from the start, so a console shows 0 rather than nothing.
ZEROED_COUNTERS = (
    "read_checks_enqueued_total",
    "read_check_drops_total",
    "read_check_expired_records_total",
    "ttl_scan_runs_total",
    "ttl_scan_entries_scanned_total",
    "ttl_scan_expired_records_total",
    "index_entries_deleted_total",
    "retention_segments_deleted_total",
    "retention_bytes_deleted_total",
    "cleaner_runs_total",
    "cleaner_segments_deleted_total",
    "cleaner_bytes_deleted_total",
    "cleaner_forced_deletes_total",
    "files_removed_total",
    "files_removed_bytes_total",
    "reclaim_segments_deleted_total",
    "reclaim_segments_rewritten_total",
    "reclaim_bytes_total",
    "appends_rejected_disk_full_total",
    "compaction_runs_total",
    "compaction_bytes_reclaimed_total",
    "compaction_records_removed_total",
)

RetentionHook = Callable[[str, int, NamespacePolicy, Sequence[SegmentInfo], RetentionPlan], RetentionPlan]


def keep_plan(
    namespace: str, shard: int, policy: NamespacePolicy, segments: Sequence[SegmentInfo], plan: RetentionPlan
) -> RetentionPlan:
    """The retention hook of an engine without subscriptions: the plan as it is."""
    return plan


class RangeCompactions:
    """After dropping or rewriting segments, RocksDB is asked to compact the shard's deleted ranges.

    A sweep touches hundreds of shards a step and compacting each costs milliseconds
    (one ``compact_range`` per column family): while ``sweeping`` it defers them, and
    :meth:`run_due` compacts a shard at most every ``SWEEP_COMPACT_INTERVAL_MS`` (RocksDB
    skips range tombstones meanwhile, and its background compaction drops them anyway).
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.sweeping = False
        self._compacted_at: dict[int, int] = {}
        self._due: dict[int, LifecycleShard] = {}

    def after_delete(self, shard: LifecycleShard) -> None:
        if self.sweeping:
            self._due[id(shard)] = shard
            self._compacted_at.setdefault(id(shard), self.clock.now_ms())  # the interval starts at the first drop
        else:
            shard.compact_deleted()
            self._compacted_at[id(shard)] = self.clock.now_ms()

    def waiting(self) -> int:
        """Shards whose compaction is deferred."""
        return len(self._due)

    def run_due(self) -> None:
        """Compact the deferred shards whose interval has passed (the caller holds the ops lock)."""
        now = self.clock.now_ms()
        for key, shard in list(self._due.items()):
            if now - self._compacted_at.get(key, now) >= SWEEP_COMPACT_INTERVAL_MS:
                del self._due[key]
                try:
                    shard.compact_deleted()
                except StorageError:
                    self._compacted_at.pop(key, None)  # its namespace was deleted or closed meanwhile
                    continue
                self._compacted_at[key] = now


class LifecycleRuntime:
    """The shared state and common steps of the lifecycle parts of one engine.

    ``stored_policy``: the node policy and version persisted by an earlier
    ``set_node_policy`` (it wins over ``config.node_policy``, which only says what a
    node that was never told anything enforces); ``persist_policy`` makes a new one
    durable. Stores without a data directory pass neither: the policy lives in memory.
    """

    def __init__(
        self,
        source: ShardSource,
        config: EngineConfig,
        clock: Clock,
        stored_policy: tuple[NodePolicy, int] | None = None,
        persist_policy: Callable[[NodePolicy, int], None] | None = None,
    ) -> None:
        validate_node_policy(config.node_policy)
        self.source = source
        self.config = config
        self.clock = clock
        self._node_policy, self._node_policy_version = stored_policy or (config.node_policy, 0)
        self._persist_node_policy = persist_policy
        self._node_policy_lock = threading.Lock()  # one change at a time: versions never repeat
        self.counters = Counters()
        self.counters.set_many(dict.fromkeys(ZEROED_COUNTERS, 0))
        self.delete_bucket = TokenBucket(clock, self._node_policy.delete_rate_per_s)
        self.reclaim_bucket = TokenBucket(clock, self._node_policy.reclaim_bytes_per_s)
        # Appends in flight: the TTL scan and read-check clean-up give way to them (pacing.Slices).
        self.foreground = Foreground()
        self.sleep: Callable[[float], None] = time.sleep  # injectable: tests advance a clock instead
        self.ops = threading.Lock()  # one lifecycle call mutates shards at a time
        self.disk = DiskGuard(source, clock, lambda: self._node_policy, self.counters)
        self.range_compactions = RangeCompactions(clock)
        self.retention_plan: RetentionHook = keep_plan  # subscriptions hold retention back (Subscriptions)

    # -- node policy -----------------------------------------------------------------------------
    @property
    def node_policy(self) -> NodePolicy:
        return self._node_policy

    @property
    def node_policy_version(self) -> int:
        """How many times the node policy was changed (persisted with it); 0: never set."""
        return self._node_policy_version

    def set_node_policy(self, policy: NodePolicy) -> NodePolicy:
        if not isinstance(policy, NodePolicy):
            raise InvalidArgumentError("policy", "must be a NodePolicy")
        validate_node_policy(policy)
        with self._node_policy_lock:
            if policy == self._node_policy and self._node_policy_version > 0:
                return policy  # the same values again (a retried PUT): same version, nothing written
            version = self._node_policy_version + 1
            if self._persist_node_policy is not None:
                # Durable before it takes effect: a crash after this enforces it, before it the old one.
                self._persist_node_policy(policy, version)
            self._node_policy, self._node_policy_version = policy, version
        self.delete_bucket.set_rate(policy.delete_rate_per_s)
        self.reclaim_bucket.set_rate(policy.reclaim_bytes_per_s)
        return policy

    # -- what every step does the same way ------------------------------------------------------------
    def select(self, namespace: str, shard: int | None) -> tuple[NamespacePolicy, list[LifecycleShard]]:
        """The policy and the shards a call names (every one for ``None``)."""
        policy, shards = self.source.lifecycle_namespace(namespace)
        return policy, select_shards(namespace, shards, shard)

    @staticmethod
    def check_limit(limit: int | None, field: str = "limit") -> None:
        if limit is not None:
            check_int(limit, field, 1)  # the rule in storage_engine.policies.bounds' words: its numbers, no "≥ 1"

    @staticmethod
    def result(operation: str, namespace: str | None, shard: int | None, t0: float, **values: Any) -> LifecycleResult:
        values.pop("files_removed_bytes", None)
        return LifecycleResult(
            operation=operation,
            namespace=namespace,
            shard=shard,
            duration_ms=round((time.perf_counter() - t0) * 1000, 3),
            **values,
        )

    def urgent(self, policy: NamespacePolicy, shards: Sequence[LifecycleShard]) -> bool:
        """Work that may run outside off-peak hours: disk pressure or too much expired data."""
        if self.disk.pressure():
            return True
        stats = [s.stats() for s in shards]
        stored = sum(s.record_count for s in stats)
        expired = sum(s.expired_records for s in stats)
        return stored > 0 and expired / stored > self._node_policy.urgent_expired_ratio

    def step_segments(
        self, s: LifecycleShard, policy: NamespacePolicy, now: int, totals: dict[str, Any], dry_run: bool = False
    ) -> list[SegmentInfo]:
        """The shard's segments as a lifecycle step works on them: an idle active segment
        (:func:`~storage_engine.rules.rolling.idle_segment_due`) sealed first, counted in ``rolled``.

        Appends are what roll segments, so without this a shard nobody writes to would keep
        expired, old or dirty data in its active segment forever (DESIGN §3 "Idle shards").
        ``roll_empty`` keeps the end offset and never seals an empty segment. The check reads
        metadata the step lists anyway; only a seal lists again. A dry run sees the segment
        sealed without sealing it (:func:`~storage_engine.rules.rolling.sealed_view`), followed by the
        empty active segment the seal would open (:func:`with_empty_active`), so every rule that
        looks at the active segment (retention's roll, the rules passing over the last segment)
        decides as it will on the real step's listing.
        """
        segments = s.lifecycle_segments()
        if dry_run:
            seen = sealed_view(segments, policy, now)
            if seen and seen[-1] is not segments[-1]:
                totals["rolled"] = totals.get("rolled", 0) + 1
                return with_empty_active(seen, now)
            return seen
        if segments and idle_segment_due(segments[-1], policy, now) and s.roll_empty(now):
            totals["rolled"] = totals.get("rolled", 0) + 1
            segments = s.lifecycle_segments()
        return segments

    def seal_idle(
        self,
        namespaces: Iterable[tuple[NamespacePolicy, Iterable[LifecycleShard]]],
        now: int,
        totals: dict[str, Any],
        dry_run: bool = False,
    ) -> None:
        """Seal the idle active segments of these shards (for steps that list no segments)."""
        for policy, shards in namespaces:
            for s in shards:
                self.step_segments(s, policy, now, totals, dry_run)

    def remove_files(
        self, shards: Iterable[LifecycleShard], now: int, totals: dict[str, Any], *, purge: bool = False
    ) -> None:
        """Remove the shards' due ``.deleted`` files (with ``purge``, all that no reader holds)."""
        for s in shards:
            work = s.remove_due_files(now, self._node_policy, purge=purge)
            if work.files_removed:
                self.counters.add_many(
                    {"files_removed_total": work.files_removed, "files_removed_bytes_total": work.files_removed_bytes}
                )
            sum_work(totals, work)

    def compact_deferred(self) -> None:
        """Compact the shards a sweep deferred whose interval has passed (:class:`RangeCompactions`)."""
        with self.ops:
            self.range_compactions.run_due()


def with_empty_active(segments: list[SegmentInfo], now: int) -> list[SegmentInfo]:
    """``segments`` (the last one just seen sealed) followed by the empty active segment a roll at
    ``now`` opens after it, as the stores list one: no records or bytes, ``last_offset`` -1
    (:class:`SegmentInfo`), deadline 0 (nothing in it outlives anything)."""
    last = segments[-1]
    empty = replace(
        last,
        base_offset=last.last_offset + 1,
        last_offset=-1,
        record_count=0,
        live_count=0,
        size_bytes=0,
        min_timestamp=None,
        max_timestamp=None,
        max_expire_at=None,
        has_unbounded=False,
        state=SegmentState.ACTIVE,
        expired_records=0,
        expired_bytes=0,
        deadline=0,
        min_expire_at=None,
        first_timestamp=None,
        tier=SegmentTier.LOCAL,
        created_at=now,
        modified_at=now,
    )
    return [*segments, empty]
