"""The offload lifecycle operation (DESIGN §3 "Tiers"): sealed segments of namespaces with
``remote_storage_enabled`` go to the object store, then local copies beyond local retention go.

One call (:meth:`Offloader.offload`) is one bounded, resumable step, under the lifecycle lock
(so no retention, reclamation or compaction changes a segment while it is uploaded):

1. per shard, an idle active segment is sealed first (as every lifecycle step does), then the
   offload candidates (:func:`~storage_engine.tier.rules.offload_candidates`) are taken oldest
   first, at most ``limit`` segments per call (default ``DEFAULT_OFFLOAD_SEGMENTS``) and, with the
   node policy's ``offload_bandwidth_bytes_per_s``, as many bytes as its token bucket grants
   (``more`` when either stops the call);
2. each chosen segment's metadata records UPLOADING and its generation (one synced write) before
   any upload, so a crash anywhere leaves either nothing or objects a retry overwrites;
3. the uploads (:func:`~storage_engine.tier.upload.upload_segment`: data, verify, manifest,
   verify) run ``offload_concurrency`` at a time, each giving way to appends in flight before every
   ``SLICE_BYTES`` it reads and every chunk it reads back
   (:meth:`~storage_engine.tier.context.TierContext.transfer_pace`, as the TTL scan does: an append
   overlapping an upload waits for the rest of one slice of its Python work at most; the store's
   own threads and the disk are shared with appends, which the node policy's concurrency and
   bandwidth bound);
4. each verified segment's metadata says BOTH (one synced write);
5. objects of stale generations (a rewrite's, :mod:`storage_engine.tier.rewrite`) are deleted;
6. local copies beyond local retention whose segments are BOTH are dropped
   (:func:`~storage_engine.tier.rules.local_copies_to_drop`,
   :meth:`~storage_engine.segment.tiered_log.TieredShardLog.drop_local_copies`).

A failed upload leaves its segment UPLOADING (retried by the next call); the call finishes the
others (steps 4–5 for them) and then raises the first failure. After a failed call the offloader
backs off (:class:`Backoff`: 1 s, doubling up to 5 min, on the engine's clock): a call before the
retry time does nothing and answers ``skipped="backoff"`` with ``more`` (counted in
``tier_offload_deferred_total``); the first call after it tries again
(``tier_offload_retries_total``); a call without failure resets the delay. An unreachable store
therefore never deletes anything locally (only BOTH segments lose their local copies) and reads
of local data never touch it.

A dry run (:meth:`Offloader.dry_run`) touches neither the store nor the shards: it sees an idle
active segment sealed (``LifecycleRuntime.step_segments``), counts every candidate as uploaded
(its size: what an upload sends and ``bytes_offloaded`` counts) with no ``limit``, bandwidth or
backoff, and then the local copies step 6 would drop once they are all BOTH: what
the real steps, repeated while ``more``, report in sum.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from storage_engine.api import LifecycleResult, SegmentTier
from storage_engine.errors import TierError
from storage_engine.lifecycle.runtime import LifecycleRuntime
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.pacing import TokenBucket
from storage_engine.rules.validation import select_shards
from storage_engine.rules.work import sum_work
from storage_engine.segment.meta import SegmentMeta
from storage_engine.segment.tiered_log import TieredShardLog
from storage_engine.tier.context import ShardTier
from storage_engine.tier.layout import new_generation
from storage_engine.tier.rewrite import clean_stale
from storage_engine.tier.rules import local_copies_to_drop, offload_candidates
from storage_engine.tier.upload import upload_segment

log = logging.getLogger(__name__)

DEFAULT_OFFLOAD_SEGMENTS = 64  # segments one offload call uploads at most
OPERATION = "offload"

TieredNamespaces = Callable[[str | None], list[tuple[str, NamespacePolicy, Sequence[TieredShardLog]]]]
"""The namespace named (every one for ``None``): its name, policy and shards."""


@dataclass(slots=True)
class _Job:
    log: TieredShardLog
    shard: ShardTier
    meta: SegmentMeta
    namespace: str = ""  # whom the upload changes (LifecycleResult.namespaces_changed)


BACKOFF_BASE_MS = 1000
BACKOFF_CAP_MS = 300_000


@dataclass(slots=True)
class Backoff:
    """Exponential backoff after failed offload calls (engine clock, ms)."""

    base_ms: int = BACKOFF_BASE_MS
    cap_ms: int = BACKOFF_CAP_MS
    failures: int = 0
    retry_at: int = 0

    def waiting(self, now: int) -> bool:
        return self.failures > 0 and now < self.retry_at

    def failed(self, now: int) -> None:
        self.failures += 1
        self.retry_at = now + min(self.cap_ms, self.base_ms << min(self.failures - 1, 30))

    def succeeded(self) -> None:
        self.failures, self.retry_at = 0, 0


class Offloader:
    """The engine's offload step (one per ``segment`` engine)."""

    def __init__(self, rt: LifecycleRuntime, namespaces: TieredNamespaces) -> None:
        self._rt = rt
        self._namespaces = namespaces
        self.bucket = TokenBucket(rt.clock, rt.node_policy.offload_bandwidth_bytes_per_s)
        self.backoff = Backoff()

    def offload(
        self, namespace: str | None, shard: int | None = None, limit: int | None = None, *, dry_run: bool = False
    ) -> LifecycleResult:
        rt = self._rt
        rt.check_limit(limit)
        t0 = time.perf_counter()
        named = self._namespaces(namespace)
        budget = DEFAULT_OFFLOAD_SEGMENTS if limit is None else limit
        node = rt.node_policy
        totals: dict[str, Any] = {}
        more = False
        enabled = [(name, policy, shards) for name, policy, shards in named if policy.remote_storage_enabled]
        if namespace is not None and not enabled:
            return rt.result(OPERATION, namespace, shard, t0, skipped="policy")
        if dry_run:
            return self.dry_run(enabled, namespace, shard, t0)
        self.bucket.set_rate(node.offload_bandwidth_bytes_per_s)
        if self.backoff.waiting(rt.clock.now_ms()):
            rt.counters.add("tier_offload_deferred_total")
            return rt.result(OPERATION, namespace, shard, t0, more=True, skipped="backoff")
        if self.backoff.failures:
            rt.counters.add("tier_offload_retries_total")
        with rt.ops:
            now = rt.clock.now_ms()
            selected: list[tuple[NamespacePolicy, TieredShardLog]] = []
            name_of: dict[int, str] = {}  # id of a shard → its namespace: a sweep names whom it changed
            for name, policy, shards in enabled:
                selected += [(policy, s) for s in select_shards(name, shards, shard)]
                name_of.update((id(s), name) for s in shards)
            jobs: list[_Job] = []
            for policy, s in selected:
                segments = rt.step_segments(s, policy, now, totals)
                totals["scanned"] = totals.get("scanned", 0) + len(segments)
                for seg in offload_candidates(segments):
                    if budget <= 0 or not self.bucket.take(seg.size_bytes):
                        more = True
                        break
                    job = self._begin(s, seg.base_offset, name_of[id(s)])
                    if job is not None:
                        jobs.append(job)
                        budget -= 1
                if more:
                    break
            failure = self._upload(jobs, now, totals)
            for _policy, s in selected:  # leftovers of rewrites (storage_engine.tier.rewrite)
                if not isinstance(s.tier, ShardTier):
                    continue
                try:
                    clean_stale(s, s.tier)
                except TierError as exc:
                    log.warning("%s: stale objects stay for the next step: %s", s.route, exc)
                    failure = failure or exc
            for policy, s in selected:
                drops = local_copies_to_drop(s.lifecycle_segments(), policy, now)
                if drops:
                    n, nbytes, work = s.drop_local_copies(drops, now, node.file_delete_delay_ms)
                    totals["local_copies_dropped"] = totals.get("local_copies_dropped", 0) + n
                    totals["local_bytes_dropped"] = totals.get("local_bytes_dropped", 0) + nbytes
                    sum_work(totals, work)
                    if n:
                        totals.setdefault("namespaces_changed", set()).add(name_of[id(s)])
            rt.remove_files([s for _, s in selected], now, totals)
        rt.counters.add_many(
            {
                "tier_segments_offloaded_total": totals.get("segments_offloaded", 0),
                "tier_bytes_offloaded_total": totals.get("bytes_offloaded", 0),
            }
        )
        if failure is not None:
            self.backoff.failed(rt.clock.now_ms())
            raise failure
        self.backoff.succeeded()
        return rt.result(OPERATION, namespace, shard, t0, more=more, **totals)

    def dry_run(
        self,
        enabled: list[tuple[str, NamespacePolicy, Sequence[TieredShardLog]]],
        namespace: str | None,
        shard: int | None,
        t0: float,
    ) -> LifecycleResult:
        """What the real steps would upload and drop, from metadata only (see the module docstring)."""
        rt = self._rt
        totals: dict[str, Any] = {}
        with rt.ops:
            now = rt.clock.now_ms()
            for name, policy, shards in enabled:
                for s in select_shards(name, shards, shard):
                    if not isinstance(s.tier, ShardTier):
                        continue
                    segments = rt.step_segments(s, policy, now, totals, dry_run=True)
                    totals["scanned"] = totals.get("scanned", 0) + len(segments)
                    uploaded = {seg.base_offset for seg in offload_candidates(segments)}
                    after = [
                        replace(seg, tier=SegmentTier.BOTH) if seg.base_offset in uploaded else seg for seg in segments
                    ]
                    drops = set(local_copies_to_drop(after, policy, now))
                    if uploaded or drops:
                        totals.setdefault("namespaces_changed", set()).add(name)
                    for seg in after:
                        if seg.base_offset in uploaded:
                            totals["segments_offloaded"] = totals.get("segments_offloaded", 0) + 1
                            totals["bytes_offloaded"] = totals.get("bytes_offloaded", 0) + seg.size_bytes
                        if seg.base_offset in drops:
                            totals["local_copies_dropped"] = totals.get("local_copies_dropped", 0) + 1
                            totals["local_bytes_dropped"] = totals.get("local_bytes_dropped", 0) + seg.size_bytes
        return rt.result(OPERATION, namespace, shard, t0, **totals)

    @staticmethod
    def _begin(s: TieredShardLog, base: int, namespace: str) -> _Job | None:
        hooks = s.tier
        if not isinstance(hooks, ShardTier):
            return None
        meta = s.begin_offload(base, new_generation())
        return None if meta is None else _Job(s, hooks, meta, namespace)

    def _upload(self, jobs: list[_Job], now: int, totals: dict[str, Any]) -> Exception | None:
        """Upload the jobs ``offload_concurrency`` at a time; mark each verified one BOTH.
        Returns the first failure (the others still finish)."""
        if not jobs:
            return None
        workers = max(1, min(self._rt.node_policy.offload_concurrency, len(jobs)))

        def run(job: _Job) -> int | Exception:
            try:
                return upload_segment(job.shard, job.log, job.meta, now, pace=job.shard.context.transfer_pace())
            except Exception as exc:  # reported after the others finish
                return exc

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="offload") as pool:
            outcomes = list(pool.map(run, jobs))
        failure: Exception | None = None
        for job, outcome in zip(jobs, outcomes, strict=True):
            if isinstance(outcome, Exception):
                log.warning("%s: offload of segment %d failed: %s", job.log.route, job.meta.base_offset, outcome)
                self._rt.counters.add("tier_offload_failures_total")
                failure = failure or outcome
                continue
            if job.log.finish_offload(job.meta.base_offset, job.meta.tier_generation, job.meta.size_bytes):
                totals["segments_offloaded"] = totals.get("segments_offloaded", 0) + 1
                totals["bytes_offloaded"] = totals.get("bytes_offloaded", 0) + outcome
                totals.setdefault("namespaces_changed", set()).add(job.namespace)
        return failure
