"""Segment files as a reader outside the node sees them (the node's ``segment-files`` route).

Only the node may open its data directory's RocksDB, so a process that reads segment files itself
(a Spark executor, a tool) learns from the node which files to read and what they hold: per shard,
the sealed segments (and, when asked, the active one) with their base and last offsets, the file
relative to the data directory, the bytes to read, the state, the record count, and the offsets
the TTL scan marked dead that are still in the file (they stay until reclaim or compaction
rewrites it). The reader decodes the file with the engine's own reader
(:func:`storage_engine.segment.segment.iter_file_batches`) and leaves the dead offsets out, so it
never holds a record the engine counts as dead.

Pure Python (no RocksDB, no HTTP): the node builds these (:mod:`storage_engine.adapters.listing`),
:class:`~storage_engine.node_api.client.NodeClient` reads them back, and Spark executors import
:class:`DeadOffsets`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from storage_engine.api import SegmentState, SegmentTier

# ``state`` values a listing takes: sealed segments only, or every live one (the active one too)
LIST_SEALED = "sealed"
LIST_ALL = "all"
LIST_STATES = (LIST_SEALED, LIST_ALL)

DeadRanges = tuple[tuple[int, int], ...]  # inclusive ``(first, last)`` offset ranges, ascending, disjoint


def dead_ranges(offsets: Iterable[int]) -> DeadRanges:
    """Ascending offsets as inclusive ``(first, last)`` runs: ``[3, 4, 5, 9]`` → ``((3, 5), (9, 9))``."""
    runs: list[tuple[int, int]] = []
    for offset in offsets:
        if runs and offset == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], offset)
        else:
            runs.append((offset, offset))
    return tuple(runs)


class DeadOffsets:
    """Membership in :data:`DeadRanges` (a binary search; no set of every offset is built)."""

    __slots__ = ("_firsts", "_lasts")

    def __init__(self, ranges: Iterable[Sequence[int]]) -> None:
        pairs = sorted((int(r[0]), int(r[1])) for r in ranges)
        self._firsts = [first for first, _ in pairs]
        self._lasts = [last for _, last in pairs]

    def __contains__(self, offset: object) -> bool:
        if not isinstance(offset, int):
            return False
        i = bisect_right(self._firsts, offset) - 1
        return i >= 0 and offset <= self._lasts[i]

    def __len__(self) -> int:
        return sum(last - first + 1 for first, last in zip(self._firsts, self._lasts, strict=True))

    def __bool__(self) -> bool:
        return bool(self._firsts)


@dataclass(frozen=True, slots=True)
class SegmentFileInfo:
    """One segment's file as the node lists it for a reader outside the node.

    ``file`` is relative to the node's data directory (``segments/<ns>/<shard>/<base>.log``,
    ``/``-separated); ``size_bytes`` is how many bytes of it to read: the whole file of a sealed
    segment, the committed bytes of the active one (appends go past them, never into them).
    ``dead`` lists the offsets of this segment marked dead and still in the file, as inclusive
    ranges (``None`` when the listing was asked without them).

    Tiered storage: ``tier`` is where the segment's bytes are (``local``, ``both``: local file and
    object, ``remote``: only the object — ``file`` then names where the local copy was, and is
    gone); ``object_key`` is its data object's key relative to the object store ``tier_uri`` (no
    credentials in it), ``None`` for a segment not in the store. The object is the segment file
    byte for byte, so the same reader decodes it.
    """

    namespace: str
    shard: int
    base_offset: int
    last_offset: int
    file: str
    size_bytes: int
    state: SegmentState
    record_count: int
    dead: DeadRanges | None = ()
    tier: SegmentTier = SegmentTier.LOCAL
    object_key: str | None = None
    tier_uri: str | None = None

    @property
    def in_object_store(self) -> bool:
        return self.object_key is not None

    @property
    def sealed(self) -> bool:
        return self.state is not SegmentState.ACTIVE

    @property
    def dead_records(self) -> int:
        return sum(last - first + 1 for first, last in self.dead or ())

    def to_dict(self) -> dict[str, object]:
        return {
            "namespace": self.namespace,
            "shard": self.shard,
            "base_offset": self.base_offset,
            "last_offset": self.last_offset,
            "file": self.file,
            "size_bytes": self.size_bytes,
            "state": self.state.value,
            "record_count": self.record_count,
            "dead": None if self.dead is None else [[first, last] for first, last in self.dead],
            "dead_records": None if self.dead is None else self.dead_records,
            "tier": self.tier.value,
            "object_key": self.object_key,
            "tier_uri": self.tier_uri,
        }

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> SegmentFileInfo:
        dead = body.get("dead")
        return cls(
            namespace=str(body["namespace"]),
            shard=int(body["shard"]),
            base_offset=int(body["base_offset"]),
            last_offset=int(body["last_offset"]),
            file=str(body["file"]),
            size_bytes=int(body["size_bytes"]),
            state=SegmentState(body["state"]),
            record_count=int(body["record_count"]),
            dead=None if dead is None else tuple((int(first), int(last)) for first, last in dead),
            tier=SegmentTier(body.get("tier") or SegmentTier.LOCAL.value),  # an older node's: local
            object_key=None if body.get("object_key") is None else str(body["object_key"]),
            tier_uri=None if body.get("tier_uri") is None else str(body["tier_uri"]),
        )


@dataclass(frozen=True, slots=True)
class SegmentFilePage:
    """A page of a shard's segment files in base-offset order; ``next_after`` is the cursor of the
    next page (``after=next_after``), ``None`` on the last one."""

    namespace: str
    shard: int
    segments: tuple[SegmentFileInfo, ...]
    next_after: int | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "namespace": self.namespace,
            "shard": self.shard,
            "segments": [s.to_dict() for s in self.segments],
            "next_after": self.next_after,
        }

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> SegmentFilePage:
        after = body.get("next_after")
        return cls(
            namespace=str(body["namespace"]),
            shard=int(body["shard"]),
            segments=tuple(SegmentFileInfo.from_dict(s) for s in body["segments"]),
            next_after=None if after is None else int(after),
        )


__all__ = [
    "LIST_ALL",
    "LIST_SEALED",
    "LIST_STATES",
    "DeadOffsets",
    "DeadRanges",
    "SegmentFileInfo",
    "SegmentFilePage",
    "dead_ranges",
]
