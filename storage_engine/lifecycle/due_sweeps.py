"""Deadline-driven sweeps (DESIGN §3 "Timeliness"): when the next lifecycle work falls due,
and one step of the work that is due now.

:meth:`DueSweeps.next_due` answers, from per-shard minima kept in a cache
(:mod:`storage_engine.rules.due`), the earliest time a TTL entry, a whole segment or a retention
limit falls due, so the control plane can schedule the next sweep for that moment instead
of polling; :meth:`DueSweeps.sweep_due` then works on the due shards only.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from storage_engine.api import LifecycleResult, NextDue, SegmentState
from storage_engine.errors import InvalidArgumentError, StorageError, UnknownNamespaceError
from storage_engine.lifecycle.reclaimer import SWEEP_RECLAIM_SEGMENTS, Reclaimer
from storage_engine.lifecycle.retainer import Retention
from storage_engine.lifecycle.runtime import LifecycleRuntime
from storage_engine.lifecycle.scanner import TTLScanner
from storage_engine.lifecycle.shards import LifecycleShard
from storage_engine.lifecycle.sweeps import add_results
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.cleaning import in_off_peak
from storage_engine.rules.due import DueCache, DueShard, next_due, shard_due
from storage_engine.rules.expiry import segment_expired
from storage_engine.rules.work import ShardWork, freed, pending_bytes, sum_work

DUE_DROP_THREADS = 8  # shards whose due segments a deadline-driven reclaim drops at once (sweep_due)


class DueSweeps:
    def __init__(self, rt: LifecycleRuntime, scanner: TTLScanner, retention: Retention) -> None:
        self._rt = rt
        self._scanner = scanner
        self._retention = retention
        self._cache = DueCache()  # per-shard minima for next_due (storage_engine.rules.due)

    def next_due(self) -> NextDue:
        t0 = time.perf_counter()
        now = self._rt.clock.now_ms()
        namespaces: list[tuple[NamespacePolicy, Sequence[DueShard]]] = list(self._rt.source.lifecycle_namespaces())
        cache = self._cache
        before = cache.recomputed
        due = next_due(namespaces, self._rt.source.ttl_first(), now, cache)
        return NextDue(
            now=now,
            due=due,
            shards=sum(len(shards) for _, shards in namespaces),
            recomputed=cache.recomputed - before,
            duration_ms=round((time.perf_counter() - t0) * 1000, 3),
        )

    def sweep_due(self, operation: str, limit: int | None = None) -> LifecycleResult:
        """One step of a deadline-driven sweep: ``reclaim`` or ``retention`` on the shards whose
        :meth:`next_due` time has passed only, or the node-wide ``expire-scan`` (whose walk
        already costs only the due entries). ``reclaim`` here drops the due shards' wholly
        expired segments (sealing an idle active one first), on up to ``DUE_DROP_THREADS`` shards
        at once: a drop is mostly synced writes and directory fsyncs, which concurrent drops share
        (RocksDB commits concurrent synced writes as a group). Rewrites of partly dead segments
        are left to the node-wide :meth:`reclaim`, except that of an active segment this step
        sealed for its expired share (:func:`storage_engine.rules.rolling.expired_share_passed`), which
        is what its due time was for."""
        self._rt.check_limit(limit)
        if operation == "expire-scan":
            return self._scanner.expire_scan(None, None, limit)
        if operation not in ("reclaim", "retention"):
            raise InvalidArgumentError("operation", "must be one of expire-scan, reclaim, retention")
        t0 = time.perf_counter()
        now = self._rt.clock.now_ms()
        due: list[tuple[str, NamespacePolicy, LifecycleShard]] = []
        peak_ok = in_off_peak(now, self._rt.node_policy)
        for name in sorted(self._rt.source.namespace_names()):
            try:
                policy, shards = self._rt.source.lifecycle_namespace(name)
            except StorageError:
                continue  # deleted meanwhile
            for s in shards:
                minima, active = self._cache.minima(s, policy.ttl_ms)
                roll = s.expired_roll_due(policy, now) if operation == "reclaim" else None
                when = shard_due(minima, active, policy, now, roll)[0 if operation == "reclaim" else 1]
                if when is not None and when <= now:
                    due.append((name, policy, s))
        totals: dict[str, Any] = {}
        if operation == "retention":
            for name, _, s in due:
                try:
                    result = self._retention.apply_retention(name, s.shard)
                except UnknownNamespaceError:
                    continue
                add_results(totals, result, ("pending_delete_bytes",))
            return self._rt.result(operation, None, None, t0, **totals)
        budget = SWEEP_RECLAIM_SEGMENTS if limit is None else limit
        more = False
        urgent: dict[str, bool] = {}

        def drop(policy: NamespacePolicy, s: LifecycleShard) -> tuple[ShardWork, int]:
            local: dict[str, Any] = {}
            work = ShardWork()
            before = s.pending_file_bytes()
            self._rt.remove_files([s], now, local)
            segments = self._rt.step_segments(s, policy, now, local)
            whole = [
                seg.base_offset
                for seg in segments
                if seg.state is SegmentState.SEALED and segment_expired(seg, policy.ttl_ms, now)
            ]
            if whole:
                work.add(s.drop_segments(whole, now, self._rt.node_policy.file_delete_delay_ms))
            rolled = [seg for seg in segments if seg.state is SegmentState.SEALED][-1:] if local.get("rolled") else []
            for seg in rolled:
                # Sealed for its expired share (or its deadline, then dropped above): rewritten at once when
                # reclamation would rewrite it, so expired data leaves at the due time, not at the next
                # node-wide reclaim (paced like every rewrite; refused tokens leave it to that reclaim).
                if (
                    seg.base_offset not in whole
                    and Reclaimer.worth_rewriting(seg, policy)
                    and self._rt.reclaim_bucket.take(seg.size_bytes)
                ):
                    work.add(s.rewrite_segment(seg.base_offset, now))
            work.rolled += local.get("rolled", 0)
            work.files_removed += local.get("files_removed", 0)
            work.bytes_reclaimed = freed(work.bytes_reclaimed, before, s.pending_file_bytes())  # as count_freed
            return work, len(whole)

        with self._rt.ops, ThreadPoolExecutor(DUE_DROP_THREADS, thread_name_prefix="due-drop") as pool:
            chosen: list[tuple[str, NamespacePolicy, LifecycleShard]] = []
            for name, policy, s in due:
                if not peak_ok:
                    if name not in urgent:
                        urgent[name] = self._rt.urgent(policy, self._rt.source.lifecycle_namespace(name)[1])
                    if not urgent[name]:
                        continue
                chosen.append((name, policy, s))
            for i in range(0, len(chosen), DUE_DROP_THREADS):
                if budget <= 0:
                    more = True
                    break
                chunk = chosen[i : i + DUE_DROP_THREADS]
                for (name, _, s), (work, _) in zip(chunk, pool.map(lambda job: drop(*job[1:]), chunk), strict=True):
                    sum_work(totals, work)
                    if work.segments_deleted or work.segments_rewritten or work.files_removed:
                        totals.setdefault("namespaces_changed", set()).add(name)
                    budget -= work.segments_deleted + work.segments_rewritten
                    self._rt.counters.add_many(
                        {
                            "reclaim_segments_deleted_total": work.segments_deleted,
                            "reclaim_segments_rewritten_total": work.segments_rewritten,
                            "reclaim_bytes_total": work.bytes_reclaimed,
                        }
                    )
                    if work.segments_deleted or work.segments_rewritten:
                        self._rt.range_compactions.sweeping = True  # deferred, as in a sweep (see _compact_deleted)
                        try:
                            self._rt.range_compactions.after_delete(s)
                        finally:
                            self._rt.range_compactions.sweeping = False
            totals["pending_delete_bytes"] = pending_bytes(s for _, _, s in chosen)
        self._rt.compact_deferred()
        return self._rt.result(operation, None, None, t0, more=more, **totals)
