"""Layer 1 of TTL (DESIGN §3): the read-time clean-up queue and its worker.

A read hides an expired record at once; when that record still has index entries, the
read path enqueues ``(shard, offset)`` here (one bounded queue per namespace, its size
``read_check_queue_size``; a full queue drops the item and counts it). A worker thread
drains the queues, marking those records dead with their index entries a chunk per
shard lock hold, giving way to appends between slices (:class:`~storage_engine.rules.pacing.Slices`).
A dropped item is not lost work: the TTL scan (layer 2) finds the record anyway.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from storage_engine.api import LifecycleResult
from storage_engine.lifecycle.runtime import LifecycleRuntime
from storage_engine.rules.pacing import Slices
from storage_engine.rules.work import sum_work

log = logging.getLogger(__name__)


class ReadCheckQueue:
    def __init__(self, rt: LifecycleRuntime, *, worker: bool) -> None:
        self._rt = rt
        self._lock = threading.Condition()
        self._queues: dict[str, deque[tuple[int, int]]] = {}
        self._stop = False
        self._worker: threading.Thread | None = None
        if worker:
            self._worker = threading.Thread(target=self._run, name="read-check-worker", daemon=True)
            self._worker.start()

    def enqueue(self, namespace: str, shard: int, offset: int, queue_size: int) -> None:
        """Called by the read path for a hidden expired record that still has index entries."""
        with self._lock:
            q = self._queues.setdefault(namespace, deque())
            if len(q) >= queue_size:
                self._rt.counters.add("read_check_drops_total")
                return
            q.append((shard, offset))
            self._lock.notify()
        self._rt.counters.add("read_checks_enqueued_total")

    def forget(self, namespace: str) -> None:
        """The namespace was deleted: its queued checks go with it."""
        with self._lock:
            self._queues.pop(namespace, None)

    def length(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._queues.values())

    def stop(self) -> None:
        with self._lock:
            self._stop = True
            self._lock.notify_all()
        worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._stop and not any(self._queues.values()):
                    self._lock.wait(0.5)
                if self._stop:
                    return
            try:
                self.drain(1000)
            except Exception:  # a deleted namespace or a failed shard: the items are dropped
                log.debug("read-check clean-up failed", exc_info=True)

    def drain(self, limit: int | None = None) -> LifecycleResult:
        rt = self._rt
        rt.check_limit(limit)
        t0 = time.perf_counter()
        taken: dict[tuple[str, int], list[int]] = {}
        n = 0
        with self._lock:
            for namespace, q in self._queues.items():
                while q and (limit is None or n < limit):
                    shard, offset = q.popleft()
                    taken.setdefault((namespace, shard), []).append(offset)
                    n += 1
            more = any(self._queues.values())
        totals: dict[str, Any] = {"scanned": n}
        now = rt.clock.now_ms()
        slices = Slices(rt.foreground)
        with rt.ops:  # kills never race each other (a record is marked dead once)
            for (namespace, shard), offsets in taken.items():
                try:
                    _, shards = rt.source.lifecycle_namespace(namespace)
                    if shard >= len(shards):
                        continue
                    wanted = sorted(set(offsets))
                    i = 0
                    while i < len(wanted):  # a chunk per shard lock hold, pausing between slices
                        n = slices.chunk()
                        work = shards[shard].expire_offsets(wanted[i : i + n], now)
                        i += n
                        work.scanned = 0
                        sum_work(totals, work)
                        slices.check()
                except Exception:  # deleted or closed since: nothing left to clean
                    log.debug("read check of %s/%d skipped", namespace, shard, exc_info=True)
        rt.counters.add_many(
            {
                "read_check_expired_records_total": totals.get("expired_records", 0),
                "index_entries_deleted_total": totals.get("index_entries_deleted", 0),
            }
        )
        return rt.result("read_checks", None, None, t0, more=more, **totals)
