"""Subscriptions, message TTL and backlog quotas (Pulsar semantics, DESIGN §2 and §3).

:class:`Subscriptions` (a part of :class:`storage_engine.engine.Engine`)
implements the subscription half of the :class:`~storage_engine.api.StorageAdapter`
contract once, for every store, on top of the engine's own public reads
(:class:`SubscriptionReads`). A store only says how cursors persist (a
:data:`CursorWriter` and the subscriptions it restored; the memory store keeps
them in memory); the engine calls :meth:`Subscriptions.check_quota` on its append
path (only when the namespace has a quota, so an append without one pays
nothing) and :meth:`Subscriptions.forget` when a namespace is deleted.

The cursor math:

- a cursor is a shard's *mark-delete position*: every offset ≤ it is
  acknowledged; -1 means nothing is;
- backlog messages = ``end_offset − max(cursor + 1, log_start_offset)``;
- backlog bytes: whole segments after the cursor plus the segment holding it
  prorated by offset (O(segments), no record is read);
- backlog age: now − timestamp of the first visible record after the cursor.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from storage_engine.api import (
    BacklogInfo,
    LifecycleResult,
    NamespaceInfo,
    ReadResult,
    SegmentInfo,
    SegmentState,
    ShardStats,
    SubscriptionInfo,
)
from storage_engine.errors import (
    AlreadyRunningError,
    BacklogQuotaExceededError,
    InvalidArgumentError,
    OffsetOutOfRangeError,
    ProducerHeldTooLongError,
    SubscriptionExistsError,
    UnknownSubscriptionError,
)
from storage_engine.expiry import is_expired, segment_expired
from storage_engine.lifecycle.runtime import LifecycleRuntime
from storage_engine.lifecycle.sweeps import NodeSweep
from storage_engine.policy import NamespacePolicy
from storage_engine.retention import RetentionPlan
from storage_engine.validation import check_int, check_shard, check_timestamp

SUBSCRIPTION_COUNTERS = (
    "subscription_ttl_expired_total",
    "backlog_evictions_total",
    "producer_held_total",
    "producer_rejected_total",
)
INITIAL_POSITIONS = ("earliest", "latest")
EVICTION_TARGET = 0.9  # consumer_backlog_eviction moves cursors until backlog ≤ 90 % of the limit
HOLD_POLL_MS = 100  # a held append re-checks the backlog this often
EXPIRY_READ_BATCH = 500
_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")


@dataclass(slots=True)
class Subscription:
    """A subscription's state: guarded by the mixin's ``_subs_lock``."""

    name: str
    created_at: int
    cursors: list[int]

    def pack(self) -> bytes:
        return json.dumps({"created_at": self.created_at, "cursors": self.cursors}).encode()

    @classmethod
    def unpack(cls, name: str, raw: bytes) -> Subscription:
        body = json.loads(raw)
        return cls(name, int(body["created_at"]), [int(c) for c in body["cursors"]])


# -- pure cursor math (shared, unit-testable) -------------------------------------------------------
def first_unacked(cursor: int, log_start_offset: int) -> int:
    """The first offset still in the backlog: after the cursor, never below the log start."""
    return max(cursor + 1, log_start_offset)


def backlog_messages(cursor: int, log_start_offset: int, end_offset: int) -> int:
    """``end_offset − cursor − 1`` counting only stored offsets (≥ the log start)."""
    return max(0, end_offset - first_unacked(cursor, log_start_offset))


def backlog_bytes(segments: Sequence[SegmentInfo], start: int) -> int:
    """Stored bytes at or after ``start``: whole segments, the one holding ``start`` prorated."""
    total = 0
    for seg in segments:
        if seg.record_count == 0 or seg.last_offset < start:
            continue
        if seg.base_offset >= start:
            total += seg.size_bytes
        else:
            span = seg.last_offset - seg.base_offset + 1
            total += seg.size_bytes * (seg.last_offset - start + 1) // span
    return total


def whole_segment_expired(seg: SegmentInfo, ttl_ms: int | None, now: int) -> bool:
    """Every record of a sealed segment is past message TTL: by its deadline, or by its seal
    (last write) time, so producer timestamps in the future cannot keep it alive."""
    if seg.state is not SegmentState.SEALED or seg.record_count == 0:
        return False
    if segment_expired(seg, ttl_ms, now):
        return True
    return ttl_ms is not None and seg.modified_at + ttl_ms <= now


def cap_retention_plan(plan: RetentionPlan, segments: Sequence[SegmentInfo], floor: int) -> RetentionPlan:
    """Keep only the leading segments every subscription acknowledged (``last_offset ≤ floor``)."""
    count = 0
    for seg in segments[: plan.count]:
        if seg.record_count and seg.last_offset > floor:
            break
        count += 1
    if count == plan.count:
        return plan
    return RetentionPlan(count, False, plan.reasons[:count])


@dataclass(frozen=True, slots=True)
class QuotaBreach:
    kind: str  # "size" or "time"
    limit: int  # bytes or ms
    current: int


class SubscriptionReads(Protocol):
    """The contract's reads subscriptions are built on (the engine provides them)."""

    def get_namespace(self, name: str) -> NamespaceInfo: ...
    def shard_stats(self, namespace: str, shard: int) -> ShardStats: ...
    def list_segments(self, namespace: str, shard: int) -> list[SegmentInfo]: ...
    def offset_for_timestamp(self, namespace: str, shard: int, timestamp: int) -> int | None: ...
    def read(
        self, namespace: str, shard: int, offset: int, max_records: int = 500, max_bytes: int = 1 << 20
    ) -> ReadResult: ...


CursorWriter = Callable[[str, "Subscription", bool], None]
"""Write (``False``) or delete (``True``) one subscription's cursors durably; called under the lock."""


def keep_in_memory(namespace: str, sub: Subscription, deleted: bool) -> None:
    """The cursor writer of a store without durability (memory): nothing to write."""


class Subscriptions:
    """The subscription calls of the contract, for any store (see the module docstring).

    ``persist`` writes cursors durably; ``restored`` are the (namespace, subscription)
    pairs persisted earlier, read by the store when it opens.
    """

    def __init__(
        self,
        rt: LifecycleRuntime,
        sweep: NodeSweep,
        reads: SubscriptionReads,
        persist: CursorWriter = keep_in_memory,
        restored: Sequence[tuple[str, Subscription]] = (),
    ) -> None:
        self._rt = rt
        self._sweep = sweep
        self._reads = reads
        self._persist_cursors = persist
        self._subs_lock = threading.RLock()
        self._subs: dict[str, dict[str, Subscription]] = {}
        self._subs_running: set[tuple[str, str]] = set()
        rt.counters.set_many(dict.fromkeys(SUBSCRIPTION_COUNTERS, 0))
        for namespace, sub in restored:
            self._subs.setdefault(namespace, {})[sub.name] = sub

    def _subs_persist(self, namespace: str, sub: Subscription, *, deleted: bool = False) -> None:
        self._persist_cursors(namespace, sub, deleted)

    def forget(self, namespace: str) -> None:
        """The namespace was deleted: its subscriptions go with it."""
        with self._subs_lock:
            self._subs.pop(namespace, None)

    def has_subscriptions(self, namespace: str) -> bool:
        return bool(self._subs.get(namespace))

    # -- helpers ---------------------------------------------------------------------------------------------
    def _sub(self, namespace: str, name: str) -> tuple[NamespaceInfo, Subscription]:
        info = self._reads.get_namespace(namespace)  # raises for an unknown namespace or a closed engine
        with self._subs_lock:
            sub = self._subs.get(namespace, {}).get(name) if isinstance(name, str) else None
        if sub is None:
            raise UnknownSubscriptionError(namespace, str(name))
        return info, sub

    def _selected(self, namespace: str, name: str | None) -> tuple[NamespaceInfo, list[Subscription]]:
        if name is not None:
            info, sub = self._sub(namespace, name)
            return info, [sub]
        info = self._reads.get_namespace(namespace)
        with self._subs_lock:
            subs = sorted(self._subs.get(namespace, {}).values(), key=lambda s: s.name)
        return info, subs

    @staticmethod
    def _check_shard(info: NamespaceInfo, shard: object) -> int:
        return check_shard(info.name, shard, info.shards)

    def _views(self, namespace: str, shards: int) -> dict[int, tuple[ShardStats, list[SegmentInfo]]]:
        return {
            s: (self._reads.shard_stats(namespace, s), self._reads.list_segments(namespace, s)) for s in range(shards)
        }

    def _info(self, namespace: str, sub: Subscription) -> SubscriptionInfo:
        with self._subs_lock:
            return SubscriptionInfo(namespace, sub.name, tuple(sub.cursors), sub.created_at)

    def _advance(self, namespace: str, sub: Subscription, shard: int, offset: int) -> int:
        """Move a cursor forward to ``offset`` (never backward); returns how far it moved."""
        with self._subs_lock:
            current = sub.cursors[shard]
            if offset <= current or self._subs.get(namespace, {}).get(sub.name) is not sub:
                return 0
            sub.cursors[shard] = offset
            self._subs_persist(namespace, sub)
            return offset - current

    # -- the contract ----------------------------------------------------------------------------------------
    def create_subscription(self, namespace: str, name: str, *, initial: str = "earliest") -> SubscriptionInfo:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise InvalidArgumentError("name", "must match [A-Za-z0-9._-]{1,200}")
        if initial not in INITIAL_POSITIONS:
            raise InvalidArgumentError("initial", f"must be one of {', '.join(INITIAL_POSITIONS)}")
        info = self._reads.get_namespace(namespace)
        with self._subs_lock:
            subs = self._subs.setdefault(namespace, {})
            if name in subs:
                raise SubscriptionExistsError(namespace, name)
            if initial == "latest":
                cursors = [self._reads.shard_stats(namespace, s).end_offset - 1 for s in range(info.shards)]
            else:
                cursors = [-1] * info.shards
            sub = Subscription(name, self._rt.clock.now_ms(), cursors)
            self._subs_persist(namespace, sub)
            subs[name] = sub
        return self._info(namespace, sub)

    def delete_subscription(self, namespace: str, name: str) -> None:
        _, sub = self._sub(namespace, name)
        with self._subs_lock:
            subs = self._subs.get(namespace, {})
            if subs.get(name) is not sub:
                raise UnknownSubscriptionError(namespace, name)
            self._subs_persist(namespace, sub, deleted=True)
            del subs[name]

    def list_subscriptions(self, namespace: str) -> list[SubscriptionInfo]:
        _, subs = self._selected(namespace, None)
        return [self._info(namespace, s) for s in subs]

    def read_subscription(
        self, namespace: str, name: str, shard: int, max_records: int = 500, max_bytes: int = 1 << 20
    ) -> ReadResult:
        info, sub = self._sub(namespace, name)
        shard = self._check_shard(info, shard)
        for _ in range(3):  # retention may move the log start between the two calls
            stats = self._reads.shard_stats(namespace, shard)
            start = min(first_unacked(sub.cursors[shard], stats.log_start_offset), stats.end_offset)
            try:
                return self._reads.read(namespace, shard, start, max_records, max_bytes)
            except OffsetOutOfRangeError:
                continue
        stats = self._reads.shard_stats(namespace, shard)
        return self._reads.read(namespace, shard, stats.log_start_offset, max_records, max_bytes)

    def acknowledge(self, namespace: str, name: str, shard: int, offset: int) -> int:
        info, sub = self._sub(namespace, name)
        shard = self._check_shard(info, shard)
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise InvalidArgumentError("offset", "must be an integer")
        end = self._reads.shard_stats(namespace, shard).end_offset
        if offset >= end:
            raise InvalidArgumentError(
                "offset", f"{offset} is past the end of {namespace}/{shard} (last offset {end - 1})"
            )
        if offset < -1:
            raise InvalidArgumentError("offset", f"{offset} must be ≥ -1")
        self._advance(namespace, sub, shard, offset)
        with self._subs_lock:
            return sub.cursors[shard]

    def seek_subscription(
        self, namespace: str, name: str, shard: int, position: int | None = None, *, timestamp: int | None = None
    ) -> int:
        """Set a cursor to ``position``, backward or forward (Pulsar's ``resetCursor``).

        With ``timestamp`` instead, the cursor goes just before the first record at or after
        it, or to the end when there is none. The change is persisted like an acknowledgement.
        A message-TTL check running on the subscription raises ``AlreadyRunningError``: it
        read the old cursor and would move the new one forward again.
        """
        info, sub = self._sub(namespace, name)
        shard = self._check_shard(info, shard)
        if (position is None) == (timestamp is None):
            raise InvalidArgumentError("position", "give exactly one of position and timestamp")
        end = self._reads.shard_stats(namespace, shard).end_offset
        if timestamp is not None:
            check_timestamp(timestamp)
            found = self._reads.offset_for_timestamp(namespace, shard, timestamp)
            position = end - 1 if found is None else found - 1
        else:
            position = check_int(position, "position", -1)
            if position >= end:
                raise InvalidArgumentError(
                    "position", f"{position} is past the end of {namespace}/{shard} (last offset {end - 1})"
                )
        with self._subs_lock:
            if (namespace, sub.name) in self._subs_running:
                raise AlreadyRunningError(f"message expiry of subscription {namespace}/{sub.name}")
            if self._subs.get(namespace, {}).get(sub.name) is not sub:
                raise UnknownSubscriptionError(namespace, sub.name)
            before = sub.cursors[shard]
            if before != position:
                sub.cursors[shard] = position
                try:
                    self._subs_persist(namespace, sub)
                except BaseException:
                    sub.cursors[shard] = before  # not durable: not in effect either
                    raise
            return position

    def backlog(self, namespace: str, name: str | None = None) -> list[BacklogInfo]:
        info, subs = self._selected(namespace, name)
        now = self._rt.clock.now_ms()
        out: list[BacklogInfo] = []
        views = self._views(namespace, info.shards)
        for sub in subs:
            for shard in range(info.shards):
                stats, segments = views[shard]
                out.append(self._shard_backlog(namespace, sub, shard, stats, segments, now))
        return out

    def _shard_backlog(
        self,
        namespace: str,
        sub: Subscription,
        shard: int,
        stats: ShardStats,
        segments: Sequence[SegmentInfo],
        now: int,
        *,
        with_age: bool = True,
    ) -> BacklogInfo:
        cursor = sub.cursors[shard]
        start = first_unacked(cursor, stats.log_start_offset)
        messages = backlog_messages(cursor, stats.log_start_offset, stats.end_offset)
        nbytes = backlog_bytes(segments, start) if messages else 0
        age = live = 0
        if messages and with_age:
            try:
                page = self._reads.read(namespace, shard, min(start, stats.end_offset), max_records=1)
                live = self._live_from(namespace, shard, segments, start)
            except OffsetOutOfRangeError:  # the log start moved past the cursor meanwhile
                page = None
            if page is not None and page.records:
                age = max(0, now - page.records[0].timestamp)
        return BacklogInfo(namespace, sub.name, shard, cursor, stats.end_offset, messages, nbytes, age, live)

    def _live_from(self, namespace: str, shard: int, segments: Sequence[SegmentInfo], start: int) -> int:
        """Records at or after ``start`` a reader would get: the segments' live counts, and in the
        segment holding ``start`` the visible records on the smaller side of it, counted by reading."""
        live = 0
        for seg in segments:
            if seg.record_count == 0 or seg.last_offset < start:
                continue
            if seg.base_offset >= start:
                live += seg.live_count
            elif seg.last_offset - start < start - seg.base_offset:
                live += self._visible_between(namespace, shard, start, seg.last_offset)
            else:
                live += seg.live_count - self._visible_between(namespace, shard, seg.base_offset, start - 1)
        return live

    def _visible_between(self, namespace: str, shard: int, first: int, last: int) -> int:
        count, offset = 0, first
        while offset <= last:
            page = self._reads.read(namespace, shard, offset, max_records=10_000, max_bytes=64 << 20)
            count += sum(1 for r in page.records if r.offset <= last)
            if not page.records or page.records[-1].offset >= last:
                break
            offset = page.next_offset
        return count

    # -- message TTL -----------------------------------------------------------------------------------------
    def expire_subscriptions(
        self, namespace: str | None, shard: int | None = None, *, name: str | None = None, position: int | None = None
    ) -> LifecycleResult:
        if namespace is None:  # node-wide: every namespace; one already running is left to its run
            if shard is not None or name is not None or position is not None:
                raise InvalidArgumentError("namespace", "is required with a shard, subscription or position")
            return self._sweep.run("subscription_expiry", self._expire_unless_running, None)
        t0 = time.perf_counter()
        info, subs = self._selected(namespace, name)
        shards = range(info.shards) if shard is None else [self._check_shard(info, shard)]
        if position is not None:
            if shard is None:
                raise InvalidArgumentError("shard", "is required with a position")
            if isinstance(position, bool) or not isinstance(position, int):
                raise InvalidArgumentError("position", "must be an integer")
        policy = info.policy
        taken: list[tuple[str, str]] = []
        with self._subs_lock:
            for sub in subs:
                key = (namespace, sub.name)
                if key in self._subs_running:
                    for k in taken:
                        self._subs_running.discard(k)
                    raise AlreadyRunningError(f"message expiry of subscription {namespace}/{sub.name}")
                self._subs_running.add(key)
                taken.append(key)
        expired = scanned = 0
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
                        if self._advance(namespace, sub, s, target):
                            expired += max(0, target - start + 1)
        finally:
            with self._subs_lock:
                for k in taken:
                    self._subs_running.discard(k)
        self._rt.counters.add("subscription_ttl_expired_total", expired)
        return LifecycleResult(
            operation="subscription_expiry",
            namespace=namespace,
            shard=shard,
            scanned=scanned,
            expired_records=expired,
            duration_ms=round((time.perf_counter() - t0) * 1000, 3),
        )

    def _expire_unless_running(self, namespace: str, _limit: int | None) -> LifecycleResult:
        try:
            return self.expire_subscriptions(namespace)
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

    # -- backlog quota ---------------------------------------------------------------------------------------
    @staticmethod
    def _has_quota(policy: NamespacePolicy) -> bool:
        return policy.backlog_quota_bytes is not None or policy.backlog_quota_seconds is not None

    def _quota_breach(self, namespace: str, policy: NamespacePolicy, factor: float = 1.0) -> QuotaBreach | None:
        """The worst breach of the namespace's quota over its subscriptions, or ``None``."""
        info, subs = self._selected(namespace, None)
        if not subs:
            return None
        now = self._rt.clock.now_ms()
        with_age = policy.backlog_quota_seconds is not None
        worst_bytes = worst_age = 0
        views = self._views(namespace, info.shards)
        for sub in subs:
            total = 0
            for s in range(info.shards):
                b = self._shard_backlog(namespace, sub, s, *views[s], now, with_age=with_age)
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
        if not self._subs.get(namespace):
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

    def _evict(self, namespace: str, policy: NamespacePolicy) -> int:
        """consumer_backlog_eviction: move the slowest cursors forward until every backlog is
        ≤ 90 % of the limit. Returns how many messages were evicted."""
        evicted = moves = 0
        info, subs = self._selected(namespace, None)
        if policy.backlog_quota_bytes is not None:
            target = int(policy.backlog_quota_bytes * EVICTION_TARGET)
            for _ in range(100_000):  # every step moves a cursor by ≥ 1
                now = self._rt.clock.now_ms()
                views = self._views(namespace, info.shards)
                rows = [
                    [self._shard_backlog(namespace, sub, s, *views[s], now, with_age=False) for s in range(info.shards)]
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
                moved = self._advance(namespace, subs[i], b.shard, min(new, stats.end_offset - 1))
                if not moved:
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
                    if new >= start and self._advance(namespace, sub, s, new):
                        evicted += new - start + 1
                        moves += 1
        self._rt.counters.add("backlog_evictions_total", moves)
        return evicted

    def enforce_backlog_quota(self, namespace: str) -> LifecycleResult:
        t0 = time.perf_counter()
        info, subs = self._selected(namespace, None)
        policy = info.policy
        values: dict[str, Any] = {"scanned": len(subs) * info.shards}
        if not self._has_quota(policy):
            values["skipped"] = "policy"
        elif (
            policy.backlog_quota_policy == "consumer_backlog_eviction"
            and subs
            and self._quota_breach(namespace, policy) is not None
        ):
            values["expired_records"] = self._evict(namespace, policy)
        return LifecycleResult(
            operation="backlog_quota",
            namespace=namespace,
            duration_ms=round((time.perf_counter() - t0) * 1000, 3),
            **values,
        )

    # -- retention hook --------------------------------------------------------------------------------------
    def retention_plan(
        self, namespace: str, shard: int, policy: NamespacePolicy, segments: Sequence[SegmentInfo], plan: RetentionPlan
    ) -> RetentionPlan:
        """With ``retention_respects_subscriptions``, delete only segments every subscription
        of the shard has acknowledged (``last_offset ≤ min cursor``)."""
        if plan.count == 0 or not policy.retention_respects_subscriptions:
            return plan
        with self._subs_lock:
            subs = list(self._subs.get(namespace, {}).values())
            if not subs:
                return plan
            floor = min(sub.cursors[shard] for sub in subs)
        return cap_retention_plan(plan, segments, floor)
