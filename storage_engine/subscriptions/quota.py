"""Backlog quotas (Pulsar): the append-path check (hold, reject or evict) and the periodic one.

Eviction moves cursors one decision at a time, each from the backlogs the previous moves left; a
dry run of the periodic check takes the same decisions over copies of the cursors (so nothing is
persisted or seen by readers) and counts what the real check would move.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any

from storage_engine.api import (
    LifecycleResult,
)
from storage_engine.errors import (
    BacklogQuotaExceededError,
    ProducerHeldTooLongError,
)
from storage_engine.lifecycle.runtime import LifecycleRuntime
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.subscriptions.cursors import Subscription, first_unacked
from storage_engine.subscriptions.registry import SubscriptionReads, Subscriptions

EVICTION_TARGET = 0.9  # consumer_backlog_eviction moves cursors until backlog ≤ 90 % of the limit
HOLD_POLL_MS = 100  # a held append re-checks the backlog this often


@dataclass(frozen=True, slots=True)
class QuotaBreach:
    kind: str  # "size" or "time"
    limit: int  # bytes or ms
    current: int


class BacklogQuota:
    def __init__(self, rt: LifecycleRuntime, subscriptions: Subscriptions, reads: SubscriptionReads) -> None:
        self._rt = rt
        self._subs = subscriptions
        self._reads = reads

    @staticmethod
    def _has_quota(policy: NamespacePolicy) -> bool:
        return policy.backlog_quota_bytes is not None or policy.backlog_quota_seconds is not None

    def _quota_breach(self, namespace: str, policy: NamespacePolicy, factor: float = 1.0) -> QuotaBreach | None:
        """The worst breach of the namespace's quota over its subscriptions, or ``None``."""
        info, subs = self._subs.selected(namespace, None)
        if not subs:
            return None
        now = self._rt.clock.now_ms()
        with_age = policy.backlog_quota_seconds is not None
        worst_bytes = worst_age = 0
        views = self._subs.views(namespace, info.shards)
        for sub in subs:
            total = 0
            for s in range(info.shards):
                b = self._subs.shard_backlog(namespace, sub, s, *views[s], now, with_age=with_age)
                total += b.bytes
                worst_age = max(worst_age, b.age_ms)
            worst_bytes = max(worst_bytes, total)
        if policy.backlog_quota_bytes is not None and worst_bytes > policy.backlog_quota_bytes * factor:
            return QuotaBreach("size", policy.backlog_quota_bytes, worst_bytes)
        if policy.backlog_quota_seconds is not None and worst_age > policy.backlog_quota_seconds * 1000 * factor:
            return QuotaBreach("time", policy.backlog_quota_seconds * 1000, worst_age)
        return None

    def check_quota(self, namespace: str, policy: NamespacePolicy) -> None:
        """The append-path check; stores call it only when the namespace has a quota."""
        if not self._subs.has_subscriptions(namespace):
            return
        breach = self._quota_breach(namespace, policy)
        if breach is None:
            return
        mode = policy.backlog_quota_policy
        if mode == "producer_exception":
            self._rt.counters.add("producer_rejected_total")
            raise BacklogQuotaExceededError(namespace, breach.kind, breach.limit, breach.current)
        if mode == "consumer_backlog_eviction":
            self._evict(namespace, policy)
            return
        self._rt.counters.add("producer_held_total")
        started = self._rt.clock.now_ms()
        while True:
            waited = self._rt.clock.now_ms() - started
            left = policy.backlog_hold_timeout_ms - waited
            if left <= 0:
                self._rt.counters.add("producer_rejected_total")
                raise ProducerHeldTooLongError(namespace, breach.kind, breach.limit, breach.current, waited)
            self._rt.sleep(min(left, HOLD_POLL_MS) / 1000)
            current = self._reads.get_namespace(namespace).policy  # the policy may change while held
            if not self._has_quota(current):
                return
            policy = replace(current, backlog_hold_timeout_ms=policy.backlog_hold_timeout_ms)
            again = self._quota_breach(namespace, policy)
            if again is None:
                return
            breach = again

    def _evict(self, namespace: str, policy: NamespacePolicy, dry_run: bool = False) -> tuple[int, int]:
        """consumer_backlog_eviction: move the slowest cursors forward until every backlog is
        ≤ 90 % of the limit. Returns how many messages were evicted and how many cursors (a
        subscription's on one shard) moved. A dry run moves copies of the cursors."""
        evicted = moves = 0
        info, subs = self._subs.selected(namespace, None)
        moved: set[tuple[str, int]] = set()
        if dry_run:
            with self._subs.lock:
                subs = [Subscription(sub.name, sub.created_at, list(sub.cursors)) for sub in subs]

        def advance(sub: Subscription, shard: int, offset: int) -> int:
            if not dry_run:
                gone = self._subs.advance(namespace, sub, shard, offset)
            else:
                gone = max(0, offset - sub.cursors[shard])
                sub.cursors[shard] = max(sub.cursors[shard], offset)
            if gone:
                moved.add((sub.name, shard))
            return gone

        if policy.backlog_quota_bytes is not None:
            target = int(policy.backlog_quota_bytes * EVICTION_TARGET)
            for _ in range(100_000):  # every step moves a cursor by ≥ 1
                now = self._rt.clock.now_ms()
                views = self._subs.views(namespace, info.shards)
                rows = [
                    [
                        self._subs.shard_backlog(namespace, sub, s, *views[s], now, with_age=False)
                        for s in range(info.shards)
                    ]
                    for sub in subs
                ]
                totals = [sum(b.bytes for b in row) for row in rows]
                if not totals or max(totals) <= target:
                    break
                i = max(range(len(subs)), key=totals.__getitem__)  # the slowest subscription
                b = max(rows[i], key=lambda x: x.bytes)  # its largest shard backlog
                excess = totals[i] - target
                skip = max(1, min(b.messages, math.ceil(b.messages * excess / b.bytes))) if b.bytes else b.messages
                if skip <= 0:
                    break
                stats = views[b.shard][0]
                new = first_unacked(b.cursor, stats.log_start_offset) + skip - 1
                if not advance(subs[i], b.shard, min(new, stats.end_offset - 1)):
                    break
                evicted += skip
                moves += 1
        if policy.backlog_quota_seconds is not None:
            limit = policy.backlog_quota_seconds * 1000
            now = self._rt.clock.now_ms()
            keep_from = now - int(limit * EVICTION_TARGET)
            for s in range(info.shards):
                stats = self._reads.shard_stats(namespace, s)
                first_young = self._reads.offset_for_timestamp(namespace, s, keep_from)
                new = stats.end_offset - 1 if first_young is None else first_young - 1
                for sub in subs:
                    cursor = sub.cursors[s]
                    start = first_unacked(cursor, stats.log_start_offset)
                    if new >= start and advance(sub, s, new):
                        evicted += new - start + 1
                        moves += 1
        if not dry_run:
            self._rt.counters.add("backlog_evictions_total", moves)
        return evicted, len(moved)

    def enforce_backlog_quota(self, namespace: str, *, dry_run: bool = False) -> LifecycleResult:
        t0 = time.perf_counter()
        info, subs = self._subs.selected(namespace, None)
        policy = info.policy
        values: dict[str, Any] = {"scanned": len(subs) * info.shards}
        if not self._has_quota(policy):
            values["skipped"] = "policy"
        elif (
            policy.backlog_quota_policy == "consumer_backlog_eviction"
            and subs
            and self._quota_breach(namespace, policy) is not None
        ):
            values["messages_acknowledged"], values["cursors_moved"] = self._evict(namespace, policy, dry_run)
        return LifecycleResult(
            operation="backlog_quota",
            namespace=namespace,
            duration_ms=round((time.perf_counter() - t0) * 1000, 3),
            **values,
        )
