"""The log cleaner: the engine's key-compaction part (the rules: the package docstring)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol

import numpy as np

from storage_engine.api import COMPACTION_COUNTS, CompactionEstimate, LifecycleResult, SegmentInfo, SegmentState
from storage_engine.compaction.checkpoint import load_state, save_state
from storage_engine.compaction.cleanable import cleanable_range
from storage_engine.compaction.keymap import KeyMap
from storage_engine.compaction.rules import OffsetBits, cleaning_rule, keep_only
from storage_engine.compaction.store_io import CompactableShard, reclaimable_bytes
from storage_engine.errors import InvalidArgumentError, TierError
from storage_engine.formats.codec import ATTR_EXPIRE
from storage_engine.lifecycle.runtime import LifecycleRuntime
from storage_engine.lifecycle.shards import KEEP, RemovalRule
from storage_engine.lifecycle.sweeps import add_results
from storage_engine.policies.bounds import MAX_INT64, int_ok, int_rule
from storage_engine.policies.keymap_size import MIN_MAP_BUDGET_BYTES
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.cleaning import in_off_peak
from storage_engine.rules.expiry import is_expired
from storage_engine.rules.rolling import rolled_view, sealed_view
from storage_engine.rules.validation import check_shard_arg, select_shards
from storage_engine.rules.work import ShardWork

MAP_OVERHEAD_BYTES = 4 * 1024 * 1024  # stated bound on what compaction holds beyond the map
DEFAULT_MAX_ROUNDS = 1_000
FILL_KEYS = 16_384  # keys one insertion into the map takes at most (temporaries ~100 B a key)


class CompactableSource(Protocol):
    def compaction_namespace(self, name: str) -> tuple[NamespacePolicy, Sequence[CompactableShard]]:
        """The namespace's policy and shards, typed for compaction (raises for an unknown one)."""
        ...


@dataclass(slots=True)
class CompactionTotals(ShardWork):
    """A compaction call's counts: what the rewrites did plus the cleaner's own figures."""

    records_written: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    rounds: int = 0
    more: bool = False

    def values(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class LogCleaner:
    """The compaction calls of the contract (``compact``, ``compaction_estimate``,
    ``compact_with_plan``, ``compact_dirtiest``) over any store's shards."""

    def __init__(self, rt: LifecycleRuntime, source: CompactableSource) -> None:
        self._rt = rt
        self._source = source

    def _compactable(self, namespace: str, shard: int | None) -> tuple[NamespacePolicy, list[CompactableShard]]:
        """The policy and the shards a compaction call names (every one for ``None``)."""
        policy, shards = self._source.compaction_namespace(namespace)
        return policy, select_shards(namespace, shards, shard)

    def _map_budget(self, map_budget_bytes: int | None) -> int:
        """The key-map budget of a call: as given (never enlarged), or the node's."""
        if map_budget_bytes is None:
            return self._rt.node_policy.compaction_map_budget_bytes  # validated ≥ the minimum with the policy
        if not int_ok(map_budget_bytes, MIN_MAP_BUDGET_BYTES):
            rule = int_rule(MIN_MAP_BUDGET_BYTES, MAX_INT64, "map_budget_bytes")
            raise InvalidArgumentError("map_budget_bytes", f"{rule} (the smallest key map: one key and its bitmap)")
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
        return self._compact(namespace, shard, map_budget_bytes, dry_run, manual, max_rounds)

    def _compact(
        self,
        namespace: str,
        shard: int | None,
        map_budget_bytes: int | None,
        dry_run: bool,
        manual: bool,
        max_rounds: int | None,
        rolled: bool = False,
    ) -> LifecycleResult:
        """:meth:`compact`; with ``rolled`` (a dry run), every active segment counts as rolled
        (:func:`~storage_engine.rules.rolling.rolled_view`)."""
        t0 = time.perf_counter()
        budget = self._map_budget(map_budget_bytes)
        if max_rounds is not None:
            self._rt.check_limit(max_rounds)
        policy, shards = self._compactable(namespace, shard)
        now = self._rt.clock.now_ms()
        if not policy.compacts:
            return self._rt.result("compact", namespace, shard, t0, skipped="policy")
        if not manual and not dry_run and not in_off_peak(now, self._rt.node_policy):
            return self._rt.result("compact", namespace, shard, t0, skipped="off_peak", more=True)
        totals = CompactionTotals()
        attempted = False
        failures: list[TierError] = []
        with self._rt.ops:
            for s in shards:
                attempted |= self._compact_shard(
                    s,
                    policy,
                    now,
                    budget,
                    dry_run,
                    manual,
                    max_rounds or DEFAULT_MAX_ROUNDS,
                    totals,
                    failures,
                    rolled,
                )
        op = "compact_dry_run" if dry_run else "compact"
        if not attempted:
            return self._rt.result(op, namespace, shard, t0, skipped="not_due", **totals.values())
        result = self._rt.result(op, namespace, shard, t0, **totals.values())
        if not dry_run:
            self._count_compaction(result)
        if failures:  # offloaded segments the store could not serve: the rest was compacted
            raise failures[0]
        return result

    def _count_compaction(self, result: LifecycleResult) -> None:
        self._rt.counters.add_many(
            {
                "compaction_runs_total": 1,
                "compaction_bytes_reclaimed_total": result.bytes_reclaimed,
                "compaction_records_removed_total": result.records_removed,
                "compaction_rounds_total": result.rounds,
                "compaction_duration_seconds_total": result.duration_ms / 1000,
            }
        )

    def compaction_estimate(self, namespace: str, shard: int | None = None) -> CompactionEstimate:
        """A manual compaction's dry run with every active segment counted as rolled, less the one
        without: the part that waits for the roll (see :class:`~storage_engine.model.CompactionEstimate`)."""
        now = self.compact(namespace, shard, dry_run=True, manual=True)
        r = self._compact(namespace, shard, None, True, True, None, rolled=True)
        return CompactionEstimate(
            namespace=namespace,
            shard=shard,
            bytes_before=r.bytes_before,
            bytes_after=r.bytes_after,
            reclaimable_bytes=r.bytes_reclaimed,
            records_removable=r.records_removed,
            rounds=r.rounds,
            active_records_removable=r.records_removed - now.records_removed,
            active_bytes_reclaimable=r.bytes_reclaimed - now.bytes_reclaimed,
        )

    def _compact_shard(
        self,
        s: CompactableShard,
        policy: NamespacePolicy,
        now: int,
        budget: int,
        dry_run: bool,
        manual: bool,
        max_rounds: int,
        totals: CompactionTotals,
        failures: list[TierError],
        rolled: bool = False,
    ) -> bool:
        """One shard's rounds. A segment in the object store that cannot be read or uploaded now
        (:class:`~storage_engine.errors.TierError`, in ``failures``) is left as it is and the
        others are compacted (leaving its keys out of the map only keeps more records); the pass is
        then not recorded, so the next call cleans the range again."""
        state = load_state(s)
        if rolled:  # every active segment as rolled (a dry run for the estimate; it counts no roll)
            segments = rolled_view(s.lifecycle_segments())
        else:  # an idle active segment sealed first (a dry run: as it would be, counted alike)
            sealed: dict[str, Any] = {}
            segments = self._rt.step_segments(s, policy, now, sealed, dry_run)
            totals.rolled += sealed.get("rolled", 0)
        rng = cleanable_range(segments, state, policy, now)
        if not manual and not rng.due(policy, now):
            return False
        before = sum(seg.size_bytes for seg in segments)
        totals.bytes_before += before
        removed_sim: dict[int, OffsetBits] = {}  # dry run: what earlier rounds removed, per segment
        kept_sim: dict[int, int] = {}  # dry run: the records a segment would keep after its last rewrite
        first_dirty, end = rng.first_dirty, rng.first_uncleanable
        cleanable = list(rng.segments)
        rounds = 0
        reclaimed = 0
        kmap = KeyMap(budget, first_dirty)
        failed = len(failures)
        while True:
            kmap.clear(first_dirty)
            skipped: set[int] = set()
            map_end = self._fill_map(s, kmap, cleanable, first_dirty, end, totals, skipped, failures)
            if dry_run and failures:
                raise failures[0]
            rule = cleaning_rule(kmap, map_end, first_dirty, state, policy, now)
            touched = False
            for seg in cleanable:
                if seg.base_offset >= map_end:
                    break
                if seg.base_offset in skipped:
                    continue
                if dry_run:
                    self._simulate(s, seg, rule, policy, now, removed_sim, kept_sim, totals)
                    continue
                if not self._rt.reclaim_bucket.take(seg.size_bytes) and not manual:
                    totals.more = True
                    break
                try:
                    work = s.rewrite_segment(seg.base_offset, now, remove=rule)
                except TierError as exc:  # nothing changed: the old segment stays (tier.rewrite)
                    failures.append(exc)
                    continue
                totals.scanned += seg.record_count
                if work.records_removed and not work.segments_deleted:
                    totals.records_written += max(0, seg.record_count - work.records_removed)
                reclaimed += work.bytes_reclaimed
                totals.add(work)
                touched |= bool(work.segments_rewritten or work.segments_deleted)
            if totals.more or len(failures) > failed:
                if touched and not dry_run:
                    s.compact_deleted()
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
                # As the real rewrite counts it: a segment left with no record goes whole, else it is rewritten.
                if kept_sim[base]:
                    totals.segments_rewritten += 1
                else:
                    totals.segments_deleted += 1
            totals.bytes_reclaimed += reclaimed
            totals.bytes_after += before - reclaimed
        else:
            totals.bytes_after += sum(seg.size_bytes for seg in s.lifecycle_segments())
        return True

    @staticmethod
    def _fill_map(
        s: CompactableShard,
        kmap: KeyMap,
        cleanable: list[SegmentInfo],
        first_dirty: int,
        end: int,
        totals: CompactionTotals,
        skipped: set[int],
        failures: list[TierError],
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
            try:
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
            except TierError as exc:
                # An offloaded segment the store cannot serve now: it is not rewritten (``skipped``).
                # Its keys read so far may stay in the map: those records exist and stay, so
                # removing older records they supersede is right; its other keys are simply absent.
                skipped.add(seg.base_offset)
                failures.append(exc)
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
        kept_sim: dict[int, int],
        totals: CompactionTotals,
    ) -> None:
        """A dry run's rewrite of ``seg``: what the adapter would remove (expired records and
        what ``rule`` says), added to ``removed_sim``, and the records it would keep in ``kept_sim``;
        the live expired records count in ``expired_records``, as the real rewrite marks them dead."""
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
                expired = is_expired(cols.timestamps[i], expire_at, ttl_ms, now)
                if expired:  # the real rewrite marks it dead first, and counts it (expired_records)
                    totals.expired_records += 1
                if decisions[i] != KEEP or expired:
                    new.add(o)
                    removed += 1
                else:
                    kept += 1
        if removed:
            totals.records_written += kept
            removed_sim[seg.base_offset] = new
            kept_sim[seg.base_offset] = kept

    def compact_with_plan(self, namespace: str, shard: int, keep: dict[int, list[int]]) -> LifecycleResult:
        t0 = time.perf_counter()
        check_shard_arg(shard)
        if not isinstance(keep, dict):
            raise InvalidArgumentError("keep", "must map segment base offsets to lists of offsets to keep")
        _, shards = self._compactable(namespace, shard)
        s = shards[0]
        now = self._rt.clock.now_ms()
        totals = CompactionTotals()
        with self._rt.ops:
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
                work = s.rewrite_segment(base, now, remove=keep_only(wanted))
                totals.scanned += seg.record_count
                if work.records_removed and not work.segments_deleted:
                    totals.records_written += max(0, seg.record_count - work.records_removed)
                totals.add(work)
                touched |= bool(work.segments_rewritten or work.segments_deleted)
            if keep:
                state.record_pass(by_base[max(keep)].last_offset + 1, now)
                save_state(s, state)
                totals.rounds = 1
            if touched:
                s.compact_deleted()
            totals.bytes_after = sum(seg.size_bytes for seg in s.lifecycle_segments())
        result = self._rt.result("compact_with_plan", namespace, shard, t0, **totals.values())
        self._count_compaction(result)
        return result

    def compaction_ranges(self, namespace: str) -> list[dict[str, Any]]:
        """Per shard: first dirty and first uncleanable offsets, clean/dirty bytes, ratio, due
        (as the next compaction step would find them: an idle active segment counts as sealed)."""
        policy, shards = self._compactable(namespace, None)
        now = self._rt.clock.now_ms()
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

    def compact_dirtiest(
        self, limit_shards: int = 1, *, map_budget_bytes: int | None = None, dry_run: bool = False
    ) -> LifecycleResult:
        """The background cleaner's step: among shards of compacted namespaces that are due,
        compact the ``limit_shards`` with the highest dirty ratio (ties: the most dirty bytes).
        A dry run takes every due shard (the real steps compact them all, ``limit_shards`` at a
        time, until none is due) and reports their compaction dry runs, outside off-peak hours
        nothing (the real step's compactions are skipped there)."""
        t0 = time.perf_counter()
        self._rt.check_limit(limit_shards)
        self._map_budget(map_budget_bytes)  # refused before any shard is touched
        now = self._rt.clock.now_ms()
        candidates: list[tuple[float, int, str, int]] = []
        sealed: dict[str, Any] = {}
        with self._rt.ops:
            for info in self._rt.source.namespace_names():
                policy, shards = self._source.compaction_namespace(info)
                if not policy.compacts:
                    continue
                for s in shards:
                    segments = self._rt.step_segments(s, policy, now, sealed, dry_run)
                    rng = cleanable_range(segments, load_state(s), policy, now)
                    if rng.due(policy, now):
                        candidates.append((rng.dirty_ratio, rng.dirty_bytes, info, s.shard))
        if not candidates:
            return self._rt.result("compact_dirtiest", None, None, t0, skipped="not_due", **sealed)
        candidates.sort(key=lambda c: (-c[0], -c[1], c[2], c[3]))
        if dry_run and not in_off_peak(now, self._rt.node_policy):
            return self._rt.result("compact_dirtiest", None, None, t0, skipped="off_peak", **sealed)
        chosen = candidates if dry_run else candidates[:limit_shards]
        results = [self.compact(ns, sh, map_budget_bytes=map_budget_bytes, dry_run=dry_run) for _, _, ns, sh in chosen]
        merged: dict[str, Any] = dict(sealed)
        for r in results:
            add_results(merged, r, COMPACTION_COUNTS)
        if dry_run:  # a dry compaction sees sealed the segments counted above (a real one finds them sealed)
            merged["rolled"] = sealed.get("rolled", 0)
        one = len(chosen) == 1
        return self._rt.result(
            "compact_dirtiest",
            chosen[0][2] if one else None,
            chosen[0][3] if one else None,
            t0,
            more=len(candidates) > len(chosen) or any(r.more for r in results),
            **merged,
        )
