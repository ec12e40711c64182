"""The typed objects the contract (:mod:`storage_engine.api`) takes and answers: records,
results, segment and shard figures, lifecycle results, disk status, subscriptions.

They cross every boundary unchanged: the node serialises them field by field
(:mod:`storage_engine.wire`), the client rebuilds them, the control plane stores and sums
their fields. Each figure is defined once, here.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import ClassVar

from storage_engine.policy import NamespacePolicy

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record as a producer hands it to :meth:`StorageAdapter.append`.

    ``timestamp`` is the producer's time in ms; ``None`` means broker time (the
    engine's clock at append). ``value=None`` is a tombstone. ``expire_at`` is
    an explicit per-record deadline in ms (a producer-set TTL).
    """

    value: bytes | None
    key: bytes | None = None
    timestamp: int | None = None
    tags: tuple[str, ...] = ()
    headers: Headers = ()
    expire_at: int | None = None


@dataclass(frozen=True, slots=True)
class Record:
    """A stored record: a :class:`NewRecord` with its offset and final timestamp."""

    offset: int
    timestamp: int
    value: bytes | None
    key: bytes | None = None
    tags: tuple[str, ...] = ()
    headers: Headers = ()
    expire_at: int | None = None


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Offsets assigned to an appended batch: ``base_offset .. base_offset+count-1``."""

    base_offset: int
    count: int

    @property
    def offsets(self) -> range:
        return range(self.base_offset, self.base_offset + self.count)


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Records returned by a read, with the shard's bounds at read time.

    ``next_offset`` is where the next read should start: one past the last
    returned record, or the requested offset (clamped to the next stored
    record) when nothing was returned.
    """

    records: tuple[Record, ...]
    next_offset: int
    log_start_offset: int
    end_offset: int


class SegmentState(enum.StrEnum):
    ACTIVE = "active"
    SEALED = "sealed"
    DELETING = "deleting"
    DELETED = "deleted"
    OFFLOADED = "offloaded"


class SegmentTier(enum.StrEnum):
    """Where a sealed segment's bytes are (tiered storage, DESIGN §3 "Tiers"): only on the
    node's disk, on disk and in the object store (uploaded and verified), or only in the
    object store (the local copy went past local retention; reads fetch ranges of it)."""

    LOCAL = "local"
    BOTH = "both"
    REMOTE = "remote"


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """Metadata and figures of one segment (DESIGN §2, §3 "Figures"). ``last_offset`` is -1 when empty.

    ``record_count`` is the records stored (a rewrite removes some);
    ``expired_records`` / ``expired_bytes`` the stored records that are
    expired at the time of the call (effective expiry passed, or marked dead)
    and their bytes (``size_bytes`` when every record is expired, else the
    encoded sizes of the expired ones; :mod:`storage_engine.figures`);
    ``live_count`` = ``record_count − expired_records``, what a reader can
    still get. ``deadline`` is when every record will have expired, with the
    namespace's ``ttl_ms`` taken into account (``None``: some record never
    expires). ``min_expire_at`` / ``max_expire_at`` bound the explicit
    ``expire_at`` values (``None`` when no record has one); ``has_unbounded``
    is true when any record lacks one. ``size_bytes`` is the bytes the segment
    occupies in its store. Adapters without files (``rocksdb``, ``memory``)
    report logical segments with the same rolling rules so the catalog looks
    the same.
    """

    namespace: str
    shard: int
    base_offset: int
    last_offset: int
    record_count: int
    live_count: int
    size_bytes: int
    min_timestamp: int | None
    max_timestamp: int | None
    max_expire_at: int | None
    has_unbounded: bool
    state: SegmentState
    created_at: int
    modified_at: int
    expired_records: int = 0
    expired_bytes: int = 0
    deadline: int | None = None
    min_expire_at: int | None = None
    first_timestamp: int | None = None  # the first record's timestamp: a segment's age for rolling (None when empty)
    tier: SegmentTier = SegmentTier.LOCAL  # where its bytes are; ``state`` stays sealed in the object store


@dataclass(frozen=True, slots=True)
class ShardStats:
    """Bounds, sizes and expired figures of one shard: the sums of its segments' figures.

    ``expired_records`` / ``expired_bytes`` count what is expired but not yet
    reclaimed, exactly as :class:`SegmentInfo` defines them, over every
    segment (the active one included). ``live_count`` = ``record_count −
    expired_records`` (what reads return); ``expired_ratio`` is
    ``expired_records / record_count`` and ``expired_bytes_ratio``
    ``expired_bytes / size_bytes`` (0 when empty).

    Where the stored bytes are (tiered storage, DESIGN §3 "Tiers"), split so that the parts add up:
    ``local_bytes`` the bytes of segments with a local file (tiers ``local`` and ``both``, the
    active segment included: what the node's disk holds), ``remote_only_bytes`` the bytes of
    segments only in the object store (tier ``remote``: the local copy dropped). A segment in both
    places counts once, as local. So ``size_bytes == local_bytes + remote_only_bytes`` always: the
    three come from the same segments at the same moment (:func:`tier_split`), and every sum above
    a shard keeps the identity.
    """

    namespace: str
    shard: int
    log_start_offset: int
    end_offset: int
    record_count: int
    live_count: int
    size_bytes: int
    segment_count: int
    expired_records: int = 0
    expired_bytes: int = 0
    expired_ratio: float = 0.0
    expired_bytes_ratio: float = 0.0
    local_bytes: int = 0
    remote_only_bytes: int = 0


def tier_split(segments: Sequence[SegmentInfo]) -> tuple[int, int]:
    """``(local_bytes, remote_only_bytes)`` of ``segments`` (see :class:`ShardStats`): the one definition
    of where stored bytes are; the two add up to the segments' ``size_bytes``."""
    remote_only = sum(s.size_bytes for s in segments if s.tier is SegmentTier.REMOTE)
    return sum(s.size_bytes for s in segments) - remote_only, remote_only


def shard_stats_of(
    namespace: str, shard: int, log_start_offset: int, end_offset: int, segments: Sequence[SegmentInfo]
) -> ShardStats:
    """A shard's stats from its segments' figures (the one place they are summed)."""
    records = sum(s.record_count for s in segments)
    size = sum(s.size_bytes for s in segments)
    expired = sum(s.expired_records for s in segments)
    expired_bytes = sum(s.expired_bytes for s in segments)
    local, remote_only = tier_split(segments)
    return ShardStats(
        namespace=namespace,
        shard=shard,
        log_start_offset=log_start_offset,
        end_offset=end_offset,
        record_count=records,
        live_count=records - expired,
        size_bytes=size,
        segment_count=len(segments),
        expired_records=expired,
        expired_bytes=expired_bytes,
        expired_ratio=expired / records if records else 0.0,
        expired_bytes_ratio=expired_bytes / size if size else 0.0,
        local_bytes=local,
        remote_only_bytes=remote_only,
    )


@dataclass(frozen=True, slots=True)
class NamespaceInfo:
    name: str
    shards: int
    policy: NamespacePolicy
    created_at: int


@dataclass(frozen=True, slots=True)
class ShardFailure:
    """A shard the engine stopped serving (a damaged sealed segment, a failed write): its reads and
    appends raise until the engine is reopened, which recovers it from its files. ``code`` is the
    failure's error code (``corrupt_segment``, ``write_failed``), never its paths or text."""

    namespace: str
    shard: int
    code: str


@dataclass(slots=True)
class EngineStats:
    """Everything the engine counts, for ``/v1/stats`` and ``/metrics``."""

    adapter: str
    namespaces: int
    shards: tuple[ShardStats, ...]
    counters: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LifecycleResult:
    """What one bounded lifecycle call did (every lifecycle call returns one).

    Plain ints, floats and strings only, so it serialises to JSON as is
    (:meth:`to_dict`). ``more`` is true when the call stopped at its limit
    (``limit``, ``max_delete_per_scan``, ``delete_batch_max``, a pacing
    budget) with work left: call again. ``skipped`` names why nothing was
    attempted (``"off_peak"``, ``"not_due"``, ``"policy"``), else ``None``.

    - ``scanned``: TTL-index entries, records or segments examined;
    - ``expired_records``: records newly marked dead (layer 2 and read checks);
    - ``index_entries_deleted``: key, tag and TTL index entries deleted;
    - ``segments_deleted`` / ``segments_rewritten``: whole segments dropped /
      rewritten without their dead records; ``records_removed`` the records
      that left the store through either;
    - ``bytes_reclaimed``: the bytes the call actually freed, for every call
      that deletes (retention, reclamation, file cleaning, the deadline-driven
      sweeps): what its drops and rewrites took out of the store, minus what
      is still on disk as ``.deleted`` files (``file_delete_delay_ms``, or held
      by a reader), plus the ``.deleted`` files of earlier calls it removed
      (a file's bytes count as freed by the call that removes it, once);
      stores without files free what they drop at once;
      ``pending_delete_bytes``: the bytes of the ``.deleted`` files of the
      shards the call worked on (the node's, for file cleaning) still on disk
      after it (:func:`storage_engine.work.count_freed`; a dry run: what the
      real call would leave);
    - ``files_removed``: ``.deleted`` files removed for good by this call;
    - ``forced_deletes``: segments deleted by disk pressure although not expired;
    - ``rolled``: active segments sealed by this call, so that what they hold
      could be treated as sealed: an idle one (see the lifecycle calls of
      :class:`StorageAdapter`), or, for retention, one rolled so every old
      segment could go; ``log_start_offset``: the shard's new log start when one
      shard was named, else ``None``;
    - compaction: ``scanned`` counts records read, ``records_written`` the
      records kept in rewritten segments, ``bytes_before`` / ``bytes_after``
      the stored bytes of the shards before and after (estimated by a dry
      run), ``rounds`` the key-map rounds (one per map fill);
    - offload (tiered storage): ``segments_offloaded`` / ``bytes_offloaded`` the
      sealed segments uploaded and verified by the call and their bytes,
      ``local_copies_dropped`` / ``local_bytes_dropped`` the local files of
      offloaded segments removed past local retention;
    - recall (tiered storage): ``segments_recalled`` / ``bytes_recalled`` the offloaded segments
      whose local copies were downloaded, verified and made local again (a dry run: would be);
    - subscriptions (message TTL ``expire_subscriptions``, backlog-quota eviction
      ``enforce_backlog_quota``): ``cursors_moved`` the subscription cursors (one per
      subscription and shard) the call moved forward, each counted once however far or how often
      it moved; ``messages_acknowledged`` the stored offsets those moves acknowledged on the
      consumers' behalf (from the first unacknowledged offset, never below the log start, up to the
      new cursor), i.e. the backlog messages they skipped. Nothing is deleted or marked dead by a
      cursor move, so ``expired_records`` stays 0 for these calls.

    A dry run (``dry_run=True``) reports every one of these figures as what the real call, repeated
    while ``more``, would then report, summed (DESIGN §3 "Dry runs").

    ``namespaces_changed``: the namespaces the call changed (a dry run: would change), sorted, so a
    node-wide sweep says whom its counts belong to. A namespace changed when one of
    :attr:`CHANGE_COUNTS` is above 0 for it (records expired or removed, segments deleted, rewritten or
    moved between tiers, files removed, cursors moved; scanning and rolling alone change nothing). A call
    on one namespace names it by itself (``__post_init__``); the node-wide expiry scan, the sweeps over
    every namespace, the deadline-driven sweeps, offload and recall collect the names of theirs. Node-wide
    file cleaning (a node-level operation) leaves it empty.
    """

    operation: str
    namespace: str | None = None
    shard: int | None = None
    scanned: int = 0
    expired_records: int = 0
    index_entries_deleted: int = 0
    segments_deleted: int = 0
    segments_rewritten: int = 0
    records_removed: int = 0
    bytes_reclaimed: int = 0
    files_removed: int = 0
    forced_deletes: int = 0
    rolled: int = 0
    duration_ms: float = 0.0
    more: bool = False
    skipped: str | None = None
    log_start_offset: int | None = None
    records_written: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    rounds: int = 0
    pending_delete_bytes: int = 0
    segments_offloaded: int = 0
    bytes_offloaded: int = 0
    local_copies_dropped: int = 0
    local_bytes_dropped: int = 0
    segments_recalled: int = 0
    bytes_recalled: int = 0
    cursors_moved: int = 0
    messages_acknowledged: int = 0
    namespaces_changed: tuple[str, ...] = ()

    CHANGE_COUNTS: ClassVar[tuple[str, ...]] = (
        "expired_records",
        "index_entries_deleted",
        "segments_deleted",
        "segments_rewritten",
        "records_removed",
        "bytes_reclaimed",
        "files_removed",
        "forced_deletes",
        "segments_offloaded",
        "local_copies_dropped",
        "segments_recalled",
        "cursors_moved",
    )

    def __post_init__(self) -> None:
        # One shape whatever the caller passed (a set of a sweep, a JSON list of a node's answer), and a call on
        # one namespace names it when it changed it, so only node-wide sweeps collect names themselves.
        changed = set(self.namespaces_changed)
        if self.namespace is not None and any(getattr(self, name) for name in self.CHANGE_COUNTS):
            changed.add(self.namespace)
        object.__setattr__(self, "namespaces_changed", tuple(sorted(changed)))

    def to_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class CompactionEstimate:
    """What compaction would do with the data stored now (a dry run; nothing changes): the
    stored bytes before and after, what it would reclaim and remove, and its key-map rounds.
    The active segment counts as the sealed segment it becomes when it rolls (the idle-segment
    rule or an append rolls it, and compaction then cleans it), so that data waiting in it is
    not left out; ``active_records_removable`` / ``active_bytes_reclaimable`` are the part of
    ``records_removable`` / ``reclaimable_bytes`` that waits for that roll (records in the active
    segment, and older ones only its keys supersede): the rest is exactly what a manual
    :meth:`StorageAdapter.compact` removes now. Estimates of several shards or nodes add up
    (``+``); ``shard`` is ``None`` for a sum."""

    namespace: str
    shard: int | None = None
    bytes_before: int = 0
    bytes_after: int = 0
    reclaimable_bytes: int = 0
    records_removable: int = 0
    rounds: int = 0
    active_records_removable: int = 0
    active_bytes_reclaimable: int = 0

    def __add__(self, other: CompactionEstimate) -> CompactionEstimate:
        counts = [f.name for f in fields(self) if f.name not in ("namespace", "shard")]  # every figure adds up
        summed = {name: getattr(self, name) + getattr(other, name) for name in counts}
        return CompactionEstimate(namespace=self.namespace, shard=None, **summed)

    def to_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class NextDue:
    """When each kind of node-wide lifecycle sweep next has work (:meth:`StorageAdapter.next_due`).

    ``due`` maps ``expire-scan``, ``reclaim`` and ``retention`` to the earliest due time in ms
    (at or before ``now``: due now; ``None``: nothing stored makes it due); ``shards`` is how
    many shards were looked at and ``recomputed`` how many of them had their sealed segments
    read again (changed since the previous call).
    """

    now: int
    due: dict[str, int | None]
    shards: int = 0
    recomputed: int = 0
    duration_ms: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# The counts of a LifecycleResult that add up over steps, namespaces or runs (jobs, sweeps, task runs).
LIFECYCLE_COUNTS = (
    "scanned",
    "expired_records",
    "index_entries_deleted",
    "segments_deleted",
    "segments_rewritten",
    "records_removed",
    "bytes_reclaimed",
    "files_removed",
    "forced_deletes",
    "rolled",
)
# The further counts of a compaction result that add up the same way.
COMPACTION_COUNTS = ("records_written", "bytes_before", "bytes_after", "rounds")
# The further counts of an offload result (tiered storage) that add up the same way.
OFFLOAD_COUNTS = ("segments_offloaded", "bytes_offloaded", "local_copies_dropped", "local_bytes_dropped")
# The further counts of a recall result (tiered storage) that add up the same way.
RECALL_COUNTS = ("segments_recalled", "bytes_recalled")
# The further counts of a subscription step (message TTL, backlog-quota eviction) that add up the same way.
SUBSCRIPTION_COUNTS = ("cursors_moved", "messages_acknowledged")


@dataclass(frozen=True, slots=True)
class DiskStatus:
    """Disk use of the data directory against the node policy's watermarks.

    What ``used_bytes`` counts depends on ``source``:

    - ``"quota"`` (``EngineConfig.disk_capacity_bytes`` set): the apparent size
      of every file under the data directory — segment files, ``.deleted``
      files waiting for removal, the RocksDB index store (SST, WAL, MANIFEST,
      its logs), checkpoints, ``trash/`` and the small marker files — against
      that capacity;
    - ``"filesystem"``: the used bytes of the filesystem holding the data
      directory (``statvfs``: every file on it, this node's or not), against
      used + the bytes available to the node (``df``'s ``Use%``);
    - ``"memory"``: stored bytes of the memory adapter against the quota
      (ratio 0 without one).

    ``pending_delete_bytes`` is the part of ``used_bytes`` held by segment
    files already deleted from the log (renamed ``.deleted``) and waiting for
    ``file_delete_delay_ms`` or a reader; always 0 for adapters without files.
    The flags are strict comparisons of ``used_ratio``: ``used_ratio >
    disk_max_used_ratio`` etc.; ``disk_full`` means appends are rejected with
    ``DiskFullError``. The file cleaner decides on the use *without* pending
    files (it purges them first above a watermark), so ``clean_forcibly`` can
    be true while no live file needs to go.
    """

    used_bytes: int
    capacity_bytes: int
    used_ratio: float
    source: str
    over_max_used: bool
    clean_forcibly: bool
    disk_full: bool
    pending_delete_bytes: int = 0

    def to_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Whether a namespace's indexes and data agree (:meth:`StorageAdapter.verify`).

    ``problems`` lists the first disagreements found (at most 100), each a
    short text naming shard, index and offset; ``problem_count`` counts all.
    """

    namespace: str
    records_checked: int
    index_entries_checked: int
    problem_count: int
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.problem_count == 0

    def to_dict(self) -> dict[str, object]:
        return {
            "namespace": self.namespace,
            "ok": self.ok,
            "records_checked": self.records_checked,
            "index_entries_checked": self.index_entries_checked,
            "problem_count": self.problem_count,
            "problems": list(self.problems),
        }


@dataclass(frozen=True, slots=True)
class SubscriptionInfo:
    """A named subscription of a namespace (DESIGN §2, Pulsar semantics).

    ``cursors[shard]`` is the shard's mark-delete position: every offset at or
    below it is acknowledged (-1: nothing acknowledged).
    """

    namespace: str
    name: str
    cursors: tuple[int, ...]
    created_at: int

    def to_dict(self) -> dict[str, object]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "cursors": list(self.cursors),
            "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class BacklogInfo:
    """A subscription's backlog on one shard (DESIGN §2 and §3 "Figures").

    ``messages`` is the offset distance ``end_offset − cursor − 1`` counting
    only stored offsets (at or above the log start); ``live_messages`` the
    records after the cursor that a consumer will actually receive (stored,
    not removed by compaction, not expired); ``bytes`` the stored bytes of the
    offsets after the cursor (exact for whole segments, prorated by offset for
    the segment holding the cursor); ``age_ms`` how old the oldest
    unacknowledged visible record is (0 when there is none).
    """

    namespace: str
    subscription: str
    shard: int
    cursor: int
    end_offset: int
    messages: int
    bytes: int
    age_ms: int
    live_messages: int = 0

    def to_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}
