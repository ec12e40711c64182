"""Kafka retention (DESIGN §3 "Retention"): sealed segments past ``retention_ms`` or beyond
``retention_bytes`` are deleted whole, oldest first (:func:`storage_engine.rules.retention.deletable_segments`),
never past what a subscription still needs (the runtime's retention hook).

A step reports the bytes it freed (``bytes_reclaimed``) and those still on disk as ``.deleted`` files
(``pending_delete_bytes``: renamed, waiting for ``file_delete_delay_ms`` or a reader), as every
deleting step does (:func:`storage_engine.rules.work.count_freed`); its dry run the same, from the same rules."""

from __future__ import annotations

import time
from typing import Any

from storage_engine.api import LifecycleResult
from storage_engine.lifecycle.runtime import LifecycleRuntime
from storage_engine.lifecycle.sweeps import NodeSweep
from storage_engine.rules.retention import deletable_segments
from storage_engine.rules.work import DryFiles, count_freed, pending_bytes, sum_work, would_drop


class Retention:
    def __init__(self, rt: LifecycleRuntime, sweep: NodeSweep) -> None:
        self._rt = rt
        self._sweep = sweep

    def apply_retention(
        self, namespace: str | None, shard: int | None = None, *, dry_run: bool = False
    ) -> LifecycleResult:
        if namespace is None:  # node-wide
            return self._sweep.run(
                "retention",
                lambda name, _: self.apply_retention(name, dry_run=dry_run),
                None,
                dry_run=dry_run,
                counts=("pending_delete_bytes",),
            )
        t0 = time.perf_counter()
        policy, shards = self._rt.select(namespace, shard)
        now = self._rt.clock.now_ms()
        totals: dict[str, Any] = {}
        delay = self._rt.node_policy.file_delete_delay_ms
        with self._rt.ops:
            before = pending_bytes(shards)
            dry = DryFiles.start(shards, now, self._rt.node_policy, before)
            if not dry_run:
                self._rt.remove_files(shards, now, totals)
            for s in shards:
                segments = self._rt.step_segments(s, policy, now, totals, dry_run)
                totals["scanned"] = totals.get("scanned", 0) + len(segments)
                plan = deletable_segments(segments, policy, now)
                plan = self._rt.retention_plan(namespace, s.shard, policy, segments, plan)
                if plan.count == 0:
                    continue
                bases = [seg.base_offset for seg in segments[: plan.count]]
                if dry_run:
                    totals["rolled"] = totals.get("rolled", 0) + int(plan.roll)
                    sum_work(totals, would_drop(segments[: plan.count]))
                    dry.drop(s, bases, delay)
                    continue
                if plan.roll:
                    totals["rolled"] = totals.get("rolled", 0) + int(s.roll_empty(now))
                work = s.drop_segments(bases, now, delay)
                sum_work(totals, work)
                self._rt.counters.add_many(
                    {
                        "retention_segments_deleted_total": work.segments_deleted,
                        "retention_bytes_deleted_total": work.bytes_reclaimed,
                    }
                )
            if not dry_run:
                self._rt.remove_files(shards, now, totals)
            if dry_run:
                dry.finish(totals, before)
            else:
                count_freed(totals, before, pending_bytes(shards))
        start = shards[0].stats().log_start_offset if shard is not None else None
        return self._rt.result("retention", namespace, shard, t0, log_start_offset=start, **totals)
