"""Verification: the index/data agreement rules every store's ``verify`` applies, and the
namespace report that sums its shards (DESIGN §3 "Verification")."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from storage_engine.api import Record, VerifyReport
from storage_engine.lifecycle.shards import LifecycleShard
from storage_engine.rules.expiry import is_expired

MAX_PROBLEMS = 100  # problems a report lists (it counts them all)


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


def verify_shards(namespace: str, shards: Sequence[LifecycleShard], now: int) -> VerifyReport:
    """Every shard's ``verify`` added up into the namespace's report."""
    records = entries = 0
    problems: list[str] = []
    for s in shards:
        r, e, p = s.verify(now)
        records += r
        entries += e
        problems += p
    return VerifyReport(namespace, records, entries, len(problems), tuple(problems[:MAX_PROBLEMS]))
