"""Per-node pacing of lifecycle work: token buckets filled by the injectable clock."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from storage_engine.clock import Clock


class TokenBucket:
    """``rate`` tokens per second, a burst of one second's worth; ``None`` = unlimited.

    :meth:`take` lets a caller go into debt by one request (a segment rewrite
    larger than the burst must still be possible), so a bucket with any tokens
    left grants the next request in full and the debt delays later ones.
    """

    def __init__(self, clock: Clock, rate: int | None) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.rate = rate
        self._tokens = float(rate or 0)
        self._last = clock.now_ms()

    def set_rate(self, rate: int | None) -> None:
        with self._lock:
            if rate != self.rate:
                self.rate = rate
                self._tokens = float(rate or 0)

    def _refill(self) -> None:
        now = self._clock.now_ms()
        if self.rate is not None and now > self._last:
            self._tokens = min(float(self.rate), self._tokens + (now - self._last) * self.rate / 1000)
        self._last = max(self._last, now)

    def available(self) -> float:
        """Tokens that may be taken now (infinite when unlimited)."""
        with self._lock:
            if self.rate is None:
                return float("inf")
            self._refill()
            return self._tokens

    def take(self, amount: float) -> bool:
        """Take ``amount`` tokens if any are left (possibly going into debt); whether granted."""
        with self._lock:
            if self.rate is None:
                return True
            self._refill()
            if self._tokens <= 0:
                return False
            self._tokens -= amount
            return True


_RUNNING: ContextVar[bool] = ContextVar("foreground_running", default=False)


def no_pause() -> None:
    """A give-way point that never pauses (background work with nothing to give way to)."""


class Foreground:
    """Foreground calls (appends) in flight, so that background work can give way to them.

    DESIGN §3 "Timeliness": removing data never makes appends wait noticeably. An append
    hands the interpreter between threads several times (producer, I/O worker, fsync,
    RocksDB, the producer again); each hand-off to a thread waiting for the GIL while a
    CPU-bound scan holds it costs up to CPython's switch interval (5 ms). Appends say
    they run (:meth:`running`, or :meth:`enter` / :meth:`leave`), and a scan that finishes
    a slice while any is in flight blocks (:meth:`wait_turn`) until those have finished,
    so it holds neither the GIL nor a shard lock while they run.

    :meth:`running` counts a call once however deeply it nests in the same context (a node's
    produce request, then the engine's append in the thread pool: the context goes with
    it), and :meth:`idle` takes a stretch of it that waits without working (a producer
    held by a backlog quota) out of the count, so that a scan does not wait on it.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self.active = 0  # read without the lock by background work: a hint
        self._finished = 0
        self._waiting = 0

    @contextmanager
    def running(self) -> Iterator[None]:
        if _RUNNING.get():
            yield
            return
        token = _RUNNING.set(True)
        self.enter()
        try:
            yield
        finally:
            self.leave()
            _RUNNING.reset(token)

    @contextmanager
    def idle(self) -> Iterator[None]:
        if not _RUNNING.get():
            yield
            return
        self.leave()
        try:
            yield
        finally:
            self.enter()

    def enter(self) -> None:
        with self._cond:
            self.active += 1

    def leave(self) -> None:
        with self._cond:
            self.active -= 1
            self._finished += 1
            if self._waiting:
                self._cond.notify_all()

    def wait_turn(self, timeout: float) -> bool:
        """Wait until as many calls have finished as were in flight when called (at most
        ``timeout`` seconds); whether it waited at all."""
        with self._cond:
            if not self.active:
                return False
            target = self._finished + self.active
            self._waiting += 1
            try:
                self._cond.wait_for(lambda: self._finished >= target, timeout)
            finally:
                self._waiting -= 1
            return True


SLICE_S = 0.0005  # background work between two pauses while no append is in flight (a GIL slice)
SLICE_BUSY_S = 0.0001  # the same while appends are in flight: the most a slice delays one of them
SLICE_WAIT_S = 0.02  # the longest a pause waits for the appends in flight; then one more slice runs
SLICE_CHUNK = 256  # entries per shard lock hold (and WriteBatch) while no append is in flight
SLICE_CHUNK_BUSY = 32  # the same while appends are in flight
SLICE_REST_S = 0.0  # a pause without appends in flight: time.sleep(0), a real sleep that hands the GIL over


class Slices:
    """Cuts background work (the TTL scan, read-check clean-up) into short slices.

    The work calls :meth:`check` often (between chunks, every few entries): once a slice
    has run its time, it pauses. With appends in flight (:class:`Foreground`) the pause
    blocks until they have finished (at most ``wait_s``, so the work still progresses under
    a steady load); otherwise it sleeps for a moment, which lets any thread waiting for the
    GIL (an HTTP request being parsed, a producer) take it at once instead of after the
    switch interval. While appends are in flight slices are shorter (``busy_s``) and
    :meth:`chunk` (entries per shard lock hold) is smaller: each append that overlaps a
    slice waits for the rest of it at most.
    """

    def __init__(
        self,
        foreground: Foreground,
        slice_s: float | None = None,
        wait_s: float | None = None,
        rest_s: float | None = None,
        busy_s: float | None = None,
    ) -> None:
        self.foreground = foreground
        # The module's settings at the time (a bench may change them for a run).
        self.slice_s = SLICE_S if slice_s is None else slice_s
        self.busy_s = SLICE_BUSY_S if busy_s is None else busy_s
        self.wait_s = SLICE_WAIT_S if wait_s is None else wait_s
        self.rest_s = SLICE_REST_S if rest_s is None else rest_s
        self.pauses = 0
        self.waits = 0
        self._start = time.perf_counter()

    def chunk(self) -> int:
        return SLICE_CHUNK_BUSY if self.foreground.active else SLICE_CHUNK

    def check(self) -> None:
        """Pause if this slice has run its time."""
        ran = time.perf_counter() - self._start
        if ran >= self.slice_s or (self.foreground.active and ran >= self.busy_s):
            self.pause()

    def pause(self) -> None:
        self.pauses += 1
        if self.foreground.wait_turn(self.wait_s):
            self.waits += 1
        else:
            time.sleep(self.rest_s)  # a real sleep: the GIL goes to whoever waits for it
        self._start = time.perf_counter()
