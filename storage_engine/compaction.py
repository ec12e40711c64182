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
- **Key map.** :class:`KeyMap` maps a 16-byte blake2b digest of the key to
  the latest offset seen, within a memory budget in bytes
  (``NodePolicy.compaction_map_budget_bytes`` or per call). A round fills it
  over the dirty range from the first dirty offset; when it is full the round
  cleans what it covers and the next round continues from there.
- **Keep rule.** Within ``[log start, map end)`` a record is kept iff it is
  the latest for its key (records past the map end and records without a key
  are kept), it is not expired (:mod:`storage_engine.expiry`), and, if a
  tombstone, its delete horizon (the time its offset was first cleaned +
  ``delete_retention_ms``) has not passed.
- **Rewrite.** Through each adapter's ``rewrite_segment(base, now,
  remove=...)``: the ``segment`` adapter's crash-safe ``.cleaned`` → ``.swap``
  → ``.log`` swap, the ``rocksdb`` adapter's WriteBatch deletes followed by
  ``compact_range``, the memory adapter's slot removal. Offsets never change;
  a segment left without records is dropped whole.

Memory: the map holds at most ``budget // ENTRY_BYTES`` entries, where
``ENTRY_BYTES`` is the measured cost of one entry of a CPython ``dict`` from a
16-byte ``bytes`` digest to an ``int`` offset, table growth included (~153 B
measured with tracemalloc, rounded up to 160). So the map stays within the
budget; the fixed overhead beyond it is the records of one segment batch
being decoded plus the per-segment removal set (at most one segment's
offsets).
"""

from __future__ import annotations

import struct
import time
from bisect import bisect_right
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from hashlib import blake2b
from typing import Any, Protocol, cast

from storage_engine.api import LifecycleResult, Record, SegmentInfo, SegmentState
from storage_engine.cleaning import in_off_peak
from storage_engine.errors import InvalidArgumentError
from storage_engine.expiry import is_expired
from storage_engine.lifecycle import LifecycleMixin, ShardWork
from storage_engine.policy import NamespacePolicy

DIGEST_BYTES = 16
ENTRY_BYTES = 160  # bytes one KeyMap entry costs at most (see the module docstring)
MIN_MAP_ENTRIES = 16
MAX_PASSES = 64  # cleaning passes remembered per shard (older ones merge, keeping tombstones longer)
DEFAULT_MAX_ROUNDS = 1_000
_STATE_HEAD = struct.Struct(">BQH")
_PASS = struct.Struct(">QQ")


def key_digest(key: bytes) -> bytes:
    """The fixed-size hash the map is keyed on (16-byte blake2b, as Kafka's 16-byte MD5)."""
    return blake2b(key, digest_size=DIGEST_BYTES).digest()


class KeyMap:
    """Key digest → latest offset, bounded by a memory budget in bytes."""

    __slots__ = ("_map", "budget_bytes", "capacity")

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self.capacity = max(MIN_MAP_ENTRIES, budget_bytes // ENTRY_BYTES)
        self._map: dict[bytes, int] = {}

    def put(self, digest: bytes, offset: int) -> bool:
        """Record ``offset`` as the latest for ``digest``; ``False`` (nothing stored) when the
        map is full and the digest is new."""
        m = self._map
        if digest not in m and len(m) >= self.capacity:
            return False
        m[digest] = offset
        return True

    def get(self, digest: bytes) -> int | None:
        return self._map.get(digest)

    def __len__(self) -> int:
        return len(self._map)

    @property
    def memory_bytes(self) -> int:
        """Upper estimate of the bytes the map holds now."""
        return len(self._map) * ENTRY_BYTES


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
    first_uncleanable = segments[-1].base_offset if segments else 0
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


def keep_record(
    r: Record,
    kmap: KeyMap | None,
    map_end: int,
    clean_time: int,
    policy: NamespacePolicy,
    now: int,
) -> bool:
    """The keep rule of one record below the map end (see the module docstring)."""
    if is_expired(r.timestamp, r.expire_at, policy.ttl_ms, now):
        return False
    if r.key is not None and kmap is not None and r.offset < map_end:
        latest = kmap.get(key_digest(r.key))
        if latest is not None and latest > r.offset:
            return False
    return not (r.value is None and clean_time + policy.delete_retention_ms <= now)


# -- what a shard of any adapter provides ----------------------------------------------------------
class CompactableShard(Protocol):
    shard: int

    def lifecycle_segments(self) -> list[SegmentInfo]: ...

    def rewrite_segment(self, base: int, now: int, remove: Collection[int] = ()) -> ShardWork: ...

    def compact_deleted(self) -> None: ...


def segment_records(shard: Any, base: int) -> Iterator[Record]:
    """Every stored record of a sealed segment (dead ones included), in offset order."""
    hook = getattr(shard, "compaction_records", None)
    if hook is not None:
        yield from hook(base)
        return
    for m in shard.view.metas():
        if m.base_offset == base:
            yield from shard._segment_records(m)
            return


def load_state(shard: Any) -> CleanerState:
    index = getattr(shard, "index", None)
    if index is not None and hasattr(index, "store"):
        return CleanerState.unpack(index.store.cleaner_checkpoint(index.prefix))
    return CleanerState.unpack(getattr(shard, "cleaner_state", None))


def save_state(shard: Any, state: CleanerState) -> None:
    """Persist the cleaner checkpoint atomically (one synced RocksDB write)."""
    index = getattr(shard, "index", None)
    if index is not None and hasattr(index, "store"):
        store = index.store
        wb = store.batch()
        store.put_cleaner_checkpoint(wb, index.prefix, state.pack())
        store.write(wb, sync=True)
    else:
        shard.cleaner_state = state.pack()


def reclaimable_bytes(shard: Any, info: SegmentInfo, remove: Collection[int]) -> int:
    """Bytes a rewrite of segment ``info`` without ``remove`` reclaims, exactly as the adapter's
    ``rewrite_segment`` (or a whole drop when nothing would remain) reports them."""
    if not remove:
        return 0
    if len(remove) >= info.record_count:
        return info.size_bytes
    hook = getattr(shard, "compaction_removed_bytes", None)
    if hook is not None:  # memory adapter
        return int(hook(info.base_offset, remove))
    segment_file = getattr(shard, "_segment_file", None)
    if segment_file is None:  # rocksdb adapter: one key + value per record
        from storage_engine.rocksdb_adapter import _KEY_BYTES

        store, prefix = shard.index.store, shard.index.prefix
        return sum(
            len(v) + _KEY_BYTES for o, v in store.records(prefix, info.base_offset, info.last_offset + 1) if o in remove
        )
    from storage_engine.codec import decode_records, encode_batch

    seg = segment_file(info.base_offset)
    if seg is None:
        return 0
    size = 0
    seg.retain()
    try:
        for _p, h, buf, off in seg.iter_batches(0, seg.size, verify=False):
            records = decode_records(buf, off, h, path=str(seg.path))
            keep = [r for r in records if r.offset not in remove]
            if len(keep) == len(records):
                size += h.length
            elif keep:
                size += len(encode_batch(keep[0].offset, keep))
    finally:
        seg.release()
    return max(0, info.size_bytes - size)


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

    def _map_budget(self, map_budget_bytes: int | None) -> int:
        if map_budget_bytes is None:
            return self._node_policy.compaction_map_budget_bytes
        if isinstance(map_budget_bytes, bool) or not isinstance(map_budget_bytes, int) or map_budget_bytes < 1:
            raise InvalidArgumentError("map_budget_bytes", "must be an integer ≥ 1")
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
        policy, shards = self._select(namespace, shard)
        now = self.clock.now_ms()
        if not policy.compacts:
            return self._result("compact", namespace, shard, t0, skipped="policy")
        if not manual and not dry_run and not in_off_peak(now, self._node_policy):
            return self._result("compact", namespace, shard, t0, skipped="off_peak", more=True)
        totals = _Totals()
        attempted = False
        with self._lifecycle_ops:
            for s in shards:
                cs = cast(CompactableShard, s)
                attempted |= self._compact_shard(
                    cs, policy, now, budget, dry_run, manual, max_rounds or DEFAULT_MAX_ROUNDS, totals
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
        segments = s.lifecycle_segments()
        rng = cleanable_range(segments, state, policy, now)
        if not manual and not rng.due(policy, now):
            return False
        before = sum(seg.size_bytes for seg in segments)
        totals.bytes_before += before
        removed_sim: dict[int, set[int]] = {}  # dry run: what earlier rounds removed, per segment
        first_dirty, end = rng.first_dirty, rng.first_uncleanable
        cleanable = list(rng.segments)
        rounds = 0
        reclaimed = 0
        while True:
            kmap = KeyMap(budget)
            map_end = end
            gone_all = set().union(*removed_sim.values()) if removed_sim else set()
            for seg in cleanable:
                if seg.last_offset < first_dirty or map_end != end:
                    continue
                for r in segment_records(s, seg.base_offset):
                    if r.offset < first_dirty or r.offset in gone_all:
                        continue
                    if r.offset >= end:
                        break
                    totals.scanned += 1
                    if r.key is not None and not kmap.put(key_digest(r.key), r.offset):
                        map_end = r.offset
                        break
            touched = False
            for seg in cleanable:
                if seg.base_offset >= map_end:
                    break
                gone_before = removed_sim.get(seg.base_offset, set())
                remove: list[int] = []
                kept = 0
                for r in segment_records(s, seg.base_offset):
                    if r.offset in gone_before:
                        continue
                    totals.scanned += 1
                    cleaned_at = now if r.offset >= first_dirty else (state.clean_time(r.offset) or now)
                    if r.offset >= map_end or keep_record(r, kmap, map_end, cleaned_at, policy, now):
                        kept += 1
                    else:
                        remove.append(r.offset)
                if not remove:
                    continue
                totals.records_written += kept
                if dry_run:
                    removed_sim.setdefault(seg.base_offset, set()).update(remove)
                    continue
                if not self._reclaim_bucket.take(seg.size_bytes) and not manual:
                    totals.more = True
                    break
                work = s.rewrite_segment(seg.base_offset, now, remove=frozenset(remove))
                reclaimed += work.bytes_reclaimed
                totals.add_work(work)
                touched = True
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

    def compact_with_plan(self, namespace: str, shard: int, keep: dict[int, list[int]]) -> LifecycleResult:
        t0 = time.perf_counter()
        if isinstance(shard, bool) or not isinstance(shard, int):
            raise InvalidArgumentError("shard", "must be an integer")
        if not isinstance(keep, dict):
            raise InvalidArgumentError("keep", "must map segment base offsets to lists of offsets to keep")
        _, shards = self._select(namespace, shard)
        s = cast(CompactableShard, shards[0])
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
                wanted = set(keep[base])
                remove: list[int] = []
                for r in segment_records(s, base):
                    totals.scanned += 1
                    if r.offset in wanted:
                        totals.records_written += 1
                    else:
                        remove.append(r.offset)
                if remove:
                    totals.add_work(s.rewrite_segment(base, now, remove=frozenset(remove)))
                    touched = True
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
        """Per shard: first dirty and first uncleanable offsets, clean/dirty bytes, ratio, due."""
        policy, shards = self._select(namespace, None)
        now = self.clock.now_ms()
        out = []
        for s in shards:
            rng = cleanable_range(s.lifecycle_segments(), load_state(s), policy, now)
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
        now = self.clock.now_ms()
        candidates: list[tuple[float, int, str, int]] = []
        for info in self._lc_names():
            policy, shards = self._lc_namespace(info)
            if not policy.compacts:
                continue
            for s in shards:
                rng = cleanable_range(s.lifecycle_segments(), load_state(s), policy, now)
                if rng.due(policy, now):
                    candidates.append((rng.dirty_ratio, rng.dirty_bytes, info, s.shard))
        if not candidates:
            return self._result("compact_dirtiest", None, None, t0, skipped="not_due")
        candidates.sort(key=lambda c: (-c[0], -c[1], c[2], c[3]))
        chosen = candidates[:limit_shards]
        results = [self.compact(ns, sh, map_budget_bytes=map_budget_bytes) for _, _, ns, sh in chosen]
        merged: dict[str, Any] = {}
        for r in results:
            for k in ("scanned", "records_removed", "bytes_reclaimed", "segments_rewritten", "segments_deleted"):
                merged[k] = merged.get(k, 0) + getattr(r, k)
            for k in ("records_written", "bytes_before", "bytes_after", "rounds", "index_entries_deleted"):
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

    def _lc_names(self) -> Iterable[str]:
        return [info.name for info in self.list_namespaces()]  # type: ignore[attr-defined]
