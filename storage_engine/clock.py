"""Injectable time source. Everything in the engine asks a :class:`Clock` for
"now" so that tests move time forward instead of sleeping."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the epoch."""
        ...


class SystemClock:
    """Wall-clock time."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to; thread-safe."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError("a clock never moves backwards: advance(ms) needs ms >= 0")
        with self._lock:
            self._now += ms
            return self._now

    def set(self, now_ms: int) -> None:
        with self._lock:
            self._now = now_ms
