"""The read semantics of the contract, once for every store (DESIGN §2 "Reads").

Bounds (an offset below the log start or past the end is refused, the end itself is
an empty read), Kafka-style progress (the first record always goes out, whatever
``max_bytes`` says), TTL visibility (a record past its effective expiry is hidden when
the namespace checks at read time, and its index entries are queued for clean-up),
dead marks (a record a bulk-loaded TTL entry killed is gone though its fields do not
say so), and the key, tag and time lookups. A store provides a :class:`ReadableShard`:
how a shard is held stable while read, and its records and index lookups.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from storage_engine.api import ReadResult, Record
from storage_engine.errors import OffsetOutOfRangeError, SegmentDeletedError
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.expiry import is_expired
from storage_engine.rules.validation import check_read_offset, check_tag_offset


class ReadView(Protocol):
    """A shard's bounds as one read sees them."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def end_offset(self) -> int: ...


class ReadableShard(Protocol):
    """What the engine's reads need from a store's shard."""

    @property
    def policy(self) -> NamespacePolicy: ...

    def reading(self) -> AbstractContextManager[ReadView]:
        """Hold the shard stable for one read (raises for a deleted namespace or a closed engine)."""
        ...

    def current_bounds(self) -> tuple[int, int]:
        """(log start, end) now: after a segment was deleted under a slow reader."""
        ...

    def scan_live(self, view: ReadView, start: int, expired_before: int | None) -> Iterator[tuple[Record, int]]:
        """Records at or after ``start`` not marked dead, in offset order, with their sizes.
        With ``expired_before`` (now), whole segments whose deadline has passed may be skipped."""
        ...

    def first_at_or_after(self, view: ReadView, timestamp: int) -> int | None:
        """The offset of the first record with a timestamp ≥ ``timestamp`` (``None``: none)."""
        ...

    def key_offset(self, key: bytes) -> int | None:
        """The offset the key index holds for ``key``."""
        ...

    def tag_offsets(self, tag: str, start: int, end: int, limit: int) -> list[int]:
        """Up to ``limit`` ascending offsets in ``[start, end)`` the tag index holds for ``tag``."""
        ...

    def fetch(self, view: ReadView, offsets: Sequence[int]) -> list[Record]:
        """The records at ``offsets`` (ascending) that exist."""
        ...

    def record_at(self, offset: int) -> Record | None: ...


Hide = Callable[[Record], None]
"""Called for an expired record a read hid (the engine queues its index clean-up)."""


def _expired(r: Record, policy: NamespacePolicy, now: int) -> bool:
    return policy.read_time_check and is_expired(r.timestamp, r.expire_at, policy.ttl_ms, now)


def read_records(
    shard: ReadableShard,
    namespace: str,
    index: int,
    offset: int,
    max_records: int,
    max_bytes: int,
    now: int,
    hide: Hide,
) -> ReadResult:
    policy = shard.policy
    out: list[Record] = []
    size = 0
    with shard.reading() as view:
        check_read_offset(namespace, index, offset, view.log_start_offset, view.end_offset)
        try:
            for r, n in shard.scan_live(view, offset, now if policy.read_time_check else None):
                if _expired(r, policy, now):
                    hide(r)
                    continue
                if out and size + n > max_bytes:
                    break
                out.append(r)
                size += n
                if len(out) >= max_records:
                    break
        except SegmentDeletedError:  # removed under a slow reader: the log start moved past it
            start, end = shard.current_bounds()
            raise OffsetOutOfRangeError(namespace, index, offset, start, end) from None
        # Nothing returned means nothing stored up to the end: the consumer is caught up.
        next_offset = out[-1].offset + 1 if out else view.end_offset
        return ReadResult(tuple(out), next_offset, view.log_start_offset, view.end_offset)


def offset_for_timestamp(shard: ReadableShard, timestamp: int) -> int | None:
    with shard.reading() as view:
        return shard.first_at_or_after(view, timestamp)


def read_key(shard: ReadableShard, key: bytes, now: int, hide: Hide) -> Record | None:
    with shard.reading() as view:
        offset = shard.key_offset(key)
        if offset is None or offset < view.log_start_offset:
            return None
        r = shard.record_at(offset)
    if r is None or r.key != key:
        return None
    if _expired(r, shard.policy, now):
        hide(r)
        return None
    return r


def read_tag(
    shard: ReadableShard, namespace: str, index: int, tag: str, offset: int, max_records: int, now: int, hide: Hide
) -> ReadResult:
    policy = shard.policy
    out: list[Record] = []
    with shard.reading() as view:
        check_tag_offset(namespace, index, offset, view.log_start_offset, view.end_offset)
        cursor = max(offset, view.log_start_offset)
        while len(out) < max_records:
            wanted = shard.tag_offsets(tag, cursor, view.end_offset, max_records - len(out))
            if not wanted:
                break
            for r in shard.fetch(view, wanted):
                if _expired(r, policy, now):
                    hide(r)
                else:
                    out.append(r)
            cursor = wanted[-1] + 1
        next_offset = out[-1].offset + 1 if out else view.end_offset
        return ReadResult(tuple(out), next_offset, view.log_start_offset, view.end_offset)
