"""The storage engine contract.

Every adapter (``segment``, ``rocksdb``, ``memory``) implements
:class:`StorageAdapter`; the docstrings in this module *are* the contract and
the shared contract test suite (``tests/storage_engine/test_contract.py``)
checks every adapter against them.

Vocabulary (see ``../shared/DESIGN.md`` §2):

- A *namespace* (topic) is split into shards ``0..n-1``.
- Offsets in a shard are dense, start at 0 and are never reused, even after
  deletion or compaction.
- ``log_start_offset`` is the first offset still stored (0 until something is
  deleted); ``end_offset`` is the offset the next appended record will get
  (so an empty shard has ``log_start_offset == end_offset == 0``).
- Times are integers in milliseconds since the epoch, taken from an injectable
  :class:`~storage_engine.clock.Clock`.

Edge cases every adapter honours:

- Reading at ``end_offset`` returns no records and ``next_offset ==
  end_offset`` (a consumer that is caught up); it is not an error.
- Reading below ``log_start_offset`` or above ``end_offset`` raises
  :class:`~storage_engine.errors.OffsetOutOfRangeError` carrying both bounds.
- A read returns at least one record when one is available at or after the
  requested offset, even if that record alone exceeds ``max_bytes``, so a
  consumer always makes progress (Kafka's fetch semantics).
- A read at an offset that no longer holds a record (removed by compaction or
  expiry) returns the next higher record.
- An empty append writes nothing, returns an empty result and never rolls a
  segment.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from pathlib import Path

from storage_engine.model import (
    COMPACTION_COUNTS,
    LIFECYCLE_COUNTS,
    OFFLOAD_COUNTS,
    RECALL_COUNTS,
    SUBSCRIPTION_COUNTS,
    AppendResult,
    BacklogInfo,
    CompactionEstimate,
    DiskStatus,
    EngineStats,
    Headers,
    LifecycleResult,
    NamespaceInfo,
    NewRecord,
    NextDue,
    ReadResult,
    Record,
    SegmentInfo,
    SegmentState,
    SegmentTier,
    ShardFailure,
    ShardStats,
    SubscriptionInfo,
    VerifyReport,
    shard_stats_of,
)
from storage_engine.policies.policy import NamespacePolicy, NodePolicy

# The contract's vocabulary is importable from here (its definitions live in storage_engine.model).
__all__ = [
    "COMPACTION_COUNTS",
    "LIFECYCLE_COUNTS",
    "OFFLOAD_COUNTS",
    "RECALL_COUNTS",
    "SUBSCRIPTION_COUNTS",
    "AppendResult",
    "BacklogInfo",
    "CompactionEstimate",
    "DiskStatus",
    "EngineStats",
    "Headers",
    "LifecycleResult",
    "NamespaceInfo",
    "NewRecord",
    "NextDue",
    "ReadResult",
    "Record",
    "SegmentInfo",
    "SegmentState",
    "SegmentTier",
    "ShardFailure",
    "ShardStats",
    "StorageAdapter",
    "SubscriptionInfo",
    "VerifyReport",
    "shard_stats_of",
]


class StorageAdapter(abc.ABC):
    """One storage backend. Thread-safe: any method may be called from any thread.

    Every method raises :class:`~storage_engine.errors.EngineClosedError` after
    :meth:`close`, :class:`~storage_engine.errors.UnknownNamespaceError` for a
    namespace that does not exist and
    :class:`~storage_engine.errors.UnknownShardError` for a shard outside
    ``0..shards-1``.
    """

    name: str

    # -- namespaces -----------------------------------------------------------
    @abc.abstractmethod
    def create_namespace(self, name: str, shards: int, policy: NamespacePolicy | None = None) -> NamespaceInfo:
        """Create a namespace with ``shards`` empty shards.

        Raises ``NamespaceExistsError`` if it exists and ``InvalidArgumentError``
        for a bad name (``[A-Za-z0-9._-]{1,200}``) or ``shards`` outside 1..1024.
        """

    @abc.abstractmethod
    def update_namespace(self, name: str, policy: NamespacePolicy) -> NamespaceInfo:
        """Replace a namespace's policy; takes effect for the next append/roll."""

    @abc.abstractmethod
    def delete_namespace(self, name: str) -> None:
        """Delete a namespace and all its data and index entries."""

    @abc.abstractmethod
    def list_namespaces(self) -> list[NamespaceInfo]:
        """All namespaces, sorted by name."""

    @abc.abstractmethod
    def get_namespace(self, name: str) -> NamespaceInfo:
        """One namespace."""

    # -- data -----------------------------------------------------------------
    @abc.abstractmethod
    def append(self, namespace: str, shard: int, records: Sequence[NewRecord]) -> AppendResult:
        """Append a batch; return its offsets once durable per the durability mode.

        The batch is atomic: all records are stored with consecutive offsets, or
        none is. Raises ``RecordTooLargeError`` when one encoded record exceeds
        the policy's ``max_record_bytes`` and ``InvalidRecordError`` (naming the
        field and rule) for e.g. a negative timestamp or a non-string tag.
        """

    @abc.abstractmethod
    def read(
        self, namespace: str, shard: int, offset: int, max_records: int = 500, max_bytes: int = 1 << 20
    ) -> ReadResult:
        """Read records at or after ``offset`` (see the module docstring for edges)."""

    @abc.abstractmethod
    def offset_for_timestamp(self, namespace: str, shard: int, timestamp: int) -> int | None:
        """The first offset whose record timestamp is ≥ ``timestamp``, or ``None``."""

    @abc.abstractmethod
    def read_key(self, namespace: str, shard: int, key: bytes) -> Record | None:
        """The latest record with ``key`` in the shard (a tombstone included), or ``None``."""

    @abc.abstractmethod
    def read_tag(self, namespace: str, shard: int, tag: str, offset: int = 0, max_records: int = 500) -> ReadResult:
        """Records carrying ``tag`` at or after ``offset``, in offset order.

        ``next_offset`` is one past the last returned record, or ``end_offset``
        when the tag has no further records. Offsets below the log start are
        clamped to it (a tag read is a search, not a positioned fetch).
        """

    # -- metadata ---------------------------------------------------------------
    @abc.abstractmethod
    def list_segments(self, namespace: str, shard: int) -> list[SegmentInfo]:
        """Segments of a shard in offset order; the last one is the active segment."""

    @abc.abstractmethod
    def shard_stats(self, namespace: str, shard: int) -> ShardStats:
        """Bounds and sizes of one shard."""

    @abc.abstractmethod
    def stats(self) -> EngineStats:
        """Counters and per-shard figures for the whole engine."""

    def failed_shards(self) -> list[ShardFailure]:
        """The shards stopped by a failure, in namespace and shard order (readiness, ``/metrics``);
        cheap: no shard is read. Adapters without a failure state have none."""
        self.list_namespaces()  # raises EngineClosedError after close, like every call
        return []

    # -- lifecycle (DESIGN §3) -------------------------------------------------------
    # Every lifecycle call does a bounded amount of work, is safe to repeat and
    # to interrupt (a crash in the middle loses nothing acknowledged and not
    # expired), returns a LifecycleResult, and holds a shard's write lock for
    # at most one batch of work at a time, so appends and reads keep flowing.
    #
    # Idle shards (DESIGN §3): appends are what roll segments, so every step that
    # works on segments (expire_scan, apply_retention, reclaim, clean_files, compact,
    # compact_dirtiest; per namespace, per shard or node-wide; scheduled or manual)
    # first seals an active segment that the next append would roll (older than
    # segment_ms by its first record's time; for a compacted namespace
    # max_compaction_lag_ms when smaller) or whose every record is past its deadline
    # (storage_engine.rules.rolling.idle_segment_due), counts it in ``rolled`` and treats it
    # as sealed. A busy shard too: an active segment at least 10 s old more than
    # ``segment_expired_roll_ratio`` of whose records are expired is sealed the same way
    # (storage_engine.rules.rolling.expired_share_passed), so reclaim drops or rewrites it; the
    # deadline-driven reclaim (sweep_due) rewrites a segment it sealed so at once. The
    # end offset is kept (the next append gets the offset it would have had); an empty
    # active segment is never sealed or dropped. A step skipped
    # (off-peak, not due) seals nothing; a dry run counts the segment as sealed.
    #
    # Dry runs (``dry_run=True``), offered by every call that changes data: expire_scan,
    # apply_retention, reclaim, clean_files, compact, compact_dirtiest, expire_subscriptions,
    # enforce_backlog_quota, offload and recall (DESIGN §3 "Dry runs"): the same decisions from
    # the same rules, and nothing changed: no record, segment, file, index entry, cursor,
    # object in the store, checkpoint, counter, backoff or scan position. The result counts what
    # the call would do now (storage_engine.rules.work): records, segments, bytes, cursors moved,
    # segments offloaded or recalled, each equal to the sum the real call reports when repeated
    # while ``more`` on the same state. A dry run has no per-call budget (it ignores ``limit``, a
    # node-wide sweep's budget, ``delete_batch_max``, ``limit_shards``) and takes no pacing or bandwidth
    # tokens, so it answers in one call with the whole of the work due and ``more`` is false:
    # a caller never loops on it. A ``namespace`` of None means every namespace (a node-wide sweep).

    @abc.abstractmethod
    def next_due(self) -> NextDue:
        """When lifecycle work is next due on this engine (DESIGN §3 "Timeliness"), so that a
        scheduler can sweep at that moment rather than on a fixed interval: ``expire-scan`` at
        the first TTL-index entry's ``expire_at``; ``reclaim`` at the earliest deadline of any
        non-empty segment, the active one included (a whole segment can go); ``retention``, for
        namespaces whose cleanup policy deletes, when the oldest segment breaks the time rule
        (``max_timestamp + retention_ms + 1``), or now when the size rule is already broken.
        From metadata only, never reading records: a shard's sealed segments are read again
        only when a roll, drop or rewrite changed them since the previous call
        (:mod:`storage_engine.rules.due`)."""

    @abc.abstractmethod
    def sweep_due(self, operation: str, limit: int | None = None) -> LifecycleResult:
        """One step of a deadline-driven node-wide sweep (``namespace`` ``None`` in the result):
        ``reclaim`` (at most ``limit`` segments, default 256) or ``retention`` on just the shards
        whose :meth:`next_due` time of that kind has passed, each shard exactly as a node-wide
        sweep would treat it; ``expire-scan`` is the node-wide :meth:`expire_scan`. Work that is
        not timed by a due time (rewrites of partly dead segments on shards not due, files of
        shards not due) is left to the node-wide sweeps. ``more`` when the budget ran out."""

    @abc.abstractmethod
    def expire_scan(
        self,
        namespace: str | None,
        shard: int | None = None,
        limit: int | None = None,
        *,
        manual: bool = False,
        dry_run: bool = False,
    ) -> LifecycleResult:
        """Layer 2: the TTL-index scan of a namespace (or one shard).

        Seeks the TTL index from its start, takes entries with ``expire_at ≤
        now`` and stops at the first later one. Per entry, in one WriteBatch:
        the record's tag entries, its key entry only if it still points at
        this offset, then the TTL entry are deleted and the record is marked
        dead (live counts and the expired ratio stay true). Works in batches
        of ``scan_batch_size`` up to ``limit`` (default and cap:
        ``max_delete_per_scan``) and the node's ``delete_rate_per_s``; the
        cost follows the number of expired entries, not the number stored.
        Outside ``off_peak_hours`` (when set) only urgent work is done (disk
        above ``disk_max_used_ratio`` or expired ratio above
        ``urgent_expired_ratio``) unless ``manual``.
        """

    @abc.abstractmethod
    def drain_read_checks(self, limit: int | None = None) -> LifecycleResult:
        """Process clean-ups queued by reads that hid expired records (layer 1).

        The engine's background worker calls this; it is public so that tests
        and tools can drain the queue deterministically.
        """

    @abc.abstractmethod
    def apply_retention(
        self, namespace: str | None, shard: int | None = None, *, dry_run: bool = False
    ) -> LifecycleResult:
        """Kafka retention for ``cleanup_policy`` containing ``delete`` (DESIGN §3).

        From the oldest segment, deletes the contiguous prefix that breaks the
        time rule (``now − max_timestamp > retention_ms``) or the size rule
        (only when total ≥ ``retention_bytes``: delete while ``total −
        size_of_oldest ≥ retention_bytes``), stopping at the first segment that
        breaks neither. An empty active segment is never deleted; when every
        segment qualifies a new empty active segment is rolled first so the end
        offset is kept. The log start offset moves to the first surviving
        record. Deleted files are renamed ``.deleted`` and removed by a later
        lifecycle call once ``file_delete_delay_ms`` has passed.
        """

    @abc.abstractmethod
    def clean_files(self, manual: bool = False, *, dry_run: bool = False) -> LifecycleResult:
        """One run of the node-level file cleaner (RocketMQ semantics, DESIGN §3).

        Deletes sealed segments last written more than ``file_reserved_ms`` ago
        only when the hour (UTC, from the clock) is in ``delete_when``, disk use
        is above ``disk_max_used_ratio`` or ``manual``; above
        ``disk_clean_forcibly_ratio`` (with ``clean_forcibly_enabled``) the
        oldest sealed segments go even if not expired. Per run at most
        ``delete_batch_max`` segments, ``delete_interval_ms`` between two
        deletions, never an active segment, and per shard it stops at the first
        segment that does not qualify. Deleted files are removed at once unless
        a reader holds them: then when released, or after
        ``destroy_forcibly_after_ms``.

        Files deleted earlier and still waiting for ``file_delete_delay_ms``
        (renamed ``.deleted`` by retention or reclamation) never cause more
        deletion: when use is above ``disk_max_used_ratio`` they are removed
        first, whatever their delay (readers are respected as above), and the
        trigger and the forced decision measure use without the ones still
        pending (:class:`DiskStatus`). ``bytes_reclaimed`` is the bytes the
        run freed; ``pending_delete_bytes`` what remains pending.
        """

    def offload(
        self, namespace: str | None, shard: int | None = None, limit: int | None = None, *, dry_run: bool = False
    ) -> LifecycleResult:
        """Tiered storage (DESIGN §3 "Tiers"): one bounded, resumable offload step of a namespace
        (or one shard; ``None``: every namespace) whose policy has ``remote_storage_enabled``.

        Sealed segments only on local disk are uploaded to the object store, oldest first, at most
        ``limit`` per call (default 64) and as many bytes as the node's
        ``offload_bandwidth_bytes_per_s`` grants, ``offload_concurrency`` at a time; each is
        verified (size, and checksum by ETag or read back) with its manifest before its metadata
        says it is uploaded. Then local copies of uploaded segments beyond ``local_retention_ms`` /
        ``local_retention_bytes`` are dropped (reads go on from the object store). Retention, TTL
        and compaction keep applying to the whole log; deleting a segment deletes its objects. A
        crash at any point loses and duplicates nothing: the next call finishes the work.
        Counts ``segments_offloaded``, ``bytes_offloaded``, ``local_copies_dropped`` and
        ``local_bytes_dropped`` (:data:`OFFLOAD_COUNTS`); ``skipped="policy"`` for a namespace
        without remote storage, ``skipped="unsupported"`` for adapters without segment files.
        A dry run uploads and drops nothing and ignores ``limit``, the bandwidth and a backoff after a
        failure: it counts every candidate as uploaded (``bytes_offloaded``: their sizes) and then the
        local copies local retention would drop once they are.
        """
        if namespace is not None:
            self.get_namespace(namespace)  # an unknown namespace is an error on every adapter
        return LifecycleResult(operation="offload", namespace=namespace, shard=shard, skipped="unsupported")

    def recall(
        self, namespace: str | None, shard: int | None = None, limit: int | None = None, *, dry_run: bool = False
    ) -> LifecycleResult:
        """Tiered storage (DESIGN §3 "Tiers"): one bounded, resumable recall step of a namespace (or
        one shard; ``None``: every namespace): local copies of offloaded segments whose local copy
        was dropped (tier ``remote``) are downloaded, verified against their manifest (size and
        SHA-256), fsynced and made local again (tier ``both``), oldest first, at most ``limit`` per
        call (default 16), so reads are served from local disk again.

        Only the segments the policy keeps local are recalled: every one when
        ``remote_storage_enabled`` is off, else those ``local_retention_ms`` /
        ``local_retention_bytes`` keep (so the next offload step does not drop them again);
        ``skipped="policy"`` when a named namespace has remote-only segments but its policy keeps
        them all remote. Refused (``RecallDiskError``, ``recall_disk_limit``) when disk use would
        pass ``disk_max_used_ratio`` (or ``disk_warning_ratio``). Counts ``segments_recalled`` and
        ``bytes_recalled`` (:data:`RECALL_COUNTS`); a dry run downloads nothing and says what would
        come back: every candidate, ``limit`` ignored (``more`` false), up to the first that the disk
        would refuse (none: ``RecallDiskError`` as the real call). ``skipped="unsupported"`` for
        adapters without segment files.
        """
        if namespace is not None:
            self.get_namespace(namespace)
        return LifecycleResult(operation="recall", namespace=namespace, shard=shard, skipped="unsupported")

    @abc.abstractmethod
    def check_disk(self) -> DiskStatus:
        """Measure disk use now and update the disk-full flag.

        Above ``disk_warning_ratio`` appends raise ``DiskFullError`` (nothing is
        written) until a later measurement finds use back at or below it. What
        "used" counts (every file under the data directory with a quota, the
        filesystem's used bytes without) and the pending ``.deleted`` bytes are
        described on :class:`DiskStatus`.
        """

    @abc.abstractmethod
    def reclaim(
        self,
        namespace: str | None,
        shard: int | None = None,
        limit: int | None = None,
        *,
        manual: bool = False,
        dry_run: bool = False,
    ) -> LifecycleResult:
        """Layer 3: space reclamation of a namespace (or one shard).

        Sealed segments whose deadline has passed (every record expired) are
        deleted whole, their index ranges removed by range deletes; sealed
        segments whose dead fraction exceeds ``reclaim_dead_ratio`` are
        rewritten without their dead and expired records (offsets never
        change); then RocksDB is asked to compact the deleted ranges. At most
        ``limit`` segments per call (default 16), paced by
        ``reclaim_bytes_per_s`` and, outside ``off_peak_hours``, urgent work
        only (as :meth:`expire_scan`) unless ``manual``.
        """

    @abc.abstractmethod
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
        """Key compaction of a namespace (or one shard), DESIGN §3 (Kafka's log cleaner).

        Only for ``cleanup_policy`` containing ``compact`` (else ``skipped="policy"``).
        The cleanable range runs from the shard's first dirty offset (its
        persisted cleaner checkpoint) to the first uncleanable offset (the
        active segment, or the first segment with records newer than
        ``min_compaction_lag_ms``). A shard is cleaned when its dirty ratio
        exceeds ``min_cleanable_dirty_ratio`` or its dirty data is older than
        ``max_compaction_lag_ms`` (else ``skipped="not_due"``), or always with
        ``manual``. A key-hash → latest-offset map is built over the dirty
        range within ``map_budget_bytes`` (default the node's
        ``compaction_map_budget_bytes``), never more: a budget below the smallest
        map (``storage_engine.policies.keymap_size.MIN_MAP_BUDGET_BYTES``, one key) is
        refused with ``InvalidArgumentError``, and a one-key budget cleans one key
        per round. When the map fills, what it covers is
        cleaned and another round continues (at most ``max_rounds``, then
        ``more``). A record is kept iff it is the latest for its key (or past
        the map), not expired, and, if a tombstone, its delete horizon (first
        clean time + ``delete_retention_ms``) has not passed. Offsets never
        change; sealed segments are rewritten crash-safely, index entries of
        removed records deleted. ``dry_run`` changes nothing and reports what
        a compaction would do. Outside ``off_peak_hours`` only ``manual`` runs.
        """

    @abc.abstractmethod
    def compaction_estimate(self, namespace: str, shard: int | None = None) -> CompactionEstimate:
        """Dry run of a manual :meth:`compact`: ``bytes_before``, ``bytes_after``,
        ``reclaimable_bytes``, ``records_removable`` (and ``rounds``), what
        ``compact(..., manual=True)`` with the default budget would reclaim, with every
        non-empty active segment counted as the sealed segment it becomes when it rolls (an
        append or the idle-segment rule rolls it; an idle-due one is sealed by compact itself):
        ``active_records_removable`` / ``active_bytes_reclaimable`` are the part that waits for
        that roll, and the figures less that part are exactly what ``compact(..., manual=True)``
        reports now."""

    @abc.abstractmethod
    def compact_with_plan(self, namespace: str, shard: int, keep: dict[int, list[int]]) -> LifecycleResult:
        """Rewrite sealed segments of one shard keeping only the offsets an external plan
        (Spark) names: ``keep`` maps a segment's base offset to the offsets to keep in it;
        segments not named are untouched. No key map is built; with a plan computed by the
        keep rule the result equals :meth:`compact`'s. Raises ``InvalidArgumentError`` for
        a base that is not a sealed segment."""

    @abc.abstractmethod
    def ttl_index_info(self, namespace: str) -> dict[str, object]:
        """What an external writer of TTL-index entries for ``namespace`` needs (for
        :meth:`ingest_ttl_index`): ``{"namespace", "ns_id", "shards", "end_offsets"}``. Keys are
        ``expire_at u64 | ns_id u32 | shard u16 | offset u64``, big-endian
        (:func:`storage_engine.segment.index_keys.ttl_key`); the memory adapter has no namespace
        ids and answers ``ns_id`` 0."""

    @abc.abstractmethod
    def ttl_import_dir(self) -> Path:
        """The directory :meth:`ingest_ttl_index` reads files from: ``<data_dir>/import/``
        (:mod:`storage_engine.formats.ttl_import`), created when missing. ``InvalidArgumentError`` on
        ``file`` for an engine without a data directory (the memory adapter may have none)."""

    @abc.abstractmethod
    def ingest_ttl_index(self, namespace: str, file: str) -> dict[str, object]:
        """Bulk-load TTL-index entries for ``namespace`` from the SST file named ``file`` in
        :meth:`ttl_import_dir`: a bare file name, never a path, so that no caller can make the
        engine read (or echo) a file elsewhere on its host. The file is copied, never moved or
        changed.

        The file is an SST written with ``rocksdict.SstFileWriter`` in raw mode, keys ascending:
        key ``ttl_key(expire_at, ns_id, shard, offset)``, value ``ttl_value(size, flags)`` or
        ``b""`` (size and key/tag flags unknown: the TTL scan reads the record). Every key is
        validated first: a key of another namespace id, a shard outside ``0..shards-1``, an offset
        at or past the shard's end or a malformed key or value refuses the whole file with
        ``ForeignTTLEntryError`` (code ``foreign_ttl_entry``, HTTP 400) and nothing is loaded; a
        bad name, a missing file or one that is not an SST file is ``InvalidArgumentError`` on
        ``file`` (whose message never quotes the file's bytes or RocksDB's error). Entries for
        records already gone (below the log start) or dead are left out. The rest become visible
        to the next :meth:`expire_scan` at once and atomically (RocksDB ``ingest_external_file``
        for the log adapters; the memory adapter inserts them, keeping an offset's existing entry).

        Returns ``{"namespace", "file", "entries", "ingested", "skipped", "min_expire_at",
        "max_expire_at", "duration_ms"}``. An entry only makes the scan mark its record dead (and
        reclamation then remove it); reads decide visibility from the record's own
        ``expire_at`` and the namespace TTL.
        """

    @abc.abstractmethod
    def compact_dirtiest(
        self, limit_shards: int = 1, *, map_budget_bytes: int | None = None, dry_run: bool = False
    ) -> LifecycleResult:
        """One step of the background cleaner: compact the ``limit_shards`` due shards of
        compacted namespaces with the highest dirty ratio first (``skipped="not_due"`` when
        none is due; ``more`` while other shards are due); ``namespace``/``shard`` name the shard
        when one was chosen. A dry run compacts nothing and reports every due shard's compaction
        dry run at once (``limit_shards`` ignored), what the real steps do until none is due."""

    @abc.abstractmethod
    def set_node_policy(self, policy: NodePolicy) -> NodePolicy:
        """Replace the node policy (validated); returns it.

        Adapters with a data directory persist it there atomically before it
        takes effect, with a version one higher than the last
        (:meth:`node_policy_version`); the same values again change nothing and
        keep the version. Precedence at open: the persisted policy, once one was
        set, over ``EngineConfig.node_policy``, over the built-in defaults. The
        memory adapter keeps it in memory only.
        """

    @abc.abstractmethod
    def node_policy(self) -> NodePolicy:
        """The node policy in effect."""

    @abc.abstractmethod
    def node_policy_version(self) -> int:
        """The version of the node policy in effect: 0 until one is set, then +1 per change
        (persisted with the policy, so it survives a restart)."""

    @abc.abstractmethod
    def verify(self, namespace: str) -> VerifyReport:
        """Check that a namespace's indexes and data agree.

        No index entry (key, tag, TTL, sparse offset) for a missing or dead
        record; no live record missing from the tag or TTL index; every key
        entry points at the latest live record with its key; dead records are
        expired; live counts equal records minus dead ones. Reads the whole
        namespace: a diagnostic, not a hot path.
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Flush and fsync everything, stop workers, release files. Idempotent."""

    # -- subscriptions (Pulsar semantics, DESIGN §2 and §3) ------------------------------------
    # Implemented once for every store by storage_engine.subscriptions (parts of the Engine).

    @abc.abstractmethod
    def create_subscription(self, namespace: str, name: str, *, initial: str = "earliest") -> SubscriptionInfo:
        """Create a named subscription with a cursor per shard.

        ``initial="earliest"`` starts every cursor at -1 (everything stored is
        backlog); ``"latest"`` at ``end_offset − 1`` (only new records). The
        ``segment`` and ``rocksdb`` adapters persist cursors durably (one
        WriteBatch, synced per durability mode) and recover them on open.
        Raises ``SubscriptionExistsError`` for a name in use and
        ``InvalidArgumentError`` for a bad name (``[A-Za-z0-9._-]{1,200}``) or
        ``initial``.
        """

    @abc.abstractmethod
    def delete_subscription(self, namespace: str, name: str) -> None:
        """Delete a subscription and its cursors (``UnknownSubscriptionError`` if absent)."""

    @abc.abstractmethod
    def list_subscriptions(self, namespace: str) -> list[SubscriptionInfo]:
        """The namespace's subscriptions, sorted by name."""

    @abc.abstractmethod
    def read_subscription(
        self, namespace: str, name: str, shard: int, max_records: int = 500, max_bytes: int = 1 << 20
    ) -> ReadResult:
        """Read the visible records after the cursor (from ``cursor + 1``, clamped to the log
        start). Reading does not move the cursor: :meth:`acknowledge` does."""

    @abc.abstractmethod
    def acknowledge(self, namespace: str, name: str, shard: int, offset: int) -> int:
        """Cumulative acknowledgement: move the mark-delete position forward to ``offset``.

        Never backward (an older offset changes nothing). ``offset`` past the
        last offset (``≥ end_offset``) or below -1 raises ``InvalidArgumentError``
        naming it. Returns the mark-delete position after the call.
        """

    @abc.abstractmethod
    def seek_subscription(
        self, namespace: str, name: str, shard: int, position: int | None = None, *, timestamp: int | None = None
    ) -> int:
        """Reset a cursor (Pulsar's ``resetCursor``): unlike :meth:`acknowledge` it may move BACKWARD.

        Give exactly one of ``position`` (the new mark-delete position, ``-1 ≤ position <
        end_offset``; -1 = redeliver everything stored, ``end_offset − 1`` = skip everything)
        and ``timestamp`` (ms: the cursor goes just before the first record at or after it, or
        to ``end_offset − 1`` when there is none). Persisted like an acknowledgement. Raises
        ``InvalidArgumentError`` naming ``position``/``timestamp`` for a bad value, and
        ``AlreadyRunningError`` while a message-TTL check runs on the subscription. Returns
        the mark-delete position after the call.
        """

    @abc.abstractmethod
    def backlog(self, namespace: str, name: str | None = None) -> list[BacklogInfo]:
        """Backlog per subscription (one, or all sorted by name) and shard."""

    @abc.abstractmethod
    def expire_subscriptions(
        self,
        namespace: str | None,
        shard: int | None = None,
        *,
        name: str | None = None,
        position: int | None = None,
        dry_run: bool = False,
    ) -> LifecycleResult:
        """Message TTL (Pulsar): move cursors forward past records that expired unacknowledged.

        For each subscription (or ``name``) and shard, the cursor moves past
        the leading unacknowledged records whose effective expiry
        (``min(expire_at, timestamp + ttl_ms)``) is ≤ now; a sealed segment
        last written ``ttl_ms`` ago or more is expired whole, even if producer
        timestamps lie in the future. With ``position`` (one ``shard``
        required) the cursor moves to that offset instead. A cursor never
        moves backward nor past the end (a position ≥ ``end_offset`` changes
        nothing). At most one run per subscription at a time: a concurrent
        call for the same subscription raises ``AlreadyRunningError``.
        ``cursors_moved`` counts the cursors moved and ``messages_acknowledged`` the messages
        they expired (:class:`LifecycleResult`); one call does all of it (``more`` is false).
        ``namespace`` ``None``: every namespace, one that is running already passed over. A dry
        run moves no cursor (and takes no subscription's turn) and reports the same counts.
        """

    @abc.abstractmethod
    def enforce_backlog_quota(self, namespace: str, *, dry_run: bool = False) -> LifecycleResult:
        """The periodic backlog-quota check. With ``consumer_backlog_eviction`` the slowest
        cursors move forward until each backlog is ≤ 90 % of the limit (``cursors_moved``, and
        ``messages_acknowledged``: the messages evicted); other policies act on the append path
        only (nothing moves). No quota: skipped. A dry run moves the cursors of a copy and
        reports the same counts."""
