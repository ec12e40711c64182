"""What reclamation's rewrite of a segment would do, exactly (its dry run, DESIGN §3 "Dry runs").

A real rewrite (``rewrite_segment``) first marks the segment's expired records dead (counted in
``expired_records``), then writes the segment again without its dead records; its
``bytes_reclaimed`` is what the store saves, which is more than the records' encoded sizes (a
batch emptied loses its header, RocksDB saves each record's key) and which only the store can say
(``removed_bytes``, the same answer a compaction dry run uses). A segment left with no record is
dropped whole instead. This module takes those decisions from the segment's records without
changing anything: one read of the segment, as the rewrite itself does.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Any, Protocol, cast

from storage_engine.api import SegmentInfo
from storage_engine.formats.codec import ATTR_EXPIRE
from storage_engine.rules.expiry import is_expired
from storage_engine.rules.figures import SegmentFacts
from storage_engine.rules.work import ShardWork, would_drop


class RewritableShard(Protocol):
    """What a dry rewrite reads of a shard (every store's shard has it, as key compaction does)."""

    def compaction_columns(self, base: int) -> Iterator[tuple[Any, Sequence[int]]]: ...
    def removed_bytes(self, info: SegmentInfo, remove: Collection[int]) -> int: ...


def dead_counts(shard: object) -> dict[int, int]:
    """Base offset → records marked dead, of the shard's sealed segments (metadata only)."""
    facts: Sequence[SegmentFacts] = shard.due_facts()[1]()  # type: ignore[attr-defined]
    return {f.base_offset: f.record_count - f.live_count for f in facts}


def would_rewrite(shard: object, seg: SegmentInfo, ttl_ms: int | None, now: int, dead: int) -> ShardWork:
    """The work of reclamation rewriting ``seg`` (``dead`` of its records already marked dead) now."""
    s = cast(RewritableShard, shard)
    gone: list[int] = []
    for cols, _sizes in s.compaction_columns(seg.base_offset):
        for i, offset in enumerate(cols.offsets):
            expire_at = cols.expire_ats[i] if cols.attrs[i] & ATTR_EXPIRE else None
            if is_expired(cols.timestamps[i], expire_at, ttl_ms, now):
                gone.append(offset)
    # Records marked dead before their deadline (a bulk-loaded TTL entry) go too: the figures count them.
    removed = max(len(gone), seg.expired_records)
    newly_dead = max(0, removed - dead)
    if removed >= seg.record_count:  # nothing would remain: the segment is dropped whole
        work = would_drop([seg])
        work.expired_records = newly_dead
        return work
    if not removed:
        return ShardWork()
    return ShardWork(
        expired_records=newly_dead,
        segments_rewritten=1,
        records_removed=removed,
        bytes_reclaimed=s.removed_bytes(seg, gone),
    )
