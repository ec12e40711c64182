"""Per-node pacing of lifecycle work: token buckets filled by the injectable clock."""

from __future__ import annotations

import threading

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
