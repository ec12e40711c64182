"""The lifecycle driver shared by every adapter (DESIGN §3).

:class:`LifecycleMixin` implements the lifecycle half of the
:class:`~storage_engine.api.StorageAdapter` contract once: it decides *what*
to do (retention plans, file-cleaning candidates, reclamation candidates,
pacing, off-peak rules, the disk-full flag, the read-check queue and its
worker) from the shared rule modules (:mod:`storage_engine.expiry`,
:mod:`storage_engine.retention`, :mod:`storage_engine.cleaning`,
:mod:`storage_engine.pacing`). Each adapter's shards say *how* it is done on
their storage by implementing :class:`LifecycleShard`.
"""

from __future__ import annotations

import abc
import heapq
import logging
import threading
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, Protocol

from storage_engine.api import (
    LIFECYCLE_COUNTS,
    DiskStatus,
    LifecycleResult,
    NextDue,
    Record,
    SegmentInfo,
    SegmentState,
    ShardStats,
    VerifyReport,
)
from storage_engine.cleaning import (
    clean_trigger,
    cleanable_prefix,
    disk_status,
    file_expired,
    forced_cleaning,
    in_off_peak,
    purge_pending_first,
)
from storage_engine.clock import Clock
from storage_engine.codec import RecordColumns
from storage_engine.config import EngineConfig
from storage_engine.due import DueCache, DueShard, next_due, shard_due
from storage_engine.errors import (
    DiskFullError,
    InvalidArgumentError,
    StorageError,
    UnknownNamespaceError,
)
from storage_engine.expiry import is_expired, segment_expired
from storage_engine.figures import NEVER, SegmentFacts
from storage_engine.pacing import Foreground, Slices, TokenBucket
from storage_engine.policy import NamespacePolicy, NodePolicy, validate_node_policy
from storage_engine.retention import RetentionPlan, deletable_segments
from storage_engine.rolling import idle_segment_due, sealed_view
from storage_engine.segment.counters import Counters
from storage_engine.validation import select_shards
from storage_engine.work import ShardWork, after_freeing, sum_work, would_drop, would_expire, would_rewrite

log = logging.getLogger(__name__)

DEFAULT_RECLAIM_SEGMENTS = 16  # segments one reclaim call drops or rewrites at most
SWEEP_COMPACT_INTERVAL_MS = 60_000  # a sweep asks RocksDB to compact a shard's dropped ranges at most this often
SWEEP_RECLAIM_SEGMENTS = 256  # the same for a node-wide step (whole-segment drops are cheap; rewrites are paced)
DUE_DROP_THREADS = 8  # shards whose due segments a deadline-driven reclaim drops at once (sweep_due)
MAX_PROBLEMS = 100
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


# What a removal rule (key compaction's ``rewrite_segment(..., remove=rule)``) says per record.
KEEP = 0
REMOVE = 1  # leave it out; it may be its key's latest record (its key entry is checked)
SUPERSEDED = 2  # leave it out; a later record of its key exists, so its key entry points elsewhere

RemovalRule = Callable[[RecordColumns], Sequence[int]]
"""Called with the columns of a run of stored live records (one batch, or a chunk), in
offset order; returns ``KEEP``/``REMOVE``/``SUPERSEDED`` for each. Deciding while the
rewrite streams keeps the caller's memory independent of the segment's size.

A rule may also have a ``by_offset(first, count)`` attribute: the decisions for the
dense offsets ``first .. first+count-1`` from the offsets alone (``None`` when it needs
the columns); a store may ask it first for a batch without tags or deadlines, and skip
decoding the batch when it answers."""

Removal = Collection[int] | RemovalRule
"""What ``rewrite_segment`` removes besides dead and expired records: offsets, or a rule."""


def removal_rule(remove: Removal) -> RemovalRule | None:
    """``remove`` as a rule (``None`` when it removes nothing)."""
    if callable(remove):
        return remove
    if not remove:
        return None
    wanted = remove if isinstance(remove, (set, frozenset)) else frozenset(remove)
    return lambda cols: [REMOVE if o in wanted else KEEP for o in cols.offsets]


class TTLEntry(NamedTuple):
    """One TTL-index entry: the record at ``offset`` expires at ``expire_at``.

    ``size`` is the record's encoded size and ``flags`` says whether it has a
    key (``EXPIRE_HAS_KEY``) or tags (``EXPIRE_HAS_TAGS``), so that the scan reads only records it must (−1:
    unknown, read it). A tuple rather than a dataclass: the scan makes one per expired
    record, and a tuple is made in a third of the time.
    """

    shard: int
    offset: int
    expire_at: int
    size: int
    flags: int
    namespace: str = ""  # set by the adapter: a node-wide scan sees every namespace's entries
    key: bytes = b""  # the entry's key in the store, when it has one (saves packing it again)


TTL_UNKNOWN = -1  # flags of an entry written before entries carried them: read the record


class LifecycleShard(Protocol):
    """What a shard of any adapter provides to the lifecycle driver."""

    shard: int

    def lifecycle_segments(self) -> list[SegmentInfo]:
        """Live segments in offset order, the active one last."""
        ...

    def roll_empty(self, now: int) -> bool:
        """Seal a non-empty active segment and start an empty one at the end offset."""
        ...

    def drop_segments(self, bases: Sequence[int], now: int, delay_ms: int) -> ShardWork:
        """Delete sealed segments whole (never the active one) with their index entries;
        files are removed once ``delay_ms`` has passed and no reader holds them."""
        ...

    def rewrite_segment(self, base: int, now: int, remove: Removal = ()) -> ShardWork:
        """Rewrite a sealed segment without its expired and dead records (offsets unchanged)."""
        ...

    def expire_entries(self, entries: Sequence[TTLEntry], now: int) -> ShardWork:
        """Apply the per-entry TTL-scan step (DESIGN §3, layer 2) to due TTL-index entries."""
        ...

    def expire_offsets(self, offsets: Sequence[int], now: int) -> ShardWork:
        """Mark expired, not yet dead records at ``offsets`` dead, with their index entries (read checks)."""
        ...

    def remove_due_files(self, now: int, node: NodePolicy, *, purge: bool = False) -> ShardWork:
        """Remove ``.deleted`` files whose delay has passed (every one with ``purge``) and that
        no reader holds (or forcibly, after ``destroy_forcibly_after_ms``)."""
        ...

    def compact_deleted(self) -> None:
        """Ask the store to drop deleted ranges now (RocksDB ``compact_range``)."""
        ...

    def verify(self, now: int) -> tuple[int, int, list[str]]:
        """(records checked, index entries checked, problems) of this shard."""
        ...

    def stats(self) -> ShardStats: ...

    def due_facts(self) -> tuple[object | None, Callable[[], Sequence[SegmentFacts]], SegmentFacts]:
        """Metadata for due times (:class:`storage_engine.due.DueShard`)."""
        ...


def check_indexes(
    route: str,
    records: dict[int, Record],
    segment_of: Callable[[int], int | None],
    segment_counts: dict[int, tuple[int, int]],
    dead: set[int],
    keys: Iterable[tuple[bytes, int]],
    tags: Iterable[tuple[str, int]],
    ttl: Iterable[tuple[int, int]],
    ttl_ms: int | None,
    now: int,
    deadlines: Mapping[int, int] | None = None,
) -> tuple[int, list[str]]:
    """The index/data agreement rules shared by every adapter's :meth:`verify`.

    ``records``: stored records by offset; ``segment_of(offset)``: base of the
    live segment holding an offset; ``segment_counts``: base → (record_count,
    live_count) as the metadata says; ``dead``: offsets marked dead; ``keys``,
    ``tags``, ``ttl``: the index entries ((key, offset), (tag, offset),
    (expire_at, offset)); ``deadlines``: the deadline a dead mark records when a
    bulk-loaded TTL entry (``ingest_ttl_index``) killed a record whose own fields
    carry none. Such an entry, still waiting for its scan, points at a live record
    without an ``expire_at``. Returns (entries checked, problems).
    """
    deadlines = deadlines or {}
    problems: list[str] = []
    checked = 0
    for offset in sorted(dead):
        r = records.get(offset)
        if r is None:
            problems.append(f"{route} dead mark at {offset} for a missing record")
        elif not is_expired(r.timestamp, r.expire_at, ttl_ms, now) and deadlines.get(offset, now + 1) > now:
            problems.append(f"{route} record {offset} is marked dead but not expired")
    latest_live: dict[bytes, int] = {}
    tagged: set[tuple[str, int]] = set()
    expiring: dict[int, int] = {}
    for offset, r in records.items():
        if offset in dead:
            continue
        if r.key is not None and offset > latest_live.get(r.key, -1):
            latest_live[r.key] = offset
        for t in r.tags:
            tagged.add((t, offset))
        if r.expire_at is not None:
            expiring[offset] = r.expire_at
    for key, offset in keys:
        checked += 1
        r = records.get(offset)
        if r is None or offset in dead:
            problems.append(f"{route} key {key!r} -> {offset}: record {'dead' if r else 'missing'}")
        elif r.key != key:
            problems.append(f"{route} key {key!r} -> {offset}: record has key {r.key!r}")
        elif latest_live.get(key, -1) > offset:
            problems.append(f"{route} key {key!r} -> {offset}: a later live record {latest_live[key]} has it")
    seen_tags: set[tuple[str, int]] = set()
    for tag, offset in tags:
        checked += 1
        seen_tags.add((tag, offset))
        if (tag, offset) not in tagged:
            what = "dead" if offset in dead else ("missing" if offset not in records else "without that tag")
            problems.append(f"{route} tag {tag!r} -> {offset}: record {what}")
    for tag, offset in sorted(tagged - seen_tags):
        problems.append(f"{route} live record {offset} missing from the tag index ({tag!r})")
    seen_ttl: set[int] = set()
    for expire_at, offset in ttl:
        checked += 1
        seen_ttl.add(offset)
        bulk = offset in records and offset not in dead and records[offset].expire_at is None
        if expiring.get(offset) != expire_at and not bulk:
            what = "dead" if offset in dead else ("missing" if offset not in records else "with another expire_at")
            problems.append(f"{route} ttl {expire_at} -> {offset}: record {what}")
    for offset in sorted(set(expiring) - seen_ttl):
        problems.append(f"{route} live record {offset} missing from the TTL index")
    actual: dict[int, list[int]] = {}
    for offset in records:
        base = segment_of(offset)
        if base is None:
            problems.append(f"{route} record {offset} lies in no live segment")
            continue
        counts = actual.setdefault(base, [0, 0])
        counts[0] += 1
        counts[1] += offset not in dead
    for base, (count, live) in segment_counts.items():
        found = actual.get(base, [0, 0])
        if (count, live) != tuple(found):
            problems.append(
                f"{route} segment {base}: metadata says {count} records / {live} live, data has {found[0]} / {found[1]}"
            )
    return checked, problems


class LifecycleMixin(abc.ABC):
    """The lifecycle calls of the contract, over :class:`LifecycleShard` shards."""

    clock: Clock
    config: EngineConfig

    # -- what an adapter provides ------------------------------------------------------
    @abc.abstractmethod
    def _lc_namespace(self, name: str) -> tuple[NamespacePolicy, Sequence[LifecycleShard]]:
        """The namespace's policy and shards (raises for an unknown or closed namespace)."""

    @abc.abstractmethod
    def _lc_all(self) -> list[tuple[NamespacePolicy, Sequence[LifecycleShard]]]:
        """Every namespace's policy and shards."""

    @abc.abstractmethod
    def _ttl_candidates(
        self, namespace: str | None, shard: int | None, now: int, scanned: list[int]
    ) -> Iterator[TTLEntry]:
        """TTL-index entries of the namespace (every namespace for ``None``) with ``expire_at ≤
        now``, in index order, from the start, each naming its namespace; ``scanned[0]`` counts
        every entry looked at (other namespaces' too)."""

    @abc.abstractmethod
    def _measure_disk(self) -> tuple[int, int, str]:
        """(used bytes, capacity bytes, source) of the data directory now."""

    def _ttl_scan_begin(self, namespaces: Sequence[str]) -> object | None:
        """A TTL scan of every shard of ``namespaces`` starts (an empty list: of one shard only).
        Adapters whose index keeps what a scan deleted as tombstones for a while (RocksDB) note
        where the scan starts, so that the next one can start where it stopped."""
        return None

    def _ttl_scan_end(self, token: object | None, stop: TTLEntry | None, now: int, ok: bool) -> None:
        """The scan begun with ``token`` ended: every entry of its namespaces before ``stop`` (all
        those due at ``now`` for ``None``) is gone; ``ok`` false: it failed part way."""
        return None

    # -- setup and teardown ------------------------------------------------------------------
    def _init_lifecycle(
        self,
        config: EngineConfig,
        clock: Clock,
        stored_policy: tuple[NodePolicy, int] | None = None,
        persist_policy: Callable[[NodePolicy, int], None] | None = None,
    ) -> None:
        """``stored_policy``: the node policy and version persisted by an earlier
        ``set_node_policy`` (it wins over ``config.node_policy``, which only says what a
        node that was never told anything enforces); ``persist_policy`` makes a new one
        durable. Adapters without a data directory pass neither: the policy lives in memory.
        """
        validate_node_policy(config.node_policy)
        self._node_policy, self._node_policy_version = stored_policy or (config.node_policy, 0)
        self._persist_node_policy = persist_policy
        self._node_policy_lock = threading.Lock()  # one change at a time: versions never repeat
        self.lifecycle_counters = Counters()
        self.lifecycle_counters.set_many(dict.fromkeys(ZEROED_COUNTERS, 0))
        self._delete_bucket = TokenBucket(clock, self._node_policy.delete_rate_per_s)
        self._reclaim_bucket = TokenBucket(clock, self._node_policy.reclaim_bytes_per_s)
        # Appends in flight: the TTL scan and read-check clean-up give way to them (pacing.Slices).
        self.foreground = Foreground()
        self.sleep: Callable[[float], None] = time.sleep  # injectable: tests advance a clock instead
        # Disk-full state: refreshed by check_disk() and, on the append path, when the
        # appended bytes since the last measurement could have crossed the warning ratio.
        self._disk_lock = threading.Lock()
        self._disk: DiskStatus | None = None
        self._disk_measured_at = 0
        self._disk_pending = 0
        # Read-time clean-up: one bounded queue per namespace, drained by a worker.
        self._checks_lock = threading.Condition()
        self._checks: dict[str, deque[tuple[int, int]]] = {}
        self._checks_stop = False
        self._checks_worker: threading.Thread | None = None
        self._lifecycle_ops = threading.Lock()  # one lifecycle call mutates shards at a time
        self._sweep_resume: dict[str, str] = {}  # node-wide operation → the namespace its next step starts at
        # Sweeps defer RocksDB's compaction of dropped ranges (see _compact_deleted): shard → when last done,
        # and the shards waiting for their turn.
        self._sweeping = False
        self._compacted_at: dict[int, int] = {}
        self._compaction_due: dict[int, LifecycleShard] = {}
        self._due_cache = DueCache()  # per-shard minima for next_due (storage_engine.due)
        if config.lifecycle_worker:
            self._checks_worker = threading.Thread(target=self._run_read_checks, name="read-check-worker", daemon=True)
            self._checks_worker.start()

    def _stop_lifecycle(self) -> None:
        with self._checks_lock:
            self._checks_stop = True
            self._checks_lock.notify_all()
        worker = self._checks_worker
        if worker is not None and worker is not threading.current_thread():
            worker.join()

    def _lifecycle_counters(self) -> dict[str, float]:
        out = self.lifecycle_counters.snapshot()
        with self._checks_lock:
            out["read_check_queue_length"] = sum(len(q) for q in self._checks.values())
        disk = self._disk
        if disk is not None:
            out["disk_used_bytes"] = disk.used_bytes
            out["disk_capacity_bytes"] = disk.capacity_bytes
            out["disk_used_ratio"] = disk.used_ratio
            out["disk_full"] = int(disk.disk_full)
            out["disk_pending_delete_bytes"] = disk.pending_delete_bytes
        return out

    # -- node policy -----------------------------------------------------------------------------
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
        self._delete_bucket.set_rate(policy.delete_rate_per_s)
        self._reclaim_bucket.set_rate(policy.reclaim_bytes_per_s)
        return policy

    def node_policy(self) -> NodePolicy:
        return self._node_policy

    def node_policy_version(self) -> int:
        """How many times the node policy was changed (persisted with it); 0: never set."""
        return self._node_policy_version

    # -- disk ----------------------------------------------------------------------------------------
    def check_disk(self) -> DiskStatus:
        used, capacity, source = self._measure_disk()
        status = disk_status(used, capacity, self._node_policy, source, self._pending_delete_bytes())
        with self._disk_lock:
            was_full = self._disk is not None and self._disk.disk_full
            self._disk = status
            self._disk_measured_at = self.clock.now_ms()
            self._disk_pending = 0
        if status.disk_full != was_full:
            log.warning(
                "disk %s: %.1f%% used", "full" if status.disk_full else "no longer full", 100 * status.used_ratio
            )
        return status

    def _guard_disk(self, nbytes: int) -> None:
        """Called before an append writes anything: raise DiskFullError above the warning ratio."""
        policy = self._node_policy
        now = self.clock.now_ms()
        with self._disk_lock:
            status = self._disk
            self._disk_pending += nbytes
            measure = status is None or now - self._disk_measured_at >= policy.clean_interval_ms
            if status is not None and not measure and status.capacity_bytes > 0:
                if status.disk_full:
                    measure = now - self._disk_measured_at >= min(1000, policy.clean_interval_ms)
                else:
                    estimate = (status.used_bytes + self._disk_pending) / status.capacity_bytes
                    measure = estimate > policy.disk_warning_ratio
        if measure:
            status = self.check_disk()
        if status is not None and status.disk_full:
            self.lifecycle_counters.add("appends_rejected_disk_full_total")
            raise DiskFullError(status.used_ratio, policy.disk_warning_ratio)

    def _disk_pressure(self) -> bool:
        status = self._disk or self.check_disk()
        return status.over_max_used

    def _pending_delete_bytes(self) -> int:
        """Bytes of ``.deleted`` files waiting for removal, over every shard (part of the used bytes)."""
        return 0  # adapters with files say how many

    # -- due times (DESIGN §3 "Timeliness") ----------------------------------------------------------
    def next_due(self) -> NextDue:
        t0 = time.perf_counter()
        now = self.clock.now_ms()
        namespaces: list[tuple[NamespacePolicy, Sequence[DueShard]]] = list(self._lc_all())
        cache = self._due_cache
        before = cache.recomputed
        due = next_due(namespaces, self._ttl_first(), now, cache)
        return NextDue(
            now=now,
            due=due,
            shards=sum(len(shards) for _, shards in namespaces),
            recomputed=cache.recomputed - before,
            duration_ms=round((time.perf_counter() - t0) * 1000, 3),
        )

    def _ttl_first(self) -> int | None:
        """The first TTL-index entry's ``expire_at`` over every namespace (``None``: the index is
        empty). Adapters whose index is not one ordered walk answer it faster."""
        entry = next(self._ttl_candidates(None, None, NEVER, [0]), None)
        return None if entry is None else entry.expire_at

    def sweep_due(self, operation: str, limit: int | None = None) -> LifecycleResult:
        """One step of a deadline-driven sweep: ``reclaim`` or ``retention`` on the shards whose
        :meth:`next_due` time has passed only, or the node-wide ``expire-scan`` (whose walk
        already costs only the due entries). ``reclaim`` here drops the due shards' wholly
        expired segments (sealing an idle active one first), on up to ``DUE_DROP_THREADS`` shards
        at once: a drop is mostly synced writes and directory fsyncs, which concurrent drops share
        (RocksDB commits concurrent synced writes as a group). Rewrites of partly dead segments
        are left to the node-wide :meth:`reclaim`."""
        self._check_limit(limit)
        if operation == "expire-scan":
            return self.expire_scan(None, None, limit)
        if operation not in ("reclaim", "retention"):
            raise InvalidArgumentError("operation", "must be one of expire-scan, reclaim, retention")
        t0 = time.perf_counter()
        now = self.clock.now_ms()
        due: list[tuple[str, NamespacePolicy, LifecycleShard]] = []
        peak_ok = in_off_peak(now, self._node_policy)
        for name in sorted(self._lc_names()):
            try:
                policy, shards = self._lc_namespace(name)
            except StorageError:
                continue  # deleted meanwhile
            for s in shards:
                minima, active = self._due_cache.minima(s, policy.ttl_ms)
                when = shard_due(minima, active, policy, now)[0 if operation == "reclaim" else 1]
                if when is not None and when <= now:
                    due.append((name, policy, s))
        totals: dict[str, Any] = {}
        if operation == "retention":
            for name, _, s in due:
                try:
                    result = self.apply_retention(name, s.shard)
                except UnknownNamespaceError:
                    continue
                for key in LIFECYCLE_COUNTS:
                    totals[key] = totals.get(key, 0) + getattr(result, key)
            return self._result(operation, None, None, t0, **totals)
        budget = SWEEP_RECLAIM_SEGMENTS if limit is None else limit
        more = False
        urgent: dict[str, bool] = {}

        def drop(policy: NamespacePolicy, s: LifecycleShard) -> tuple[ShardWork, int]:
            local: dict[str, Any] = {}
            work = ShardWork()
            self._remove_files([s], now, local)
            segments = self._step_segments(s, policy, now, local)
            whole = [
                seg.base_offset
                for seg in segments
                if seg.state is SegmentState.SEALED and segment_expired(seg, policy.ttl_ms, now)
            ]
            if whole:
                work.add(s.drop_segments(whole, now, self._node_policy.file_delete_delay_ms))
            work.rolled += local.get("rolled", 0)
            work.files_removed += local.get("files_removed", 0)
            return work, len(whole)

        with self._lifecycle_ops, ThreadPoolExecutor(DUE_DROP_THREADS, thread_name_prefix="due-drop") as pool:
            chosen: list[tuple[NamespacePolicy, LifecycleShard]] = []
            for name, policy, s in due:
                if not peak_ok:
                    if name not in urgent:
                        urgent[name] = self._urgent(policy, self._lc_namespace(name)[1])
                    if not urgent[name]:
                        continue
                chosen.append((policy, s))
            for i in range(0, len(chosen), DUE_DROP_THREADS):
                if budget <= 0:
                    more = True
                    break
                chunk = chosen[i : i + DUE_DROP_THREADS]
                for (_, s), (work, _) in zip(chunk, pool.map(lambda job: drop(*job), chunk), strict=True):
                    sum_work(totals, work)
                    budget -= work.segments_deleted
                    self.lifecycle_counters.add_many(
                        {
                            "reclaim_segments_deleted_total": work.segments_deleted,
                            "reclaim_bytes_total": work.bytes_reclaimed,
                        }
                    )
                    if work.segments_deleted:
                        self._sweeping = True  # deferred, as in a sweep (see _compact_deleted)
                        try:
                            self._compact_deleted(s)
                        finally:
                            self._sweeping = False
        self._compact_due()
        return self._result(operation, None, None, t0, more=more, **totals)

    # -- helpers -------------------------------------------------------------------------------------
    def _retention_plan(
        self, namespace: str, shard: int, policy: NamespacePolicy, segments: Sequence[SegmentInfo], plan: RetentionPlan
    ) -> RetentionPlan:
        """Hook: subscriptions may keep segments retention would delete (``SubscriptionMixin``)."""
        return plan

    def _select(self, namespace: str, shard: int | None) -> tuple[NamespacePolicy, list[LifecycleShard]]:
        policy, shards = self._lc_namespace(namespace)
        return policy, select_shards(namespace, shards, shard)

    @staticmethod
    def _check_limit(limit: int | None) -> None:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise InvalidArgumentError("limit", "must be an integer ≥ 1")

    def _urgent(self, policy: NamespacePolicy, shards: Sequence[LifecycleShard]) -> bool:
        """Work that may run outside off-peak hours: disk pressure or too much expired data."""
        if self._disk_pressure():
            return True
        stats = [s.stats() for s in shards]
        stored = sum(s.record_count for s in stats)
        expired = sum(s.expired_records for s in stats)
        return stored > 0 and expired / stored > self._node_policy.urgent_expired_ratio

    @staticmethod
    def _result(operation: str, namespace: str | None, shard: int | None, t0: float, **values: Any) -> LifecycleResult:
        values.pop("files_removed_bytes", None)
        return LifecycleResult(
            operation=operation,
            namespace=namespace,
            shard=shard,
            duration_ms=round((time.perf_counter() - t0) * 1000, 3),
            **values,
        )

    def _step_segments(
        self, s: LifecycleShard, policy: NamespacePolicy, now: int, totals: dict[str, Any], dry_run: bool = False
    ) -> list[SegmentInfo]:
        """The shard's segments as a lifecycle step works on them: an idle active segment
        (:func:`~storage_engine.rolling.idle_segment_due`) sealed first, counted in ``rolled``.

        Appends are what roll segments, so without this a shard nobody writes to would keep
        expired, old or dirty data in its active segment forever (DESIGN §3 "Idle shards").
        ``roll_empty`` keeps the end offset and never seals an empty segment. The check reads
        metadata the step lists anyway; only a seal lists again. A dry run sees the segment
        sealed without sealing it (:func:`~storage_engine.rolling.sealed_view`).
        """
        segments = s.lifecycle_segments()
        if dry_run:
            seen = sealed_view(segments, policy, now)
            if seen and seen[-1] is not segments[-1]:
                totals["rolled"] = totals.get("rolled", 0) + 1
            return seen
        if segments and idle_segment_due(segments[-1], policy, now) and s.roll_empty(now):
            totals["rolled"] = totals.get("rolled", 0) + 1
            segments = s.lifecycle_segments()
        return segments

    def _seal_idle(
        self,
        namespaces: Iterable[tuple[NamespacePolicy, Iterable[LifecycleShard]]],
        now: int,
        totals: dict[str, Any],
        dry_run: bool = False,
    ) -> None:
        """Seal the idle active segments of these shards (for steps that list no segments)."""
        for policy, shards in namespaces:
            for s in shards:
                self._step_segments(s, policy, now, totals, dry_run)

    def _remove_files(
        self, shards: Iterable[LifecycleShard], now: int, totals: dict[str, Any], *, purge: bool = False
    ) -> None:
        """Remove the shards' due ``.deleted`` files (with ``purge``, all that no reader holds)."""
        for s in shards:
            work = s.remove_due_files(now, self._node_policy, purge=purge)
            if work.files_removed:
                self.lifecycle_counters.add_many(
                    {"files_removed_total": work.files_removed, "files_removed_bytes_total": work.files_removed_bytes}
                )
            sum_work(totals, work)

    # -- layer 1: read-time clean-up queue ------------------------------------------------------------
    def _enqueue_read_check(self, namespace: str, shard: int, offset: int, queue_size: int) -> None:
        """Called by the read path for a hidden expired record that still has index entries."""
        with self._checks_lock:
            q = self._checks.setdefault(namespace, deque())
            if len(q) >= queue_size:
                self.lifecycle_counters.add("read_check_drops_total")
                return
            q.append((shard, offset))
            self._checks_lock.notify()
        self.lifecycle_counters.add("read_checks_enqueued_total")

    def _forget_read_checks(self, namespace: str) -> None:
        with self._checks_lock:
            self._checks.pop(namespace, None)

    def _run_read_checks(self) -> None:
        while True:
            with self._checks_lock:
                while not self._checks_stop and not any(self._checks.values()):
                    self._checks_lock.wait(0.5)
                if self._checks_stop:
                    return
            try:
                self.drain_read_checks(1000)
            except Exception:  # a deleted namespace or a failed shard: the items are dropped
                log.debug("read-check clean-up failed", exc_info=True)

    def drain_read_checks(self, limit: int | None = None) -> LifecycleResult:
        self._check_limit(limit)
        t0 = time.perf_counter()
        taken: dict[tuple[str, int], list[int]] = {}
        n = 0
        with self._checks_lock:
            for namespace, q in self._checks.items():
                while q and (limit is None or n < limit):
                    shard, offset = q.popleft()
                    taken.setdefault((namespace, shard), []).append(offset)
                    n += 1
            more = any(self._checks.values())
        totals: dict[str, Any] = {"scanned": n}
        now = self.clock.now_ms()
        slices = Slices(self.foreground)
        with self._lifecycle_ops:  # kills never race each other (a record is marked dead once)
            for (namespace, shard), offsets in taken.items():
                try:
                    _, shards = self._lc_namespace(namespace)
                    if shard >= len(shards):
                        continue
                    wanted = sorted(set(offsets))
                    i = 0
                    while i < len(wanted):  # a chunk per shard lock hold, pausing between slices
                        n = slices.chunk()
                        work = shards[shard].expire_offsets(wanted[i : i + n], now)
                        i += n
                        work.scanned = 0
                        sum_work(totals, work)
                        slices.check()
                except Exception:  # deleted or closed since: nothing left to clean
                    log.debug("read check of %s/%d skipped", namespace, shard, exc_info=True)
        self.lifecycle_counters.add_many(
            {
                "read_check_expired_records_total": totals.get("expired_records", 0),
                "index_entries_deleted_total": totals.get("index_entries_deleted", 0),
            }
        )
        return self._result("read_checks", None, None, t0, more=more, **totals)

    # -- layer 2: TTL-index scan ----------------------------------------------------------------------------
    def expire_scan(
        self,
        namespace: str | None,
        shard: int | None = None,
        limit: int | None = None,
        *,
        manual: bool = False,
        dry_run: bool = False,
    ) -> LifecycleResult:
        """Layer 2 on one namespace (or one shard), or with ``namespace=None`` a node-wide sweep.

        The sweep walks the TTL index once for every namespace (its keys lead with
        ``expire_at``, so per-namespace scans each walk past the others' due entries:
        namespaces × entries; the sweep costs the due entries once). Namespaces outside
        off-peak hours and not urgent are skipped as a per-namespace scan would skip
        them; the cap is ``limit`` or the largest ``max_delete_per_scan`` of the
        namespaces, batches follow the built-in ``scan_batch_size``.

        Appends never wait on the scan (DESIGN §3 "Timeliness"): it runs in slices of
        about half a millisecond (:class:`~storage_engine.pacing.Slices`), applies a
        batch to a shard in chunks of at most a few hundred entries (one shard lock hold
        and one WriteBatch each), and between slices gives the interpreter to whoever
        waits for it, or, while appends are in flight, waits until they have finished.

        ``dry_run`` counts the due entries instead (:meth:`_count_due_entries`).
        """
        t0 = time.perf_counter()
        self._check_limit(limit)
        now = self.clock.now_ms()
        if namespace is None:
            if shard is not None:
                raise InvalidArgumentError("shard", "needs a namespace")
            targets = self._sweep_targets(now, manual)
            caps = [policy.max_delete_per_scan for policy, _ in targets.values()]
            cap = min(limit or max(caps, default=1), max(caps, default=1))
            batch_size = NamespacePolicy().scan_batch_size
        else:
            policy, shards = self._select(namespace, shard)
            if not manual and not in_off_peak(now, self._node_policy) and not self._urgent(policy, shards):
                return self._result("expire_scan", namespace, shard, t0, skipped="off_peak", more=True)
            cap = policy.max_delete_per_scan if limit is None else min(limit, policy.max_delete_per_scan)
            targets = {namespace: (policy, {s.shard: s for s in shards})}
            batch_size = policy.scan_batch_size
        totals: dict[str, Any] = {}
        scanned = [0]
        done = 0
        more = False
        batch: list[TTLEntry] = []
        by_index = {(name, index): s for name, (_, shards_of) in targets.items() for index, s in shards_of.items()}
        if dry_run:
            self._seal_idle(((p, shards_of.values()) for p, shards_of in targets.values()), now, totals, dry_run)
            sum_work(totals, would_expire(self._count_due_entries(namespace, shard, now, by_index, scanned)))
            return self._result("expire_scan", namespace, shard, t0, **{**totals, "scanned": scanned[0]})
        slices = Slices(self.foreground)
        seen = 0
        stop: TTLEntry | None = None  # the first entry left for a later scan
        with self._lifecycle_ops:
            self._seal_idle(((p, shards_of.values()) for p, shards_of in targets.values()), now, totals)
            token = self._ttl_scan_begin(list(targets) if shard is None else [])
            try:
                for entry in self._ttl_candidates(namespace, shard, now, scanned):
                    seen += 1
                    if not seen & 31:  # the walk itself is sliced too
                        slices.check()
                    if (entry.namespace, entry.shard) not in by_index:
                        continue  # a namespace the sweep skips (not off-peak, not urgent) or deleted meanwhile
                    if done + len(batch) >= cap:
                        more = True
                        stop = entry
                        break
                    batch.append(entry)
                    if len(batch) >= batch_size:
                        if not self._expire_batch(batch, by_index, now, totals, slices):
                            more = True
                            stop = batch[0]
                            break
                        done += len(batch)
                        batch = []
                if batch:
                    if self._expire_batch(batch, by_index, now, totals, slices):
                        done += len(batch)
                    else:
                        more = True
                        stop = batch[0]
            except BaseException:
                self._ttl_scan_end(token, None, now, False)
                raise
            self._ttl_scan_end(token, stop, now, True)
        totals["scanned"] = scanned[0]
        result = self._result("expire_scan", namespace, shard, t0, more=more, **totals)
        seconds = result.duration_ms / 1000
        self.lifecycle_counters.add_many(
            {
                "ttl_scan_runs_total": 1,
                "ttl_scan_entries_scanned_total": result.scanned,
                "ttl_scan_expired_records_total": result.expired_records,
                "index_entries_deleted_total": result.index_entries_deleted,
                "ttl_scan_duration_seconds_total": seconds,
                "ttl_scan_pauses_total": slices.pauses,
                "ttl_scan_waits_total": slices.waits,
            }
        )
        self.lifecycle_counters.set_many(  # gauges of the last run
            {
                "ttl_scan_last_duration_seconds": seconds,
                "ttl_scan_last_expired_records": result.expired_records,
                "ttl_scan_last_delete_rate_per_second": result.expired_records / seconds if seconds else 0.0,
            }
        )
        return result

    def _count_due_entries(
        self,
        namespace: str | None,
        shard: int | None,
        now: int,
        shards: Collection[tuple[str, int]],
        scanned: list[int],
    ) -> int:
        """How many TTL-index entries of ``shards`` are due at ``now`` (a dry run's scan: the
        same walk, sliced the same way, with no cap and nothing deleted)."""
        slices = Slices(self.foreground)
        due = 0
        for seen, entry in enumerate(self._ttl_candidates(namespace, shard, now, scanned), 1):
            if not seen & 31:
                slices.check()
            if (entry.namespace, entry.shard) in shards:
                due += 1
        return due

    def _sweep_targets(self, now: int, manual: bool) -> dict[str, tuple[NamespacePolicy, dict[int, LifecycleShard]]]:
        """Every namespace a node-wide step may work on now: off-peak, urgent, or a manual request."""
        peak_ok = manual or in_off_peak(now, self._node_policy)
        targets = {}
        for name in self._lc_names():
            try:
                policy, shards = self._lc_namespace(name)
            except StorageError:
                continue  # deleted meanwhile
            if peak_ok or self._urgent(policy, shards):
                targets[name] = (policy, {s.shard: s for s in shards})
        return targets

    def _lc_names(self) -> list[str]:
        """Every namespace's name (node-wide steps and the dirtiest-shard cleaner walk them)."""
        return [info.name for info in self.list_namespaces()]  # type: ignore[attr-defined]

    def _sweep(
        self,
        operation: str,
        step: Callable[[str, int | None], LifecycleResult],
        limit: int | None,
        cost: Callable[[LifecycleResult], int] = lambda result: 0,
        dry_run: bool = False,
    ) -> LifecycleResult:
        """One node-wide step: ``step(namespace, remaining limit)`` for each namespace, results
        added up. ``cost`` says how much of ``limit`` a result used, so the step stays bounded.

        A sweep is one pass over the namespaces in name order. A namespace with more to do,
        or a spent budget, ends the step with ``more``; the next step of the same operation
        resumes there (a point kept in memory: after a restart the pass starts again from
        the first namespace, which only repeats cheap checks). The pass ends (``more`` false)
        at the last namespace, so a sweep run finishes even under a steady load, and the next
        scheduled run starts a new pass. A namespace deleted meanwhile is passed over.
        A dry run's steps have no budget: it is one whole pass that leaves the resume point alone.
        """
        t0 = time.perf_counter()
        totals: dict[str, Any] = {}
        more = False
        remaining = limit
        names = sorted(self._lc_names())
        resume = None if dry_run else self._sweep_resume.pop(operation, None)
        first = bisect_left(names, resume) if resume is not None else 0
        self._sweeping = True
        try:
            for name in names[first:]:
                try:
                    result = step(name, remaining)
                except UnknownNamespaceError:
                    continue
                for key in LIFECYCLE_COUNTS:
                    totals[key] = totals.get(key, 0) + getattr(result, key)
                if remaining is not None:
                    remaining -= cost(result)
                if (result.more and result.skipped is None) or (remaining is not None and remaining <= 0):
                    if result.more or name != names[-1]:
                        more = True
                        self._sweep_resume[operation] = name if result.more else name + "\0"  # \0: just after it
                    break
        finally:
            self._sweeping = False
        if not dry_run:
            self._compact_due()
        return self._result(operation, None, None, t0, more=more, **totals)

    def _compact_deleted(self, shard: LifecycleShard) -> None:
        """After dropping or rewriting segments, ask RocksDB to compact the shard's deleted ranges.

        A sweep touches hundreds of shards a step and compacting each costs milliseconds
        (one ``compact_range`` per column family): it defers them, and :meth:`_compact_due`
        compacts a shard at most every ``SWEEP_COMPACT_INTERVAL_MS`` (RocksDB skips range
        tombstones meanwhile, and its background compaction drops them anyway).
        """
        if self._sweeping:
            self._compaction_due[id(shard)] = shard
            self._compacted_at.setdefault(id(shard), self.clock.now_ms())  # the interval starts at the first drop
        else:
            shard.compact_deleted()
            self._compacted_at[id(shard)] = self.clock.now_ms()

    def _compact_due(self) -> None:
        """Compact the deferred shards whose interval has passed."""
        now = self.clock.now_ms()
        with self._lifecycle_ops:
            for key, shard in list(self._compaction_due.items()):
                if now - self._compacted_at.get(key, now) >= SWEEP_COMPACT_INTERVAL_MS:
                    del self._compaction_due[key]
                    try:
                        shard.compact_deleted()
                    except StorageError:
                        self._compacted_at.pop(key, None)  # its namespace was deleted or closed meanwhile
                        continue
                    self._compacted_at[key] = now

    def _expire_batch(
        self,
        batch: list[TTLEntry],
        shards: dict[tuple[str, int], LifecycleShard],
        now: int,
        totals: dict[str, Any],
        slices: Slices,
    ) -> bool:
        """One batch (paced by ``delete_rate_per_s``), applied a chunk per shard lock hold.

        Each entry's operations stay in one WriteBatch (DESIGN §3); a chunk is
        ``slices.chunk()`` entries of one shard, and the scan may pause after each.
        """
        if not self._delete_bucket.take(len(batch)):
            return False
        groups: dict[tuple[str, int], list[TTLEntry]] = {}
        for e in batch:
            groups.setdefault((e.namespace, e.shard), []).append(e)
        for index, entries in groups.items():
            shard = shards[index]
            i = 0
            while i < len(entries):
                n = slices.chunk()
                work = shard.expire_entries(entries[i : i + n], now)
                i += n
                work.scanned = 0
                sum_work(totals, work)
                slices.check()
        return True

    # -- retention (Kafka) -------------------------------------------------------------------------------------
    def apply_retention(
        self, namespace: str | None, shard: int | None = None, *, dry_run: bool = False
    ) -> LifecycleResult:
        if namespace is None:  # node-wide
            return self._sweep(
                "retention", lambda name, _: self.apply_retention(name, dry_run=dry_run), None, dry_run=dry_run
            )
        t0 = time.perf_counter()
        policy, shards = self._select(namespace, shard)
        now = self.clock.now_ms()
        totals: dict[str, Any] = {}
        with self._lifecycle_ops:
            if not dry_run:
                self._remove_files(shards, now, totals)
            for s in shards:
                segments = self._step_segments(s, policy, now, totals, dry_run)
                totals["scanned"] = totals.get("scanned", 0) + len(segments)
                plan = deletable_segments(segments, policy, now)
                plan = self._retention_plan(namespace, s.shard, policy, segments, plan)
                if plan.count == 0:
                    continue
                if dry_run:
                    totals["rolled"] = totals.get("rolled", 0) + int(plan.roll)
                    sum_work(totals, would_drop(segments[: plan.count]))
                    continue
                if plan.roll:
                    totals["rolled"] = totals.get("rolled", 0) + int(s.roll_empty(now))
                bases = [seg.base_offset for seg in segments[: plan.count]]
                work = s.drop_segments(bases, now, self._node_policy.file_delete_delay_ms)
                sum_work(totals, work)
                self.lifecycle_counters.add_many(
                    {
                        "retention_segments_deleted_total": work.segments_deleted,
                        "retention_bytes_deleted_total": work.bytes_reclaimed,
                    }
                )
            if not dry_run:
                self._remove_files(shards, now, totals)
        start = shards[0].stats().log_start_offset if shard is not None else None
        return self._result("retention", namespace, shard, t0, log_start_offset=start, **totals)

    # -- file cleaning (RocketMQ) --------------------------------------------------------------------------------
    def clean_files(self, manual: bool = False, *, dry_run: bool = False) -> LifecycleResult:
        t0 = time.perf_counter()
        node = self._node_policy
        namespaces = self._lc_all()
        everything = [s for _, shards in namespaces for s in shards]
        totals: dict[str, Any] = {}
        if not dry_run:
            self.lifecycle_counters.add("cleaner_runs_total")
        with self._lifecycle_ops:
            now = self.clock.now_ms()
            pending_before = self._pending_delete_bytes()
            if not dry_run:
                self._remove_files(everything, now, totals)
            status = self.check_disk()
            if purge_pending_first(status):
                # What retention or reclamation already deleted goes first, whatever its delay: it
                # may be all the disk needs, and no live segment is touched for bytes already free.
                if dry_run:
                    status = after_freeing(status, status.pending_delete_bytes, node, pending=0)
                else:
                    self._remove_files(everything, now, totals, purge=True)
                    status = self.check_disk()
            trigger = clean_trigger(now, status, node, manual)
            if trigger is None:
                self._count_freed(totals, pending_before, status if dry_run else None)
                return self._result("clean_files", None, None, t0, skipped="not_due", **totals)
            forced = forced_cleaning(status, node)
            # Oldest first across shards, each shard's candidates in offset order (an idle active
            # segment sealed first, or seen sealed by a dry run).
            heap: list[tuple[int, int, int, _Chain]] = []
            by_id: dict[int, LifecycleShard] = {}
            listed = [
                (s, self._step_segments(s, policy, now, totals, dry_run))
                for policy, shards in namespaces
                for s in shards
            ]
            for i, (s, segments) in enumerate(listed):
                totals["scanned"] = totals.get("scanned", 0) + len(segments)
                it = iter(cleanable_prefix(segments, node, now, forced=True))
                by_id[i] = s
                first = next(it, None)
                if first is not None:
                    heapq.heappush(heap, (first.modified_at, first.base_offset, i, _Chain(first, it)))
            deleted = 0
            while heap:
                if deleted >= node.delete_batch_max and not dry_run:
                    totals["more"] = True
                    break
                _, _, i, chain = heapq.heappop(heap)
                segment = chain.head
                now = self.clock.now_ms()
                expired = file_expired(segment, node, now)
                if not (expired or forced):
                    continue  # this shard stops at its first segment that does not qualify
                if dry_run:
                    work = would_drop([segment])
                else:
                    if deleted:
                        self.sleep(node.delete_interval_ms / 1000)
                    work = by_id[i].drop_segments([segment.base_offset], now, 0)
                if work.segments_deleted and not expired:
                    work.forced_deletes = work.segments_deleted
                sum_work(totals, work)
                deleted += work.segments_deleted
                if not dry_run:
                    self.lifecycle_counters.add_many(
                        {
                            "cleaner_segments_deleted_total": work.segments_deleted,
                            "cleaner_bytes_deleted_total": work.bytes_reclaimed,
                            "cleaner_forced_deletes_total": work.forced_deletes,
                        }
                    )
                if forced:  # stop forcing as soon as use (without pending files) is back at the watermark
                    status = after_freeing(status, work.bytes_reclaimed, node) if dry_run else self.check_disk()
                    forced = forced_cleaning(status, node)
                nxt = next(chain.rest, None)
                if nxt is not None:
                    heapq.heappush(heap, (nxt.modified_at, nxt.base_offset, i, _Chain(nxt, chain.rest)))
            if dry_run:
                self._count_freed(totals, pending_before, status)
                return self._result("clean_files", None, None, t0, **totals)
            now = self.clock.now_ms()
            self._remove_files(everything, now, totals)
            self._count_freed(totals, pending_before)
            self.check_disk()
        return self._result("clean_files", None, None, t0, **totals)

    def _count_freed(self, totals: dict[str, Any], pending_before: int, dry: DiskStatus | None = None) -> None:
        """Make a cleaner run's ``bytes_reclaimed`` the bytes it freed, and report what is pending.

        Dropping a segment counts its bytes as reclaimed, but a file a reader still holds
        only becomes pending; removing files deleted earlier frees bytes no drop of this run
        counted. So: freed = dropped + (pending before − pending after). Stores without
        files never have pending bytes: what they drop counts as freed (RocksDB hands the
        space back when it compacts the dropped range). A dry run passes the disk it would
        leave (``dry``): its drops free at once and its purge frees what was pending.
        """
        pending_after = self._pending_delete_bytes() if dry is None else dry.pending_delete_bytes
        totals["bytes_reclaimed"] = totals.get("bytes_reclaimed", 0) + pending_before - pending_after
        totals["pending_delete_bytes"] = pending_after

    # -- layer 3: reclamation ---------------------------------------------------------------------------------------
    def reclaim(
        self,
        namespace: str | None,
        shard: int | None = None,
        limit: int | None = None,
        *,
        manual: bool = False,
        dry_run: bool = False,
    ) -> LifecycleResult:
        self._check_limit(limit)
        if namespace is None:  # node-wide: one segment budget shared by every namespace
            return self._sweep(
                "reclaim",
                lambda name, left: self.reclaim(name, None, left, manual=manual, dry_run=dry_run),
                None if dry_run else SWEEP_RECLAIM_SEGMENTS if limit is None else limit,
                lambda result: result.segments_deleted + result.segments_rewritten,
                dry_run=dry_run,
            )
        t0 = time.perf_counter()
        policy, shards = self._select(namespace, shard)
        now = self.clock.now_ms()
        if not manual and not in_off_peak(now, self._node_policy) and not self._urgent(policy, shards):
            return self._result("reclaim", namespace, shard, t0, skipped="off_peak", more=True)
        budget = DEFAULT_RECLAIM_SEGMENTS if limit is None else limit
        totals: dict[str, Any] = {}
        more = False
        with self._lifecycle_ops:
            if not dry_run:
                self._remove_files(shards, now, totals)
            for s in shards:
                segments = self._step_segments(s, policy, now, totals, dry_run)
                sealed = [seg for seg in segments if seg.state is SegmentState.SEALED]
                totals["scanned"] = totals.get("scanned", 0) + len(segments)
                whole = [seg.base_offset for seg in sealed if segment_expired(seg, policy.ttl_ms, now)]
                if dry_run:  # the whole backlog, with no budget or pacing
                    dropped = set(whole)
                    sum_work(totals, would_drop([seg for seg in sealed if seg.base_offset in dropped]))
                    for seg in sealed:
                        if seg.base_offset not in dropped and self._worth_rewriting(seg, policy):
                            sum_work(totals, would_rewrite(seg))
                    continue
                if len(whole) > budget:
                    whole, more = whole[:budget], True
                touched = False
                if whole:
                    work = s.drop_segments(whole, now, self._node_policy.file_delete_delay_ms)
                    sum_work(totals, work)
                    budget -= work.segments_deleted
                    touched = True
                    self.lifecycle_counters.add_many(
                        {
                            "reclaim_segments_deleted_total": work.segments_deleted,
                            "reclaim_bytes_total": work.bytes_reclaimed,
                        }
                    )
                dropped = set(whole)
                for seg in sealed:
                    if seg.base_offset in dropped or not self._worth_rewriting(seg, policy):
                        continue
                    if budget <= 0 or not self._reclaim_bucket.take(seg.size_bytes):
                        more = True
                        break
                    work = s.rewrite_segment(seg.base_offset, now)
                    sum_work(totals, work)
                    budget -= 1
                    touched = True
                    self.lifecycle_counters.add_many(
                        {
                            "reclaim_segments_rewritten_total": work.segments_rewritten,
                            "reclaim_bytes_total": work.bytes_reclaimed,
                        }
                    )
                if touched:
                    self._compact_deleted(s)
                if budget <= 0 and not more:
                    more = any(
                        segment_expired(seg, policy.ttl_ms, now)
                        for seg in s.lifecycle_segments()
                        if seg.state is SegmentState.SEALED
                    )
            if not dry_run:
                self._remove_files(shards, now, totals)
        start = shards[0].stats().log_start_offset if shard is not None else None
        return self._result("reclaim", namespace, shard, t0, more=more, log_start_offset=start, **totals)

    @staticmethod
    def _worth_rewriting(segment: SegmentInfo, policy: NamespacePolicy) -> bool:
        """A sealed segment reclamation rewrites: its dead fraction is above ``reclaim_dead_ratio``."""
        if not segment.record_count:
            return False
        return (segment.record_count - segment.live_count) / segment.record_count > policy.reclaim_dead_ratio

    # -- verification -------------------------------------------------------------------------------------------------
    def verify(self, namespace: str) -> VerifyReport:
        _, shards = self._lc_namespace(namespace)
        now = self.clock.now_ms()
        records = entries = 0
        problems: list[str] = []
        for s in shards:
            r, e, p = s.verify(now)
            records += r
            entries += e
            problems += p
        return VerifyReport(namespace, records, entries, len(problems), tuple(problems[:MAX_PROBLEMS]))


class _Chain:
    """A shard's next cleaning candidate and the rest of its candidates."""

    __slots__ = ("head", "rest")

    def __init__(self, head: SegmentInfo, rest: Iterator[SegmentInfo]) -> None:
        self.head = head
        self.rest = rest
