"""Engine counters (``_total`` names, base units), shared by every part of an adapter."""

from __future__ import annotations

import threading


class Counters:
    """Thread-safe named counters. Updated per batch or group, never per record."""

    def __init__(self) -> None:
        self._values: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, name: str, amount: float = 1) -> None:
        with self._lock:
            self._values[name] = self._values.get(name, 0) + amount

    def add_many(self, amounts: dict[str, float]) -> None:
        with self._lock:
            for name, amount in amounts.items():
                self._values[name] = self._values.get(name, 0) + amount

    def set_many(self, values: dict[str, float]) -> None:
        """Set gauges (values that are not totals)."""
        with self._lock:
            self._values.update(values)

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self._values)
