"""RocketMQ file cleaning (DESIGN §3 "File cleaning"): the node-wide cleaner.

Oldest segment files first across every shard: those past ``file_reserved_time_ms``
(at the ``delete_when`` hour, or at once above ``disk_max_used_ratio``), and above
``disk_clean_forcibly_ratio`` (with forced cleaning on) any sealed segment, until use is
back under the watermark. ``.deleted`` files retention or reclamation left go first.
Deletes are paced (``delete_interval_ms`` between two, at most ``delete_batch_max`` a run).

Tiered storage (DESIGN §3 "Tiers", :mod:`storage_engine.rules.cleaning`): above ``disk_max_used_ratio``
the cleaner first runs an offload step (:attr:`FileCleaner.offload_first`); above
``disk_clean_forcibly_ratio`` it drops local copies of segments already in the object store,
oldest first, before anything else; a segment in the object store too only ever loses its local
copy; a segment only in the object store is passed over (it frees no local disk); and a local-only
segment of a namespace with remote storage is deleted only by forced cleaning.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Callable, Collection, Iterator
from typing import Any, Protocol, runtime_checkable

from storage_engine.api import DiskStatus, LifecycleResult, SegmentInfo, SegmentState, SegmentTier
from storage_engine.lifecycle.runtime import LifecycleRuntime
from storage_engine.lifecycle.shards import LifecycleShard
from storage_engine.policies.policy import NodePolicy
from storage_engine.rules.cleaning import (
    DELETE,
    DROP_LOCAL,
    clean_action,
    clean_trigger,
    cleanable_prefix,
    cleaning_pressure,
    file_expired,
    forced_cleaning,
    local_copies_first,
    purge_pending_first,
)
from storage_engine.rules.work import DryFiles, ShardWork, after_freeing, count_freed, sum_work, would_drop

log = logging.getLogger(__name__)


@runtime_checkable
class LocalCopies(Protocol):
    """A shard whose sealed segments may also be in an object store (tiered storage):
    :meth:`~storage_engine.segment.tiered_log.TieredShardLog.drop_local_copies`."""

    def drop_local_copies(self, bases: Collection[int], now: int, delay_ms: int) -> tuple[int, int, ShardWork]: ...


OffloadFirst = Callable[[int], LifecycleResult]
"""One offload step over every namespace with remote storage, uploading at most this many segments."""


class FileCleaner:
    def __init__(self, rt: LifecycleRuntime) -> None:
        self._rt = rt
        # Set by an engine with an object-store tier: under disk pressure the cleaner offloads first.
        self.offload_first: OffloadFirst | None = None

    def clean_files(self, manual: bool = False, *, dry_run: bool = False) -> LifecycleResult:
        t0 = time.perf_counter()
        node = self._rt.node_policy
        totals: dict[str, Any] = {}
        if not dry_run:
            self._rt.counters.add("cleaner_runs_total")
            self._offload_under_pressure(node, totals)
        namespaces = self._rt.source.lifecycle_namespaces()
        everything = [s for _, shards in namespaces for s in shards]
        with self._rt.ops:
            now = self._rt.clock.now_ms()
            pending_before = self._rt.source.pending_delete_bytes()
            if not dry_run:
                self._rt.remove_files(everything, now, totals)
            status = self._rt.disk.check()
            if dry_run:  # the real run removed the files due now first: they are freed, no longer pending
                status = self._dry_remove(everything, now, node, status, totals)
            if purge_pending_first(status):
                # What retention or reclamation already deleted goes first, whatever its delay: it
                # may be all the disk needs, and no live segment is touched for bytes already free.
                if dry_run:  # every pending file no reader holds
                    status = self._dry_remove(everything, now, node, status, totals, purge=True)
                else:
                    self._rt.remove_files(everything, now, totals, purge=True)
                    status = self._rt.disk.check()
            trigger = clean_trigger(now, status, node, manual)
            if trigger is None:  # (above clean_forcibly is above max_used: never None then)
                self._count_freed(totals, pending_before, status if dry_run else None)
                return self._rt.result("clean_files", None, None, t0, skipped="not_due", **totals)
            # Each shard's segments (an idle active segment sealed first, or seen sealed by a dry run).
            listed = [
                (s, self._rt.step_segments(s, policy, now, totals, dry_run), policy.remote_storage_enabled)
                for policy, shards in namespaces
                for s in shards
            ]
            for _, segments, _ in listed:
                totals["scanned"] = totals.get("scanned", 0) + len(segments)
            # Above clean_forcibly: local copies of segments also in the object store go first.
            done: set[tuple[int, int]] = set()
            status, deleted = self._drop_local_copies_first(listed, status, node, totals, done, dry_run)
            forced = forced_cleaning(status, node)
            # Oldest first across shards, each shard's candidates in offset order.
            heap: list[tuple[int, int, int, _Chain]] = []
            for i, (_, segments, _) in enumerate(listed):
                it = iter(cleanable_prefix(segments, node, now, forced=True))
                first = next(it, None)
                if first is not None:
                    heapq.heappush(heap, (first.modified_at, first.base_offset, i, _Chain(first, it)))
            while heap:
                if deleted >= node.delete_batch_max and not dry_run:
                    totals["more"] = True
                    break
                _, _, i, chain = heapq.heappop(heap)
                shard, _, tiered = listed[i]
                segment = chain.head
                now = self._rt.clock.now_ms()
                if (i, segment.base_offset) not in done:
                    action = clean_action(segment, node, now, forced=forced, tiered=tiered)
                    if action is None:
                        continue  # this shard stops at its first segment that does not qualify
                    if dry_run:
                        work = (
                            would_drop([segment]) if action == DELETE else ShardWork(bytes_reclaimed=segment.size_bytes)
                        )
                    else:
                        if deleted:
                            self._rt.sleep(node.delete_interval_ms / 1000)
                        work = self._act(shard, segment.base_offset, action, now, node)
                    if action == DROP_LOCAL:
                        totals["local_copies_dropped"] = totals.get("local_copies_dropped", 0) + 1
                        totals["local_bytes_dropped"] = totals.get("local_bytes_dropped", 0) + work.bytes_reclaimed
                        deleted += 1
                    elif work.segments_deleted and not file_expired(segment, node, now):
                        work.forced_deletes = work.segments_deleted
                    sum_work(totals, work)
                    deleted += work.segments_deleted
                    if not dry_run and action == DELETE:
                        self._rt.counters.add_many(
                            {
                                "cleaner_segments_deleted_total": work.segments_deleted,
                                "cleaner_bytes_deleted_total": work.bytes_reclaimed,
                                "cleaner_forced_deletes_total": work.forced_deletes,
                            }
                        )
                    if forced:  # stop forcing as soon as use (without pending files) is back at the watermark
                        status = after_freeing(status, work.bytes_reclaimed, node) if dry_run else self._rt.disk.check()
                        forced = forced_cleaning(status, node)
                nxt = next(chain.rest, None)
                if nxt is not None:
                    heapq.heappush(heap, (nxt.modified_at, nxt.base_offset, i, _Chain(nxt, chain.rest)))
            return self._finish(everything, totals, pending_before, status, t0, dry_run)

    def _finish(
        self,
        everything: list[LifecycleShard],
        totals: dict[str, Any],
        pending_before: int,
        status: DiskStatus,
        t0: float,
        dry_run: bool,
    ) -> LifecycleResult:
        """The end of a run that got past its trigger (the ops lock held)."""
        if dry_run:
            self._count_freed(totals, pending_before, status)
            return self._rt.result("clean_files", None, None, t0, **totals)
        now = self._rt.clock.now_ms()
        self._rt.remove_files(everything, now, totals)
        self._count_freed(totals, pending_before)
        self._rt.disk.check()
        return self._rt.result("clean_files", None, None, t0, **totals)

    @staticmethod
    def _dry_remove(
        shards: list[LifecycleShard],
        now: int,
        node: NodePolicy,
        status: DiskStatus,
        totals: dict[str, Any],
        *,
        purge: bool = False,
    ) -> DiskStatus:
        """A dry run's ``remove_files`` (with ``purge``: of every file no reader holds): the disk it would
        leave, and the files it would remove in ``files_removed`` (the pending files as the store has them:
        the due ones of a purge are the same files, counted once)."""
        dry = DryFiles.start(shards, now, node, sum(s.pending_file_bytes() for s in shards), purge=purge)
        totals["files_removed"] = dry.removed
        return after_freeing(status, status.pending_delete_bytes - dry.pending, node, pending=dry.pending)

    def _act(self, shard: LifecycleShard, base: int, action: str, now: int, node: NodePolicy) -> ShardWork:
        """Delete segment ``base`` whole, or drop its local copy (``bytes_reclaimed``: the copy's bytes)."""
        if action == DELETE:
            return shard.drop_segments([base], now, 0)
        if not isinstance(shard, LocalCopies):
            return ShardWork()
        _, nbytes, work = shard.drop_local_copies([base], now, 0)  # removed at once, as its deletions
        work.bytes_reclaimed += nbytes
        return work

    def _drop_local_copies_first(
        self,
        listed: list[tuple[LifecycleShard, list[SegmentInfo], bool]],
        status: DiskStatus,
        node: NodePolicy,
        totals: dict[str, Any],
        done: set[tuple[int, int]],
        dry_run: bool,
    ) -> tuple[DiskStatus, int]:
        """Above ``disk_clean_forcibly_ratio``: local copies of segments also in the object store,
        oldest first across shards, until use is back at the watermark (forced cleaning enabled
        or not: nothing is lost). Returns the disk after it and how many copies went."""
        copies = sorted(
            (seg.modified_at, seg.base_offset, i, seg.size_bytes)
            for i, (shard, segments, _) in enumerate(listed)
            if isinstance(shard, LocalCopies)
            for seg in segments[:-1]
            if seg.tier is SegmentTier.BOTH and seg.state is SegmentState.SEALED
        )
        dropped = 0
        for _, base, i, size in copies:
            if not local_copies_first(status, node):
                break
            if dropped >= node.delete_batch_max and not dry_run:
                totals["more"] = True
                break
            if dry_run:
                work = ShardWork(bytes_reclaimed=size)
                status = after_freeing(status, size, node)
            else:
                if dropped:
                    self._rt.sleep(node.delete_interval_ms / 1000)
                work = self._act(listed[i][0], base, DROP_LOCAL, self._rt.clock.now_ms(), node)
                status = self._rt.disk.check()
            done.add((i, base))
            dropped += 1
            totals["local_copies_dropped"] = totals.get("local_copies_dropped", 0) + 1
            totals["local_bytes_dropped"] = totals.get("local_bytes_dropped", 0) + work.bytes_reclaimed
            sum_work(totals, work)
        return status, dropped

    def _offload_under_pressure(self, node: NodePolicy, totals: dict[str, Any]) -> None:
        """Above ``disk_max_used_ratio``, an engine with an object-store tier offloads first (at most
        ``delete_batch_max`` segments, as paced as any offload), so that what follows can drop
        local copies instead of deleting data that exists nowhere else. A failing store is logged
        and counted by the offload step; the cleaner goes on."""
        if self.offload_first is None:
            return
        if not cleaning_pressure(self._rt.disk.check(), node):
            return
        try:
            result = self.offload_first(node.delete_batch_max)
        except Exception as exc:  # the store unreachable: nothing was deleted, the run goes on
            log.warning("file cleaner: offloading under disk pressure failed: %s", exc)
            return
        for name in ("segments_offloaded", "bytes_offloaded", "local_copies_dropped", "local_bytes_dropped"):
            totals[name] = totals.get(name, 0) + getattr(result, name)

    def _count_freed(self, totals: dict[str, Any], pending_before: int, dry: DiskStatus | None = None) -> None:
        """Make a cleaner run's ``bytes_reclaimed`` the bytes it freed, and report what is pending, as every
        deleting step does (:func:`storage_engine.rules.work.count_freed`), over the whole node.

        A dry run passes the disk it would leave (``dry``): the files due now and its purge free
        what was pending, its drops free at once."""
        pending_after = self._rt.source.pending_delete_bytes() if dry is None else dry.pending_delete_bytes
        count_freed(totals, pending_before, pending_after)


class _Chain:
    """A shard's next cleaning candidate and the rest of its candidates."""

    __slots__ = ("head", "rest")

    def __init__(self, head: SegmentInfo, rest: Iterator[SegmentInfo]) -> None:
        self.head = head
        self.rest = rest
