"""Message TTL (Pulsar): cursors move forward past records that expired unacknowledged.

A dry run takes the same decisions over the same cursors and moves none: it counts the cursors
that would move and the messages they would acknowledge (``cursors_moved``,
``messages_acknowledged``), without taking the subscriptions' turn (it changes nothing, so it
cannot race a real check).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from storage_engine.api import (
    SUBSCRIPTION_COUNTS,
    LifecycleResult,
    SegmentInfo,
    ShardStats,
)
from storage_engine.errors import (
    AlreadyRunningError,
    InvalidArgumentError,
    OffsetOutOfRangeError,
)
from storage_engine.lifecycle.runtime import LifecycleRuntime
from storage_engine.lifecycle.sweeps import NodeSweep
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.expiry import is_expired
from storage_engine.subscriptions.cursors import first_unacked, whole_segment_expired
from storage_engine.subscriptions.registry import SubscriptionReads, Subscriptions

EXPIRY_READ_BATCH = 500


class MessageExpiry:
    def __init__(
        self, rt: LifecycleRuntime, sweep: NodeSweep, subscriptions: Subscriptions, reads: SubscriptionReads
    ) -> None:
        self._rt = rt
        self._sweep = sweep
        self._subs = subscriptions
        self._reads = reads

    def expire_subscriptions(
        self,
        namespace: str | None,
        shard: int | None = None,
        *,
        name: str | None = None,
        position: int | None = None,
        dry_run: bool = False,
    ) -> LifecycleResult:
        if namespace is None:  # node-wide: every namespace; one already running is left to its run
            if shard is not None or name is not None or position is not None:
                raise InvalidArgumentError("namespace", "is required with a shard, subscription or position")
            return self._sweep.run(
                "subscription_expiry",
                lambda ns, _limit: self._expire_unless_running(ns, dry_run),
                None,
                dry_run=dry_run,
                counts=SUBSCRIPTION_COUNTS,
            )
        t0 = time.perf_counter()
        info, subs = self._subs.selected(namespace, name)
        shards = range(info.shards) if shard is None else [self._subs.check_shard(info, shard)]
        if position is not None:
            if shard is None:
                raise InvalidArgumentError("shard", "is required with a position")
            if isinstance(position, bool) or not isinstance(position, int):
                raise InvalidArgumentError("position", "must be an integer")
        policy = info.policy
        taken: list[tuple[str, str]] = []
        with self._subs.lock:
            for sub in [] if dry_run else subs:
                key = (namespace, sub.name)
                if key in self._subs.running:
                    for k in taken:
                        self._subs.running.discard(k)
                    raise AlreadyRunningError(f"message expiry of subscription {namespace}/{sub.name}")
                self._subs.running.add(key)
                taken.append(key)
        acknowledged = scanned = moved = 0
        try:
            now = self._rt.clock.now_ms()
            for s in shards:
                stats = self._reads.shard_stats(namespace, s)
                segments = None if position is not None else self._reads.list_segments(namespace, s)
                for sub in subs:
                    cursor = sub.cursors[s]
                    if position is not None:
                        target = position if position < stats.end_offset else cursor  # past the end: nothing
                    else:
                        assert segments is not None
                        target, looked = self._expiry_position(namespace, s, cursor, stats, segments, policy, now)
                        scanned += looked
                    target = min(target, stats.end_offset - 1)
                    if target > cursor:
                        start = first_unacked(cursor, stats.log_start_offset)
                        if dry_run or self._subs.advance(namespace, sub, s, target):
                            acknowledged += max(0, target - start + 1)
                            moved += 1
        finally:
            with self._subs.lock:
                for k in taken:
                    self._subs.running.discard(k)
        if not dry_run:
            self._rt.counters.add("subscription_ttl_expired_total", acknowledged)
        return LifecycleResult(
            operation="subscription_expiry",
            namespace=namespace,
            shard=shard,
            scanned=scanned,
            cursors_moved=moved,
            messages_acknowledged=acknowledged,
            duration_ms=round((time.perf_counter() - t0) * 1000, 3),
        )

    def _expire_unless_running(self, namespace: str, dry_run: bool) -> LifecycleResult:
        try:
            return self.expire_subscriptions(namespace, dry_run=dry_run)
        except AlreadyRunningError:
            return LifecycleResult(operation="subscription_expiry", namespace=namespace, skipped="already_running")

    def _expiry_position(
        self,
        namespace: str,
        shard: int,
        cursor: int,
        stats: ShardStats,
        segments: Sequence[SegmentInfo],
        policy: NamespacePolicy,
        now: int,
    ) -> tuple[int, int]:
        """(new cursor, records looked at): past the leading expired unacknowledged records."""
        start = first_unacked(cursor, stats.log_start_offset)
        end = stats.end_offset
        if start >= end:
            return cursor, 0
        pos = start - 1
        ttl_ms = policy.ttl_ms
        for seg in segments:  # whole sealed segments first: by deadline or by seal time
            if seg.record_count == 0 or seg.last_offset <= pos:
                continue
            if not whole_segment_expired(seg, ttl_ms, now):
                break
            pos = seg.last_offset
        looked = 0
        while pos + 1 < end:
            try:
                page = self._reads.read(namespace, shard, pos + 1, max_records=EXPIRY_READ_BATCH)
            except OffsetOutOfRangeError as exc:
                if exc.log_start_offset - 1 > pos:
                    pos = exc.log_start_offset - 1
                    continue
                break
            if not page.records:  # everything left is hidden (expired) or gone
                return max(pos, page.end_offset - 1), looked
            for r in page.records:
                looked += 1
                # A gap before r holds records the read hid (expired) or that are gone.
                if not is_expired(r.timestamp, r.expire_at, ttl_ms, now):
                    return max(pos, r.offset - 1), looked
                pos = r.offset
        return pos, looked
