"""The I/O worker pool: group commit for appends.

A fixed number of worker threads (``config.io_workers``). A shard always maps
to the same worker (CRC-32 of ``namespace/shard`` mod n), so each shard has a
single writer and its offsets are assigned in one place: strictly
consecutive, however many producers append at once.

A worker blocks for the first request, then drains whatever else is queued
(up to ``config.max_requests_per_batch``), groups the requests by shard and
hands each group to the shard's ``append_group``: one write, one fsync and one
index WriteBatch per group, however many producers it serves. That is the
whole trick behind the throughput: the fsync cost is shared. Producers wait on
a future that completes once their batch is durable (per the durability mode).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import zlib
from concurrent.futures import Future
from typing import Protocol

from storage_engine.config import Durability
from storage_engine.errors import EngineClosedError
from storage_engine.formats.codec import EncodedRecords

log = logging.getLogger(__name__)


class GroupWriter(Protocol):
    """What a worker writes to: one shard."""

    route: str

    def append_group(self, bodies: list[EncodedRecords]) -> list[int]:
        """Append every body in order; return each one's base offset."""
        ...

    def sync_if_due(self) -> bool:
        """fsync if the durability interval has passed; return whether data is still unsynced."""
        ...


class SyncSchedule:
    """When a shard fsyncs, per :class:`~storage_engine.config.Durability`."""

    def __init__(self, durability: Durability, interval_ms: int) -> None:
        self.durability = durability
        self._interval = interval_ms / 1000
        self._last = time.monotonic()
        self.dirty = False

    def sync_now(self) -> bool:
        """Called after a write: whether to fsync before acknowledging."""
        if self.durability is Durability.FSYNC:
            return True
        self.dirty = True
        return self.durability is Durability.INTERVAL and time.monotonic() - self._last >= self._interval

    def due(self) -> bool:
        return self.dirty and self.durability is Durability.INTERVAL and time.monotonic() - self._last >= self._interval

    def synced(self) -> None:
        self.dirty = False
        self._last = time.monotonic()


_STOP = object()


class IOPool:
    def __init__(self, workers: int, max_requests_per_batch: int, fsync_interval_ms: int, name: str = "io") -> None:
        self._max = max(1, max_requests_per_batch)
        self._tick = max(0.001, fsync_interval_ms / 1000)
        self._queues: list[queue.SimpleQueue[object]] = [queue.SimpleQueue() for _ in range(max(1, workers))]
        self._closed = False
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, args=(q,), name=f"{name}-worker-{i}", daemon=True)
            for i, q in enumerate(self._queues)
        ]
        for t in self._threads:
            t.start()

    def worker_of(self, route: str) -> int:
        return zlib.crc32(route.encode()) % len(self._queues)

    def submit(self, writer: GroupWriter, body: EncodedRecords) -> Future[int]:
        fut: Future[int] = Future()
        with self._lock:  # no request may slip in behind the stop marker
            if self._closed:
                raise EngineClosedError()
            self._queues[self.worker_of(writer.route)].put((writer, body, fut))
        return fut

    def close(self) -> None:
        """Finish every queued request, then stop the workers."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for q in self._queues:
                q.put(_STOP)
        for t in self._threads:
            t.join()

    def _run(self, q: queue.SimpleQueue[object]) -> None:
        dirty: set[GroupWriter] = set()
        stopping = False
        while not stopping:
            try:
                first = q.get(timeout=self._tick) if dirty else q.get()
            except queue.Empty:
                first = None
            requests: list[tuple[GroupWriter, EncodedRecords, Future[int]]] = []
            item = first
            while item is not None:
                if item is _STOP:
                    stopping = True
                    break
                requests.append(item)  # type: ignore[arg-type]
                if len(requests) >= self._max:
                    break
                try:
                    item = q.get_nowait()
                except queue.Empty:
                    item = None
            groups: dict[GroupWriter, list[tuple[EncodedRecords, Future[int]]]] = {}
            for writer, body, fut in requests:
                groups.setdefault(writer, []).append((body, fut))
            for writer, group in groups.items():
                self._commit(writer, group)
                dirty.add(writer)
            for writer in list(dirty):
                try:
                    if not writer.sync_if_due():
                        dirty.discard(writer)
                except Exception:  # the shard has recorded its failure; later appends report it
                    log.exception("periodic fsync of %s failed", writer.route)
                    dirty.discard(writer)

    @staticmethod
    def _commit(writer: GroupWriter, group: list[tuple[EncodedRecords, Future[int]]]) -> None:
        try:
            offsets = writer.append_group([body for body, _ in group])
        except BaseException as exc:
            for _, fut in group:
                fut.set_exception(exc)
            return
        for (_, fut), offset in zip(group, offsets, strict=True):
            fut.set_result(offset)
