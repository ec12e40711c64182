"""RocketMQ file cleaning (DESIGN §3 "File cleaning"): the node-wide cleaner.

Oldest segment files first across every shard: those past ``file_reserved_time_ms``
(at the ``delete_when`` hour, or at once above ``disk_max_used_ratio``), and above
``disk_clean_forcibly_ratio`` (with forced cleaning on) any sealed segment, until use is
back under the watermark. ``.deleted`` files retention or reclamation left go first.
Deletes are paced (``delete_interval_ms`` between two, at most ``delete_batch_max`` a run).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterator
from typing import Any

from storage_engine.api import DiskStatus, LifecycleResult, SegmentInfo
from storage_engine.cleaning import (
    clean_trigger,
    cleanable_prefix,
    file_expired,
    forced_cleaning,
    purge_pending_first,
)
from storage_engine.lifecycle.runtime import LifecycleRuntime
from storage_engine.lifecycle.shards import LifecycleShard
from storage_engine.work import after_freeing, sum_work, would_drop


class FileCleaner:
    def __init__(self, rt: LifecycleRuntime) -> None:
        self._rt = rt

    def clean_files(self, manual: bool = False, *, dry_run: bool = False) -> LifecycleResult:
        t0 = time.perf_counter()
        node = self._rt.node_policy
        namespaces = self._rt.source.lifecycle_namespaces()
        everything = [s for _, shards in namespaces for s in shards]
        totals: dict[str, Any] = {}
        if not dry_run:
            self._rt.counters.add("cleaner_runs_total")
        with self._rt.ops:
            now = self._rt.clock.now_ms()
            pending_before = self._rt.source.pending_delete_bytes()
            if not dry_run:
                self._rt.remove_files(everything, now, totals)
            status = self._rt.disk.check()
            if purge_pending_first(status):
                # What retention or reclamation already deleted goes first, whatever its delay: it
                # may be all the disk needs, and no live segment is touched for bytes already free.
                if dry_run:
                    status = after_freeing(status, status.pending_delete_bytes, node, pending=0)
                else:
                    self._rt.remove_files(everything, now, totals, purge=True)
                    status = self._rt.disk.check()
            trigger = clean_trigger(now, status, node, manual)
            if trigger is None:
                self._count_freed(totals, pending_before, status if dry_run else None)
                return self._rt.result("clean_files", None, None, t0, skipped="not_due", **totals)
            forced = forced_cleaning(status, node)
            # Oldest first across shards, each shard's candidates in offset order (an idle active
            # segment sealed first, or seen sealed by a dry run).
            heap: list[tuple[int, int, int, _Chain]] = []
            by_id: dict[int, LifecycleShard] = {}
            listed = [
                (s, self._rt.step_segments(s, policy, now, totals, dry_run))
                for policy, shards in namespaces
                for s in shards
            ]
            for i, (s, segments) in enumerate(listed):
                totals["scanned"] = totals.get("scanned", 0) + len(segments)
                it = iter(cleanable_prefix(segments, node, now, forced=True))
                by_id[i] = s
                first = next(it, None)
                if first is not None:
                    heapq.heappush(heap, (first.modified_at, first.base_offset, i, _Chain(first, it)))
            deleted = 0
            while heap:
                if deleted >= node.delete_batch_max and not dry_run:
                    totals["more"] = True
                    break
                _, _, i, chain = heapq.heappop(heap)
                segment = chain.head
                now = self._rt.clock.now_ms()
                expired = file_expired(segment, node, now)
                if not (expired or forced):
                    continue  # this shard stops at its first segment that does not qualify
                if dry_run:
                    work = would_drop([segment])
                else:
                    if deleted:
                        self._rt.sleep(node.delete_interval_ms / 1000)
                    work = by_id[i].drop_segments([segment.base_offset], now, 0)
                if work.segments_deleted and not expired:
                    work.forced_deletes = work.segments_deleted
                sum_work(totals, work)
                deleted += work.segments_deleted
                if not dry_run:
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
            if dry_run:
                self._count_freed(totals, pending_before, status)
                return self._rt.result("clean_files", None, None, t0, **totals)
            now = self._rt.clock.now_ms()
            self._rt.remove_files(everything, now, totals)
            self._count_freed(totals, pending_before)
            self._rt.disk.check()
        return self._rt.result("clean_files", None, None, t0, **totals)

    def _count_freed(self, totals: dict[str, Any], pending_before: int, dry: DiskStatus | None = None) -> None:
        """Make a cleaner run's ``bytes_reclaimed`` the bytes it freed, and report what is pending.

        Dropping a segment counts its bytes as reclaimed, but a file a reader still holds
        only becomes pending; removing files deleted earlier frees bytes no drop of this run
        counted. So: freed = dropped + (pending before − pending after). Stores without
        files never have pending bytes: what they drop counts as freed (RocksDB hands the
        space back when it compacts the dropped range). A dry run passes the disk it would
        leave (``dry``): its drops free at once and its purge frees what was pending.
        """
        pending_after = self._rt.source.pending_delete_bytes() if dry is None else dry.pending_delete_bytes
        totals["bytes_reclaimed"] = totals.get("bytes_reclaimed", 0) + pending_before - pending_after
        totals["pending_delete_bytes"] = pending_after


class _Chain:
    """A shard's next cleaning candidate and the rest of its candidates."""

    __slots__ = ("head", "rest")

    def __init__(self, head: SegmentInfo, rest: Iterator[SegmentInfo]) -> None:
        self.head = head
        self.rest = rest
