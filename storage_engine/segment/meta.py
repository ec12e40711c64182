"""Per-segment metadata (DESIGN §2) and the rolling rule shared by every log adapter.

A :class:`SegmentMeta` is the value stored in the index store's ``segments``
column family, keyed ``ns_id | shard | base_offset``. Value layout (125 bytes,
big-endian; version 4 values, 117 bytes, lack ``stale_generation`` (read as 0);
version 3 values, 108 bytes, also the two tier fields (read as local);
version 2 values, 100 bytes, also ``min_expire_at``; version 1 values, 91 bytes,
the last five)::

    pos size type field
      0    1 u8   format version (5)
      1    8 u64  base_offset
      9    8 i64  last_offset         −1 while empty
     17    8 u64  record_count
     25    8 u64  live_count
     33    8 u64  size_bytes
     41    8 i64  first_timestamp     −1 while empty; starts the roll clock
     49    8 i64  min_timestamp       −1 while empty
     57    8 i64  max_timestamp       −1 while empty
     65    8 i64  max_expire_at       −1 when no record has an explicit one
     73    1 u8   has_unbounded
     74    1 u8   state               index into SegmentState
     75    8 i64  created_at
     83    8 i64  modified_at
     91    8 u64  dead_bytes          record bytes marked dead, not yet reclaimed
     99    1 u8   content flags       codec FLAG_HAS_EXPIRE/KEYS/TAGS of any batch
                                      (0xFF: unknown, from a version 1 value)
    100    8 i64  min_expire_at       smallest explicit expire_at, −1 when none
                                      (0 from older values that have one: unknown,
                                      so the figures read the segment to be exact)
    108    1 u8   tier                :class:`TierState`: 0 local, 1 uploading,
                                      2 both (uploaded and verified, local copy
                                      kept), 3 remote (local copy dropped)
    109    8 u64  tier_generation     names the segment's objects in the object
                                      store (0 while local; see storage_engine.tier)
    117    8 u64  stale_generation    objects under this generation are not (or no
                                      longer) the segment's: a rewrite's upload in
                                      flight or abandoned, or the generation a
                                      rewrite replaced; deleted by the next tier
                                      step, then 0 (storage_engine.tier.rewrite)

``state`` DELETING marks a segment whose deletion has begun: it is no longer
part of the log, and opening the shard finishes the deletion. A segment in the
object store keeps ``state`` SEALED (every lifecycle rule treats it as sealed:
retention and TTL drops delete its objects too); ``tier`` says where its bytes are.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from storage_engine.api import SegmentInfo, SegmentState, SegmentTier
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.figures import ExpiredFigures, SegmentFacts
from storage_engine.rules.rolling import should_roll

_STRUCT = struct.Struct(">BQqQQQqqqqBBqqQBqBQQ")
_STRUCT_V4 = struct.Struct(">BQqQQQqqqqBBqqQBqBQ")
_STRUCT_V3 = struct.Struct(">BQqQQQqqqqBBqqQBq")
_STRUCT_V2 = struct.Struct(">BQqQQQqqqqBBqqQB")
_STRUCT_V1 = struct.Struct(">BQqQQQqqqqBBqq")
_VERSION = 5
UNKNOWN_FLAGS = 0xFF
_STATES = tuple(SegmentState)


class TierState(enum.IntEnum):
    """Where a sealed segment's bytes are (the ``tier`` byte of the metadata).

    ``UPLOADING``: an offload chose ``tier_generation`` and may have written objects under it;
    the local file is the only copy that counts (a restarted offload uploads again under the
    same generation, so a crash leaves no stray objects). ``BOTH``: the objects are uploaded
    and verified; the local file may go. ``REMOTE``: only the objects remain.
    """

    LOCAL = 0
    UPLOADING = 1
    BOTH = 2
    REMOTE = 3

    @property
    def public(self) -> SegmentTier:
        """The tier as :class:`~storage_engine.api.SegmentInfo` reports it."""
        if self is TierState.BOTH:
            return SegmentTier.BOTH
        return SegmentTier.REMOTE if self is TierState.REMOTE else SegmentTier.LOCAL

    @property
    def uploaded(self) -> bool:
        """The objects are complete and verified (the local copy may go)."""
        return self in (TierState.BOTH, TierState.REMOTE)


@dataclass(slots=True)
class SegmentMeta:
    base_offset: int
    created_at: int
    last_offset: int = -1
    record_count: int = 0
    live_count: int = 0
    size_bytes: int = 0
    first_timestamp: int = -1
    min_timestamp: int = -1
    max_timestamp: int = -1
    max_expire_at: int = -1
    has_unbounded: bool = False
    state: SegmentState = SegmentState.ACTIVE
    modified_at: int = 0
    dead_bytes: int = 0
    content_flags: int = 0
    min_expire_at: int = -1
    tier: TierState = TierState.LOCAL
    tier_generation: int = 0
    stale_generation: int = 0

    @property
    def next_offset(self) -> int:
        return self.base_offset if self.last_offset < 0 else self.last_offset + 1

    def should_roll(self, policy: NamespacePolicy, batch_bytes: int, batch_max_timestamp: int) -> bool:
        """Whether a batch must go to a new segment instead of this one (the shared rule)."""
        first = self.first_timestamp if self.record_count else None
        return should_roll(policy, self.record_count, self.size_bytes, first, batch_bytes, batch_max_timestamp)

    def account(
        self,
        *,
        count: int,
        nbytes: int,
        last_offset: int,
        first_timestamp: int,
        min_timestamp: int,
        max_timestamp: int,
        max_expire_at: int,
        has_unbounded: bool,
        now: int,
        flags: int = 0,
        min_expire_at: int = -1,
    ) -> None:
        """Add one appended batch (``min_expire_at`` −1: no explicit expire_at in it)."""
        if self.record_count == 0:
            self.first_timestamp = first_timestamp
            self.min_timestamp = min_timestamp
            self.max_timestamp = max_timestamp
        else:
            self.min_timestamp = min(self.min_timestamp, min_timestamp)
            self.max_timestamp = max(self.max_timestamp, max_timestamp)
        self.record_count += count
        self.live_count += count
        self.size_bytes += nbytes
        self.last_offset = last_offset
        self.max_expire_at = max(self.max_expire_at, max_expire_at)
        if min_expire_at >= 0:
            self.min_expire_at = min_expire_at if self.min_expire_at < 0 else min(self.min_expire_at, min_expire_at)
        self.has_unbounded = self.has_unbounded or has_unbounded
        self.content_flags |= flags
        self.modified_at = now

    def pack(self) -> bytes:
        return _STRUCT.pack(
            _VERSION,
            self.base_offset,
            self.last_offset,
            self.record_count,
            self.live_count,
            self.size_bytes,
            self.first_timestamp,
            self.min_timestamp,
            self.max_timestamp,
            self.max_expire_at,
            self.has_unbounded,
            _STATES.index(self.state),
            self.created_at,
            self.modified_at,
            self.dead_bytes,
            self.content_flags,
            self.min_expire_at,
            int(self.tier),
            self.tier_generation,
            self.stale_generation,
        )

    @classmethod
    def unpack(cls, raw: bytes) -> SegmentMeta:
        if len(raw) == _STRUCT_V1.size:
            raw = raw + struct.pack(">QB", 0, UNKNOWN_FLAGS)
        if len(raw) == _STRUCT_V2.size:
            has_explicit = _STRUCT_V2.unpack(raw)[9] >= 0  # max_expire_at
            raw = bytes([3]) + raw[1:] + struct.pack(">q", 0 if has_explicit else -1)
        if len(raw) == _STRUCT_V3.size:
            raw = bytes([4]) + raw[1:] + struct.pack(">BQ", TierState.LOCAL, 0)
        if len(raw) == _STRUCT_V4.size:
            raw = bytes([_VERSION]) + raw[1:] + struct.pack(">Q", 0)
        (
            version,
            base,
            last,
            count,
            live,
            size,
            first_ts,
            min_ts,
            max_ts,
            max_exp,
            unbounded,
            state,
            created,
            modified,
            dead_bytes,
            content_flags,
            min_exp,
            tier,
            generation,
            stale,
        ) = _STRUCT.unpack(raw)
        if version != _VERSION:
            raise ValueError(f"unsupported segment metadata version {version}")
        return cls(
            base, created, last, count, live, size, first_ts, min_ts, max_ts, max_exp, bool(unbounded),
            _STATES[state], modified, dead_bytes, content_flags, min_exp, TierState(tier), generation, stale,
        )  # fmt: skip

    def facts(self) -> SegmentFacts:
        empty = self.record_count == 0
        return SegmentFacts(
            base_offset=self.base_offset,
            last_offset=self.last_offset,
            record_count=self.record_count,
            live_count=self.live_count,
            size_bytes=self.size_bytes,
            dead_bytes=self.dead_bytes,
            min_timestamp=None if empty else self.min_timestamp,
            max_timestamp=None if empty else self.max_timestamp,
            min_expire_at=None if self.min_expire_at < 0 else self.min_expire_at,
            max_expire_at=None if self.max_expire_at < 0 else self.max_expire_at,
            has_unbounded=self.has_unbounded,
        )

    def to_info(self, namespace: str, shard: int, figures: ExpiredFigures) -> SegmentInfo:
        """The public view of this segment with its expired figures (see :mod:`storage_engine.rules.figures`)."""
        empty = self.record_count == 0
        return SegmentInfo(
            namespace=namespace,
            shard=shard,
            base_offset=self.base_offset,
            last_offset=self.last_offset,
            record_count=self.record_count,
            live_count=self.record_count - figures.records,
            size_bytes=self.size_bytes,
            min_timestamp=None if empty else self.min_timestamp,
            max_timestamp=None if empty else self.max_timestamp,
            max_expire_at=None if self.max_expire_at < 0 else self.max_expire_at,
            has_unbounded=self.has_unbounded,
            state=self.state,
            created_at=self.created_at,
            modified_at=self.modified_at,
            expired_records=figures.records,
            expired_bytes=figures.bytes,
            deadline=figures.deadline,
            min_expire_at=None if self.min_expire_at < 0 else self.min_expire_at,
            first_timestamp=None if empty else self.first_timestamp,
            tier=self.tier.public,
        )
