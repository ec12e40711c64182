"""The subscriptions of every namespace: create, delete, read, acknowledge, seek, backlog."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from storage_engine.api import (
    BacklogInfo,
    NamespaceInfo,
    ReadResult,
    SegmentInfo,
    ShardStats,
    SubscriptionInfo,
)
from storage_engine.errors import (
    AlreadyRunningError,
    InvalidArgumentError,
    OffsetOutOfRangeError,
    SubscriptionExistsError,
    UnknownSubscriptionError,
)
from storage_engine.lifecycle.runtime import LifecycleRuntime
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.retention import RetentionPlan
from storage_engine.rules.validation import check_int, check_shard, check_timestamp
from storage_engine.subscriptions.cursors import (
    SUBSCRIPTION_COUNTERS,
    Subscription,
    backlog_bytes,
    backlog_messages,
    cap_retention_plan,
    first_unacked,
)

INITIAL_POSITIONS = ("earliest", "latest")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")


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
        reads: SubscriptionReads,
        persist: CursorWriter = keep_in_memory,
        restored: Sequence[tuple[str, Subscription]] = (),
    ) -> None:
        self._rt = rt
        self._reads = reads
        self._persist_cursors = persist
        self.lock = threading.RLock()
        self._subs: dict[str, dict[str, Subscription]] = {}
        self.running: set[tuple[str, str]] = set()
        rt.counters.set_many(dict.fromkeys(SUBSCRIPTION_COUNTERS, 0))
        for namespace, sub in restored:
            self._subs.setdefault(namespace, {})[sub.name] = sub

    def _subs_persist(self, namespace: str, sub: Subscription, *, deleted: bool = False) -> None:
        self._persist_cursors(namespace, sub, deleted)

    def forget(self, namespace: str) -> None:
        """The namespace was deleted: its subscriptions go with it."""
        with self.lock:
            self._subs.pop(namespace, None)

    def has_subscriptions(self, namespace: str) -> bool:
        return bool(self._subs.get(namespace))

    # -- helpers ---------------------------------------------------------------------------------------------
    def _sub(self, namespace: str, name: str) -> tuple[NamespaceInfo, Subscription]:
        info = self._reads.get_namespace(namespace)  # raises for an unknown namespace or a closed engine
        with self.lock:
            sub = self._subs.get(namespace, {}).get(name) if isinstance(name, str) else None
        if sub is None:
            raise UnknownSubscriptionError(namespace, str(name))
        return info, sub

    def selected(self, namespace: str, name: str | None) -> tuple[NamespaceInfo, list[Subscription]]:
        if name is not None:
            info, sub = self._sub(namespace, name)
            return info, [sub]
        info = self._reads.get_namespace(namespace)
        with self.lock:
            subs = sorted(self._subs.get(namespace, {}).values(), key=lambda s: s.name)
        return info, subs

    @staticmethod
    def check_shard(info: NamespaceInfo, shard: object) -> int:
        return check_shard(info.name, shard, info.shards)

    def views(self, namespace: str, shards: int) -> dict[int, tuple[ShardStats, list[SegmentInfo]]]:
        return {
            s: (self._reads.shard_stats(namespace, s), self._reads.list_segments(namespace, s)) for s in range(shards)
        }

    def _info(self, namespace: str, sub: Subscription) -> SubscriptionInfo:
        with self.lock:
            return SubscriptionInfo(namespace, sub.name, tuple(sub.cursors), sub.created_at)

    def advance(self, namespace: str, sub: Subscription, shard: int, offset: int) -> int:
        """Move a cursor forward to ``offset`` (never backward); returns how far it moved."""
        with self.lock:
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
        with self.lock:
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
        with self.lock:
            subs = self._subs.get(namespace, {})
            if subs.get(name) is not sub:
                raise UnknownSubscriptionError(namespace, name)
            self._subs_persist(namespace, sub, deleted=True)
            del subs[name]

    def list_subscriptions(self, namespace: str) -> list[SubscriptionInfo]:
        _, subs = self.selected(namespace, None)
        return [self._info(namespace, s) for s in subs]

    def read_subscription(
        self, namespace: str, name: str, shard: int, max_records: int = 500, max_bytes: int = 1 << 20
    ) -> ReadResult:
        info, sub = self._sub(namespace, name)
        shard = self.check_shard(info, shard)
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
        shard = self.check_shard(info, shard)
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise InvalidArgumentError("offset", "must be an integer")
        end = self._reads.shard_stats(namespace, shard).end_offset
        if offset >= end:
            raise InvalidArgumentError(
                "offset", f"{offset} is past the end of {namespace}/{shard} (last offset {end - 1})"
            )
        if offset < -1:
            raise InvalidArgumentError("offset", f"{offset} must be ≥ -1")
        self.advance(namespace, sub, shard, offset)
        with self.lock:
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
        shard = self.check_shard(info, shard)
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
        with self.lock:
            if (namespace, sub.name) in self.running:
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
        info, subs = self.selected(namespace, name)
        now = self._rt.clock.now_ms()
        out: list[BacklogInfo] = []
        views = self.views(namespace, info.shards)
        for sub in subs:
            for shard in range(info.shards):
                stats, segments = views[shard]
                out.append(self.shard_backlog(namespace, sub, shard, stats, segments, now))
        return out

    def shard_backlog(
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

    # -- retention hook --------------------------------------------------------------------------------------
    def retention_plan(
        self, namespace: str, shard: int, policy: NamespacePolicy, segments: Sequence[SegmentInfo], plan: RetentionPlan
    ) -> RetentionPlan:
        """With ``retention_respects_subscriptions``, delete only segments every subscription
        of the shard has acknowledged (``last_offset ≤ min cursor``)."""
        if plan.count == 0 or not policy.retention_respects_subscriptions:
            return plan
        with self.lock:
            subs = list(self._subs.get(namespace, {}).values())
            if not subs:
                return plan
            floor = min(sub.cursors[shard] for sub in subs)
        return cap_retention_plan(plan, segments, floor)
