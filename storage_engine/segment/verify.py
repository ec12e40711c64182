"""Verification of one shard's index part against its records (what ``verify`` reports).

Every key, tag, TTL and dead entry is checked against the records it names
(:func:`storage_engine.lifecycle.check_indexes`, shared with the memory store), every
``times`` entry must point inside ``[log start - 1, end offset)`` and the checkpoint
must stand at the end offset. The sparse ``offsets`` index of segment files is
checked by the store (:meth:`~storage_engine.segment.shard.ShardBase._verify_storage`).
"""

from __future__ import annotations

import bisect

from storage_engine.api import Record
from storage_engine.lifecycle import check_indexes
from storage_engine.segment.meta import SegmentMeta
from storage_engine.segment.shard_index import ShardIndex


def verify_index(
    route: str,
    index: ShardIndex,
    metas: list[SegmentMeta],
    records: dict[int, Record],
    start: int,
    end: int,
    ttl_ms: int | None,
    now: int,
) -> tuple[int, list[str]]:
    """Check the index entries of the shard ``route`` against its ``records`` (by offset) in the
    segments ``metas``, its log starting at ``start`` and ending at ``end``; returns how many
    entries were checked and the problems found."""
    store = index.store
    prefix = index.prefix
    bases = [m.base_offset for m in metas]

    def segment_of(offset: int) -> int | None:
        i = bisect.bisect_right(bases, offset) - 1
        return bases[i] if i >= 0 and offset <= metas[i].last_offset else None

    checked, problems = check_indexes(
        route,
        records,
        segment_of,
        {m.base_offset: (m.record_count, m.live_count) for m in metas},
        set(store.dead_offsets(prefix)),
        store.key_entries(prefix),
        store.tag_entries(prefix),
        store.ttl_entries_of(index.ns_id, index.shard),
        ttl_ms,
        now,
        store.dead_deadlines(prefix),
    )
    for ts, offset in store.time_entries(prefix):
        checked += 1
        if not start - 1 <= offset < end:
            problems.append(f"{route} times {ts} -> {offset} outside [{start}, {end})")
    cp = store.checkpoint(prefix)
    if cp is not None and cp.next_offset != end:
        problems.append(f"{route} checkpoint at {cp.next_offset}, end offset {end}")
    return checked, problems
