"""Key compaction (DESIGN §3): Kafka's log cleaner and RocketMQ's compaction topic.

For ``cleanup_policy`` containing ``compact`` the engine keeps, per key, only
the latest record. The rules live here, once for every adapter:

- **Cleanable range.** Each shard persists a *cleaner checkpoint*: the first
  dirty offset (everything below it was cleaned) and the history of cleaning
  passes (``(end offset, clean time)``), atomically (one RocksDB put for the
  log adapters). The range runs from the first dirty offset up to the first
  uncleanable offset: the active segment's base, or the base of the first
  sealed segment holding records newer than ``min_compaction_lag_ms``.
- **When.** ``dirty_bytes / (clean_bytes + dirty_bytes) >
  min_cleanable_dirty_ratio`` (segments wholly below the first dirty offset
  are clean, the others up to the first uncleanable offset dirty), or dirty
  data older than ``max_compaction_lag_ms``. ``manual`` runs a pass anyway.
  A step first seals an idle active segment (DESIGN §3 "Idle shards",
  :func:`storage_engine.rolling.idle_segment_due`, which for a compacted
  namespace includes an age past ``max_compaction_lag_ms``), so dirty data of
  a shard nobody writes to is cleaned too; a dry run counts that segment as
  sealed without sealing it (:func:`sealed_view`).
- **Key map.** :class:`~storage_engine.keymap.KeyMap` maps a key to the latest
  offset seen, within a memory budget in bytes
  (``NodePolicy.compaction_map_budget_bytes`` or per call): an open-addressing
  table (double hashing, a prime number of slots, filled to ``LOAD_FACTOR``),
  ``SLOT_BYTES`` = 16 bytes a slot: 96 bits of two seeded hash chains over the
  key (Kafka keeps a 16-byte MD5; a false "superseded" needs two keys of one
  round to collide, about n²/2⁹⁷ for n keys) and the offset as a 32-bit delta
  from the round's first offset. Beside the table, 1/32 of the budget is a
  bitmap of the round's offsets: when a key comes again while the map fills,
  its previous offset's bit is set, so a record within the round is known
  superseded without its key (records below the round are looked up). A round
  fills the map over the dirty range from the first dirty offset; when it is
  full, or the round spans the bitmap's bits (budget / 4 offsets), the round
  cleans what it covers and the next round continues from there.
- **Vectorised.** Segment files are read a chunk of batches at a time into
  numpy columns (:mod:`storage_engine.columnar`: record positions, offsets,
  attributes, keys 8 bytes at a time; no value, tag or header is decoded);
  keys are hashed, put into the map and looked up a chunk at a time
  (:mod:`storage_engine.keymap`), the keep rule is a mask over a chunk
  (:mod:`storage_engine.keep_rule`), and a batch losing records is rebuilt
  by a row gather of the kept records' bytes. How segments of each adapter
  are read is :mod:`storage_engine.compaction_io`. The other adapters hand over
  :class:`~storage_engine.api.Record` objects; their keys are hashed the same
  way (:func:`storage_engine.keymap.hash_keys`).
- **Keep rule.** Within ``[log start, map end)`` a record is kept iff it is
  the latest for its key (records past the map end and records without a key
  are kept), it is not expired (:mod:`storage_engine.expiry`), and, if a
  tombstone, its delete horizon (the time its offset was first cleaned +
  ``delete_retention_ms``) has not passed.
- **Rewrite.** Through each adapter's ``rewrite_segment(base, now,
  remove=rule)``: the rule (:data:`storage_engine.lifecycle.RemovalRule`) is
  asked per batch while the segment streams through, so nothing of a segment
  is collected first. The ``segment`` adapter's crash-safe ``.cleaned`` →
  ``.swap`` → ``.log`` swap copies unchanged batches as they are and rebuilds
  the others from their encoded records (only the header and offset deltas
  change); the ``rocksdb`` adapter deletes a chunk per WriteBatch followed by
  ``compact_range``; the memory adapter removes slots. Offsets never change; a
  segment left without records is dropped whole.

Memory: the map (table and bitmap, :attr:`KeyMap.memory_bytes`) stays within
the budget: its slots are the largest prime ≤ (budget − bitmap) / 16, the
bitmap being budget/32 but at least 64 bytes. A budget below
``MIN_MAP_BUDGET_BYTES`` (:mod:`storage_engine.keymap_size`: a one-key table
and the minimal bitmap) is refused, never enlarged; a budget that fits one key
cleans one key per round. The map is allocated once per
compaction call and reused by every round. The fixed overhead beyond it does
not grow with the segment or the record count: the rewrite's read chunk
(1 MiB; a larger batch is read whole) and the columns of the batches in it
(~0.1–0.2 KB per record while a chunk is decided), the map's insertions of at
most ``FILL_KEYS`` keys (and at most an eighth of its capacity) with their
temporaries (~100 bytes a key), the 256 KiB output buffer, a chunk of at most
``UNINDEX_CHUNK`` expired records, and the new sparse offset index of the
segment being rewritten (16 bytes per ``index_interval_bytes``: bounded by
``segment_bytes``, 256 KiB for 64 MiB). ``MAP_OVERHEAD_BYTES`` (4 MiB) is the
stated bound for read chunks of ~1 MiB; the tests check it with tracemalloc
(a 60k-record segment with a 64 KiB map; numpy arrays are traced too).
Two things are not constant: index deletions of removed records that carry
tags or a deadline, or are their key's latest entry (a tombstone past its
horizon), ride in the swap's single WriteBatch (crash safety needs them in
one write; none for plain superseded records), and a dry run keeps one bit
per offset of the segments it would change (what earlier simulated rounds
removed).
"""

from __future__ import annotations

import abc
import struct
import time
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from storage_engine.api import LifecycleResult, SegmentInfo, SegmentState
from storage_engine.cleaning import in_off_peak
from storage_engine.codec import ATTR_EXPIRE
from storage_engine.compaction_io import CompactableShard, reclaimable_bytes
from storage_engine.errors import InvalidArgumentError
from storage_engine.expiry import is_expired
from storage_engine.keep_rule import CleaningRule
from storage_engine.keymap import KeyMap
from storage_engine.keymap_size import MIN_MAP_BUDGET_BYTES
from storage_engine.lifecycle import (
    KEEP,
    REMOVE,
    LifecycleMixin,
    RemovalRule,
    ShardWork,
)
from storage_engine.policy import NamespacePolicy
from storage_engine.rolling import sealed_view
from storage_engine.validation import check_shard_arg, select_shards

MAP_OVERHEAD_BYTES = 4 * 1024 * 1024  # stated bound on what compaction holds beyond the map
MAX_PASSES = 64  # cleaning passes remembered per shard (older ones merge, keeping tombstones longer)
DEFAULT_MAX_ROUNDS = 1_000
FILL_KEYS = 16_384  # keys one insertion into the map takes at most (temporaries ~100 B a key)
_STATE_HEAD = struct.Struct(">BQH")
_PASS = struct.Struct(">QQ")


class OffsetBits:
    """A set of offsets of one segment as a bitmap (a dry run's simulated removals)."""

    __slots__ = ("_bits", "_n", "base")

    def __init__(self, base: int, last: int) -> None:
        self.base = base
        self._bits = bytearray((last - base) // 8 + 1)
        self._n = 0

    def add(self, offset: int) -> None:
        i = offset - self.base
        mask = 1 << (i & 7)
        if not self._bits[i >> 3] & mask:
            self._bits[i >> 3] |= mask
            self._n += 1

    def __contains__(self, offset: object) -> bool:
        if not isinstance(offset, int):
            return False
        i = offset - self.base
        return 0 <= i < 8 * len(self._bits) and bool(self._bits[i >> 3] & (1 << (i & 7)))

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[int]:
        for j, byte in enumerate(self._bits):
            if byte:
                for b in range(8):
                    if byte & (1 << b):
                        yield self.base + 8 * j + b


@dataclass(slots=True)
class CleanerState:
    """A shard's cleaner checkpoint: first dirty offset and the cleaning passes so far.

    ``passes`` are ``(end offset, clean time)`` with ascending ends: a record at
    offset ``o`` was first cleaned at the time of the first pass whose end is
    above ``o`` (its tombstone's delete horizon starts there).
    """

    first_dirty: int = 0
    passes: list[tuple[int, int]] = field(default_factory=list)

    def clean_time(self, offset: int) -> int | None:
        i = bisect_right([e for e, _ in self.passes], offset)
        return self.passes[i][1] if i < len(self.passes) else None

    def record_pass(self, end: int, now: int) -> None:
        self.first_dirty = max(self.first_dirty, end)
        if self.passes and end <= self.passes[-1][0]:
            return
        self.passes.append((end, now))
        while len(self.passes) > MAX_PASSES:  # merge the two oldest: the later time wins (safe)
            (_, _), (e2, t2) = self.passes[0], self.passes[1]
            self.passes[0:2] = [(e2, t2)]

    def pack(self) -> bytes:
        return _STATE_HEAD.pack(1, self.first_dirty, len(self.passes)) + b"".join(_PASS.pack(*p) for p in self.passes)

    @classmethod
    def unpack(cls, raw: bytes | None) -> CleanerState:
        if not raw:
            return cls()
        version, first_dirty, n = _STATE_HEAD.unpack_from(raw)
        if version != 1:
            raise ValueError(f"unsupported cleaner checkpoint version {version}")
        passes = [_PASS.unpack_from(raw, _STATE_HEAD.size + i * _PASS.size) for i in range(n)]
        return cls(first_dirty, [(int(e), int(t)) for e, t in passes])


@dataclass(frozen=True, slots=True)
class CleanableRange:
    """Where a shard may be cleaned now and whether it is due (DESIGN §3)."""

    log_start: int
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int
    dirty_min_timestamp: int | None
    segments: tuple[SegmentInfo, ...]  # the sealed segments below the first uncleanable offset

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    def lag_due(self, policy: NamespacePolicy, now: int) -> bool:
        lag = policy.max_compaction_lag_ms
        return (
            lag is not None
            and self.dirty_bytes > 0
            and self.dirty_min_timestamp is not None
            and now - self.dirty_min_timestamp > lag
        )

    def due(self, policy: NamespacePolicy, now: int) -> bool:
        if self.dirty_bytes <= 0 or self.first_dirty >= self.first_uncleanable:
            return False
        return self.dirty_ratio > policy.min_cleanable_dirty_ratio or self.lag_due(policy, now)


def cleanable_range(
    segments: Sequence[SegmentInfo], state: CleanerState, policy: NamespacePolicy, now: int
) -> CleanableRange:
    """The cleanable range of a shard from its segments (oldest first, active last)."""
    log_start = segments[0].base_offset if segments else 0
    first_dirty = max(state.first_dirty, log_start)
    # With every segment sealed (a dry run's view of a step that seals an idle active
    # segment) the range runs to the end offset.
    first_uncleanable = max(segments[-1].base_offset, segments[-1].last_offset + 1) if segments else 0
    cleanable: list[SegmentInfo] = []
    for seg in segments:
        if seg.state is not SegmentState.SEALED:
            first_uncleanable = seg.base_offset
            break
        if seg.max_timestamp is not None and now - seg.max_timestamp < policy.min_compaction_lag_ms:
            first_uncleanable = seg.base_offset
            break
        cleanable.append(seg)
    first_dirty = min(first_dirty, first_uncleanable)
    clean = dirty = 0
    dirty_min: int | None = None
    for seg in cleanable:
        if seg.last_offset < first_dirty:
            clean += seg.size_bytes
        else:
            dirty += seg.size_bytes
            if seg.min_timestamp is not None and seg.record_count:
                dirty_min = seg.min_timestamp if dirty_min is None else min(dirty_min, seg.min_timestamp)
    return CleanableRange(log_start, first_dirty, first_uncleanable, clean, dirty, dirty_min, tuple(cleanable))


def cleaning_rule(
    kmap: KeyMap, map_end: int, first_dirty: int, state: CleanerState, policy: NamespacePolicy, now: int
) -> CleaningRule:
    """The keep rule of a round (:mod:`storage_engine.keep_rule`) as the rule
    ``rewrite_segment`` asks per batch."""
    return CleaningRule(kmap, map_end, first_dirty, list(state.passes), policy, now)


def _keep_only(wanted: frozenset[int]) -> RemovalRule:
    return lambda cols: [KEEP if o in wanted else REMOVE for o in cols.offsets]


def load_state(shard: CompactableShard) -> CleanerState:
    return CleanerState.unpack(shard.cleaner_checkpoint())


def save_state(shard: CompactableShard, state: CleanerState) -> None:
    """Persist the cleaner checkpoint atomically (one synced RocksDB write for the log adapters)."""
    shard.save_cleaner_checkpoint(state.pack())


# -- the engine calls ------------------------------------------------------------------------------
@dataclass(slots=True)
class _Totals:
    scanned: int = 0
    records_written: int = 0
    records_removed: int = 0
    bytes_reclaimed: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    segments_rewritten: int = 0
    segments_deleted: int = 0
    index_entries_deleted: int = 0
    expired_records: int = 0
    rounds: int = 0
    rolled: int = 0
    more: bool = False

    def add_work(self, work: ShardWork) -> None:
        self.records_removed += work.records_removed
        self.bytes_reclaimed += work.bytes_reclaimed
        self.segments_rewritten += work.segments_rewritten
        self.segments_deleted += work.segments_deleted
        self.index_entries_deleted += work.index_entries_deleted
        self.expired_records += work.expired_records

    def values(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class CompactionMixin(LifecycleMixin):
    """The compaction calls of the contract (``compact``, ``compaction_estimate``,
    ``compact_with_plan``, ``compact_dirtiest``) over any adapter's shards."""

    @abc.abstractmethod
    def _compaction_namespace(self, name: str) -> tuple[NamespacePolicy, Sequence[CompactableShard]]:
        """The namespace's policy and shards, as :meth:`_lc_namespace` (the same shards, typed
        for compaction)."""

    def _compactable(self, namespace: str, shard: int | None) -> tuple[NamespacePolicy, list[CompactableShard]]:
        """The policy and the shards a compaction call names (every one for ``None``)."""
        policy, shards = self._compaction_namespace(namespace)
        return policy, select_shards(namespace, shards, shard)

    def _map_budget(self, map_budget_bytes: int | None) -> int:
        """The key-map budget of a call: as given (never enlarged), or the node's."""
        if map_budget_bytes is None:
            return self._node_policy.compaction_map_budget_bytes  # validated ≥ the minimum with the policy
        if isinstance(map_budget_bytes, bool) or not isinstance(map_budget_bytes, int):
            raise InvalidArgumentError("map_budget_bytes", "must be an integer")
        if map_budget_bytes < MIN_MAP_BUDGET_BYTES:
            raise InvalidArgumentError(
                "map_budget_bytes", f"must be ≥ {MIN_MAP_BUDGET_BYTES} (the smallest key map: one key and its bitmap)"
            )
        return map_budget_bytes

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
        t0 = time.perf_counter()
        budget = self._map_budget(map_budget_bytes)
        if max_rounds is not None:
            self._check_limit(max_rounds)
        policy, shards = self._compactable(namespace, shard)
        now = self.clock.now_ms()
        if not policy.compacts:
            return self._result("compact", namespace, shard, t0, skipped="policy")
        if not manual and not dry_run and not in_off_peak(now, self._node_policy):
            return self._result("compact", namespace, shard, t0, skipped="off_peak", more=True)
        totals = _Totals()
        attempted = False
        with self._lifecycle_ops:
            for s in shards:
                attempted |= self._compact_shard(
                    s, policy, now, budget, dry_run, manual, max_rounds or DEFAULT_MAX_ROUNDS, totals
                )
        op = "compact_dry_run" if dry_run else "compact"
        if not attempted:
            return self._result(op, namespace, shard, t0, skipped="not_due", **totals.values())
        result = self._result(op, namespace, shard, t0, **totals.values())
        if not dry_run:
            self._count_compaction(result)
        return result

    def _count_compaction(self, result: LifecycleResult) -> None:
        self.lifecycle_counters.add_many(
            {
                "compaction_runs_total": 1,
                "compaction_bytes_reclaimed_total": result.bytes_reclaimed,
                "compaction_records_removed_total": result.records_removed,
                "compaction_rounds_total": result.rounds,
                "compaction_duration_seconds_total": result.duration_ms / 1000,
            }
        )

    def compaction_estimate(self, namespace: str, shard: int | None = None) -> dict[str, Any]:
        r = self.compact(namespace, shard, dry_run=True, manual=True)
        return {
            "namespace": namespace,
            "shard": shard,
            "bytes_before": r.bytes_before,
            "bytes_after": r.bytes_after,
            "reclaimable_bytes": r.bytes_reclaimed,
            "records_removable": r.records_removed,
            "rounds": r.rounds,
        }

    def _compact_shard(
        self,
        s: CompactableShard,
        policy: NamespacePolicy,
        now: int,
        budget: int,
        dry_run: bool,
        manual: bool,
        max_rounds: int,
        totals: _Totals,
    ) -> bool:
        state = load_state(s)
        if dry_run:
            segments = sealed_view(s.lifecycle_segments(), policy, now)
        else:
            sealed: dict[str, Any] = {}
            segments = self._step_segments(s, policy, now, sealed)
            totals.rolled += sealed.get("rolled", 0)
        rng = cleanable_range(segments, state, policy, now)
        if not manual and not rng.due(policy, now):
            return False
        before = sum(seg.size_bytes for seg in segments)
        totals.bytes_before += before
        removed_sim: dict[int, OffsetBits] = {}  # dry run: what earlier rounds removed, per segment
        first_dirty, end = rng.first_dirty, rng.first_uncleanable
        cleanable = list(rng.segments)
        rounds = 0
        reclaimed = 0
        kmap = KeyMap(budget, first_dirty)
        while True:
            kmap.clear(first_dirty)
            map_end = self._fill_map(s, kmap, cleanable, first_dirty, end, totals)
            rule = cleaning_rule(kmap, map_end, first_dirty, state, policy, now)
            touched = False
            for seg in cleanable:
                if seg.base_offset >= map_end:
                    break
                if dry_run:
                    self._simulate(s, seg, rule, policy, now, removed_sim, totals)
                    continue
                if not self._reclaim_bucket.take(seg.size_bytes) and not manual:
                    totals.more = True
                    break
                work = s.rewrite_segment(seg.base_offset, now, remove=rule)
                totals.scanned += seg.record_count
                if work.records_removed and not work.segments_deleted:
                    totals.records_written += max(0, seg.record_count - work.records_removed)
                reclaimed += work.bytes_reclaimed
                totals.add_work(work)
                touched |= bool(work.segments_rewritten or work.segments_deleted)
            if totals.more:
                break
            rounds += 1
            state.record_pass(map_end, now)
            if not dry_run:
                save_state(s, state)
                if touched:
                    s.compact_deleted()
                by_base = {seg.base_offset: seg for seg in s.lifecycle_segments()}
                cleanable = [by_base[seg.base_offset] for seg in cleanable if seg.base_offset in by_base]
            first_dirty = map_end
            if first_dirty >= end:
                break
            if rounds >= max_rounds:
                totals.more = True
                break
        totals.rounds += rounds
        if dry_run:
            by_base = {seg.base_offset: seg for seg in segments}
            for base, gone in removed_sim.items():
                totals.records_removed += len(gone)
                reclaimed += reclaimable_bytes(s, by_base[base], gone)
            totals.bytes_reclaimed += reclaimed
            totals.bytes_after += before - reclaimed
        else:
            totals.bytes_after += sum(seg.size_bytes for seg in s.lifecycle_segments())
        return True

    @staticmethod
    def _fill_map(
        s: CompactableShard, kmap: KeyMap, cleanable: list[SegmentInfo], first_dirty: int, end: int, totals: _Totals
    ) -> int:
        """Fill ``kmap`` with the keys of ``[first_dirty, end)``; returns the map end: ``end``,
        or the first offset that did not fit. Keys go in ``FILL_KEYS`` at a time (at most
        an eighth of the map's capacity, at least a read chunk's): each insertion's numpy
        steps then advance many keys at once."""
        want = min(FILL_KEYS, max(1, kmap.capacity // 8))
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        held = 0

        def put() -> int:
            nonlocal parts, held
            if len(parts) == 1:
                offsets, h, c = parts[0]
            else:
                offsets, h, c = (np.concatenate([p[i] for p in parts]) for i in range(3))
            parts, held = [], 0
            done = kmap.put_hashes(offsets, h, c)
            return int(offsets[done]) if done < offsets.size else -1

        for seg in cleanable:
            if seg.last_offset < first_dirty:
                continue
            for offsets, h, c, count in s.compaction_key_hashes(seg.base_offset):
                totals.scanned += count
                n = offsets.size
                lo = int(np.searchsorted(offsets, first_dirty)) if n and offsets[0] < first_dirty else 0
                hi = int(np.searchsorted(offsets, end)) if n and offsets[-1] >= end else n
                if hi > lo:
                    parts.append((offsets[lo:hi], h[lo:hi], c[lo:hi]))
                    held += hi - lo
                if held >= want or (hi < n and parts):
                    stop = put()
                    if stop >= 0:
                        return stop
                if hi < n:
                    return end
        if parts:
            stop = put()
            if stop >= 0:
                return stop
        return end

    @staticmethod
    def _simulate(
        s: CompactableShard,
        seg: SegmentInfo,
        rule: RemovalRule,
        policy: NamespacePolicy,
        now: int,
        removed_sim: dict[int, OffsetBits],
        totals: _Totals,
    ) -> None:
        """A dry run's rewrite of ``seg``: what the adapter would remove (expired records and
        what ``rule`` says), added to ``removed_sim``."""
        gone = removed_sim.get(seg.base_offset)
        ttl_ms = policy.ttl_ms
        kept = removed = 0
        new = gone if gone is not None else OffsetBits(seg.base_offset, seg.last_offset)
        for cols, _sizes in s.compaction_columns(seg.base_offset):
            decisions = rule(cols)
            for i, o in enumerate(cols.offsets):
                if gone is not None and o in gone:  # removed by an earlier round
                    continue
                totals.scanned += 1
                expire_at = cols.expire_ats[i] if cols.attrs[i] & ATTR_EXPIRE else None
                if decisions[i] != KEEP or is_expired(cols.timestamps[i], expire_at, ttl_ms, now):
                    new.add(o)
                    removed += 1
                else:
                    kept += 1
        if removed:
            totals.records_written += kept
            removed_sim[seg.base_offset] = new

    def compact_with_plan(self, namespace: str, shard: int, keep: dict[int, list[int]]) -> LifecycleResult:
        t0 = time.perf_counter()
        check_shard_arg(shard)
        if not isinstance(keep, dict):
            raise InvalidArgumentError("keep", "must map segment base offsets to lists of offsets to keep")
        _, shards = self._compactable(namespace, shard)
        s = shards[0]
        now = self.clock.now_ms()
        totals = _Totals()
        with self._lifecycle_ops:
            segments = s.lifecycle_segments()
            by_base = {seg.base_offset: seg for seg in segments}
            active = segments[-1].base_offset
            for base in keep:
                seg = by_base.get(base)
                if seg is None or seg.state is not SegmentState.SEALED or base >= active:
                    raise InvalidArgumentError("keep", f"segment {base} is not a sealed segment of {namespace}/{shard}")
            totals.bytes_before = sum(seg.size_bytes for seg in segments)
            state = load_state(s)
            touched = False
            for base in sorted(keep):
                wanted = frozenset(keep[base])
                seg = by_base[base]
                work = s.rewrite_segment(base, now, remove=_keep_only(wanted))
                totals.scanned += seg.record_count
                if work.records_removed and not work.segments_deleted:
                    totals.records_written += max(0, seg.record_count - work.records_removed)
                totals.add_work(work)
                touched |= bool(work.segments_rewritten or work.segments_deleted)
            if keep:
                state.record_pass(by_base[max(keep)].last_offset + 1, now)
                save_state(s, state)
                totals.rounds = 1
            if touched:
                s.compact_deleted()
            totals.bytes_after = sum(seg.size_bytes for seg in s.lifecycle_segments())
        result = self._result("compact_with_plan", namespace, shard, t0, **totals.values())
        self._count_compaction(result)
        return result

    def compaction_ranges(self, namespace: str) -> list[dict[str, Any]]:
        """Per shard: first dirty and first uncleanable offsets, clean/dirty bytes, ratio, due
        (as the next compaction step would find them: an idle active segment counts as sealed)."""
        policy, shards = self._compactable(namespace, None)
        now = self.clock.now_ms()
        out = []
        for s in shards:
            rng = cleanable_range(sealed_view(s.lifecycle_segments(), policy, now), load_state(s), policy, now)
            out.append(
                {
                    "shard": s.shard,
                    "first_dirty": rng.first_dirty,
                    "first_uncleanable": rng.first_uncleanable,
                    "clean_bytes": rng.clean_bytes,
                    "dirty_bytes": rng.dirty_bytes,
                    "dirty_ratio": rng.dirty_ratio,
                    "due": policy.compacts and rng.due(policy, now),
                }
            )
        return out

    def compact_dirtiest(self, limit_shards: int = 1, *, map_budget_bytes: int | None = None) -> LifecycleResult:
        """The background cleaner's step: among shards of compacted namespaces that are due,
        compact the ``limit_shards`` with the highest dirty ratio (ties: the most dirty bytes)."""
        t0 = time.perf_counter()
        self._check_limit(limit_shards)
        self._map_budget(map_budget_bytes)  # refused before any shard is touched
        now = self.clock.now_ms()
        candidates: list[tuple[float, int, str, int]] = []
        sealed: dict[str, Any] = {}
        with self._lifecycle_ops:
            for info in self._lc_names():
                policy, shards = self._compaction_namespace(info)
                if not policy.compacts:
                    continue
                for s in shards:
                    rng = cleanable_range(self._step_segments(s, policy, now, sealed), load_state(s), policy, now)
                    if rng.due(policy, now):
                        candidates.append((rng.dirty_ratio, rng.dirty_bytes, info, s.shard))
        if not candidates:
            return self._result("compact_dirtiest", None, None, t0, skipped="not_due", **sealed)
        candidates.sort(key=lambda c: (-c[0], -c[1], c[2], c[3]))
        chosen = candidates[:limit_shards]
        results = [self.compact(ns, sh, map_budget_bytes=map_budget_bytes) for _, _, ns, sh in chosen]
        merged: dict[str, Any] = dict(sealed)
        for r in results:
            for k in ("scanned", "records_removed", "bytes_reclaimed", "segments_rewritten", "segments_deleted"):
                merged[k] = merged.get(k, 0) + getattr(r, k)
            for k in ("records_written", "bytes_before", "bytes_after", "rounds", "index_entries_deleted", "rolled"):
                merged[k] = merged.get(k, 0) + getattr(r, k)
        one = len(chosen) == 1
        return self._result(
            "compact_dirtiest",
            chosen[0][2] if one else None,
            chosen[0][3] if one else None,
            t0,
            more=len(candidates) > len(chosen) or any(r.more for r in results),
            **merged,
        )
