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
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

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


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """Metadata of one segment (DESIGN §2). ``last_offset`` is -1 when empty.

    ``max_expire_at`` is the largest explicit ``expire_at`` in the segment (or
    ``None``); ``has_unbounded`` is true when any record lacks an explicit
    ``expire_at``. ``size_bytes`` is the bytes the segment occupies in its
    store. Adapters without files (``rocksdb``, ``memory``) report logical
    segments with the same rolling rules so the catalog looks the same.
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


@dataclass(frozen=True, slots=True)
class ShardStats:
    namespace: str
    shard: int
    log_start_offset: int
    end_offset: int
    record_count: int
    live_count: int
    size_bytes: int
    segment_count: int


@dataclass(frozen=True, slots=True)
class NamespaceInfo:
    name: str
    shards: int
    policy: NamespacePolicy
    created_at: int


@dataclass(slots=True)
class EngineStats:
    """Everything the engine counts, for ``/v1/stats`` and ``/metrics``."""

    adapter: str
    namespaces: int
    shards: tuple[ShardStats, ...]
    counters: dict[str, float] = field(default_factory=dict)


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

    @abc.abstractmethod
    def close(self) -> None:
        """Flush and fsync everything, stop workers, release files. Idempotent."""
