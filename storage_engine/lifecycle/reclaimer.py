"""Layer 3 of TTL (DESIGN §3 "Reclamation"): space of expired and dead records goes back.

Sealed segments whose every record has expired are dropped whole; sealed segments whose
dead fraction is above ``reclaim_dead_ratio`` are rewritten without their dead and
expired records (offsets unchanged), paced by ``reclaim_bytes_per_s`` and bounded by a
segment budget per call (``DEFAULT_RECLAIM_SEGMENTS``; a node-wide sweep shares
``SWEEP_RECLAIM_SEGMENTS`` over every namespace). A segment in the object store is rewritten under
a new generation (:mod:`storage_engine.tier.rewrite`); when the store fails, that rewrite fails
cleanly, the others go on, and the call raises the store's error at the end.

``bytes_reclaimed`` is the bytes a step freed and ``pending_delete_bytes`` those of dropped segments'
files still on disk as ``.deleted`` (:func:`storage_engine.rules.work.count_freed`), in a dry run too.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from storage_engine.api import LifecycleResult, SegmentInfo, SegmentState
from storage_engine.errors import TierError
from storage_engine.lifecycle.dry_rewrite import dead_counts, would_rewrite
from storage_engine.lifecycle.runtime import LifecycleRuntime
from storage_engine.lifecycle.sweeps import NodeSweep
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.cleaning import in_off_peak
from storage_engine.rules.expiry import segment_expired
from storage_engine.rules.work import DryFiles, count_freed, pending_bytes, sum_work, would_drop

log = logging.getLogger(__name__)

DEFAULT_RECLAIM_SEGMENTS = 16  # segments one reclaim call drops or rewrites at most
SWEEP_RECLAIM_SEGMENTS = 256  # the same for a node-wide step (whole-segment drops are cheap; rewrites are paced)


class Reclaimer:
    def __init__(self, rt: LifecycleRuntime, sweep: NodeSweep) -> None:
        self._rt = rt
        self._sweep = sweep

    def reclaim(
        self,
        namespace: str | None,
        shard: int | None = None,
        limit: int | None = None,
        *,
        manual: bool = False,
        dry_run: bool = False,
    ) -> LifecycleResult:
        self._rt.check_limit(limit)
        if namespace is None:  # node-wide: one segment budget shared by every namespace
            return self._sweep.run(
                "reclaim",
                lambda name, left: self.reclaim(name, None, left, manual=manual, dry_run=dry_run),
                None if dry_run else SWEEP_RECLAIM_SEGMENTS if limit is None else limit,
                lambda result: result.segments_deleted + result.segments_rewritten,
                dry_run=dry_run,
                counts=("pending_delete_bytes",),
            )
        t0 = time.perf_counter()
        policy, shards = self._rt.select(namespace, shard)
        now = self._rt.clock.now_ms()
        if not manual and not in_off_peak(now, self._rt.node_policy) and not self._rt.urgent(policy, shards):
            # Outside off-peak hours: call again later (a dry run says so once: it never asks to be repeated).
            return self._rt.result("reclaim", namespace, shard, t0, skipped="off_peak", more=not dry_run)
        budget = DEFAULT_RECLAIM_SEGMENTS if limit is None else limit
        totals: dict[str, Any] = {}
        more = False
        failure: TierError | None = None
        delay = self._rt.node_policy.file_delete_delay_ms
        with self._rt.ops:
            before = pending_bytes(shards)
            dry = DryFiles.start(shards, now, self._rt.node_policy, before)
            if not dry_run:
                self._rt.remove_files(shards, now, totals)
            for s in shards:
                segments = self._rt.step_segments(s, policy, now, totals, dry_run)
                sealed = [seg for seg in segments if seg.state is SegmentState.SEALED]
                totals["scanned"] = totals.get("scanned", 0) + len(segments)
                whole = [seg.base_offset for seg in sealed if segment_expired(seg, policy.ttl_ms, now)]
                if dry_run:  # the whole backlog, with no budget or pacing
                    dropped = set(whole)
                    sum_work(totals, would_drop([seg for seg in sealed if seg.base_offset in dropped]))
                    dry.drop(s, dropped, delay)
                    dead = dead_counts(s)
                    for seg in sealed:
                        if seg.base_offset not in dropped and self.worth_rewriting(seg, policy):
                            work = would_rewrite(s, seg, policy.ttl_ms, now, dead.get(seg.base_offset, 0))
                            sum_work(totals, work)
                    continue
                if len(whole) > budget:
                    whole, more = whole[:budget], True
                touched = False
                if whole:
                    work = s.drop_segments(whole, now, delay)
                    sum_work(totals, work)
                    budget -= work.segments_deleted
                    touched = True
                    self._rt.counters.add_many(
                        {
                            "reclaim_segments_deleted_total": work.segments_deleted,
                            "reclaim_bytes_total": work.bytes_reclaimed,
                        }
                    )
                dropped = set(whole)
                for seg in sealed:
                    if seg.base_offset in dropped or not self.worth_rewriting(seg, policy):
                        continue
                    if budget <= 0 or not self._rt.reclaim_bucket.take(seg.size_bytes):
                        more = True
                        break
                    try:
                        work = s.rewrite_segment(seg.base_offset, now)
                    except TierError as exc:  # an offloaded segment, the store unreachable: the others go on
                        failure = failure or exc
                        log.warning("reclaim of %s/%d segment %d failed: %s", namespace, s.shard, seg.base_offset, exc)
                        continue
                    sum_work(totals, work)
                    budget -= 1
                    touched = True
                    self._rt.counters.add_many(
                        {
                            "reclaim_segments_rewritten_total": work.segments_rewritten,
                            "reclaim_bytes_total": work.bytes_reclaimed,
                        }
                    )
                if touched:
                    self._rt.range_compactions.after_delete(s)
                if budget <= 0 and not more:
                    more = any(
                        segment_expired(seg, policy.ttl_ms, now)
                        for seg in s.lifecycle_segments()
                        if seg.state is SegmentState.SEALED
                    )
            if not dry_run:
                self._rt.remove_files(shards, now, totals)
            if dry_run:
                dry.finish(totals, before)
            else:
                count_freed(totals, before, pending_bytes(shards))
        if failure is not None:  # after everything else was done (as an offload step does)
            raise failure
        start = shards[0].stats().log_start_offset if shard is not None else None
        return self._rt.result("reclaim", namespace, shard, t0, more=more, log_start_offset=start, **totals)

    @staticmethod
    def worth_rewriting(segment: SegmentInfo, policy: NamespacePolicy) -> bool:
        """A sealed segment reclamation rewrites: its dead fraction is above ``reclaim_dead_ratio``
        (one in the object store too, under a new generation: storage_engine.tier.rewrite)."""
        if not segment.record_count:
            return False
        return (segment.record_count - segment.live_count) / segment.record_count > policy.reclaim_dead_ratio
