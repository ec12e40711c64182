"""The typed objects the contract (:mod:`storage_engine.api`) takes and answers: records,
results, segment and shard figures, disk status, subscriptions, and (from
:mod:`storage_engine.results`) the lifecycle calls' answers.

They cross every boundary unchanged: the node serialises them field by field
(:mod:`storage_engine.node_api.wire`), the client rebuilds them, the control plane stores and sums
their fields. Each figure is defined once, here.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from storage_engine.policies.policy import NamespacePolicy

# The lifecycle answers live in storage_engine.results, re-exported (`X as X`) so every typed object imports from here.
from storage_engine.results import COMPACTION_COUNTS as COMPACTION_COUNTS
from storage_engine.results import LIFECYCLE_COUNTS as LIFECYCLE_COUNTS
from storage_engine.results import OFFLOAD_COUNTS as OFFLOAD_COUNTS
from storage_engine.results import RECALL_COUNTS as RECALL_COUNTS
from storage_engine.results import SUBSCRIPTION_COUNTS as SUBSCRIPTION_COUNTS
from storage_engine.results import CompactionEstimate as CompactionEstimate
from storage_engine.results import LifecycleResult as LifecycleResult
from storage_engine.results import NextDue as NextDue

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
    encoded sizes of the expired ones; :mod:`storage_engine.rules.figures`);
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
