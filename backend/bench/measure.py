"""What every system of the lifecycle bench is measured by, the same way (issue 15).

The load is the same for each system: ``--rate`` records/s of ``--record-bytes`` each, in
produce calls of ``--batch`` records to a (namespace, shard) drawn by one seeded generator,
every record with a TTL of ``--ttl-ms``. The bench keeps a :class:`Ledger` of what it
produced and when each record's TTL ends (the producer's clock at the call + TTL), and
samples each system every second:

- ``stored``: the records the system still holds (our node: the shards' ``record_count``;
  NATS: the streams' ``messages``; Redis: ``XLEN``);
- ``expired``: ``stored − unexpired``, where ``unexpired`` is what the ledger says was
  produced and has not reached its TTL (no system may have dropped any of those; a sample
  where ``stored < unexpired`` is counted in ``lost_samples``);
- ``worst past TTL``: how long past its TTL the oldest stored record of any stream or shard
  is (0 when nothing stored is expired).

Steady state is the samples after ``--warmup-s``; :func:`summary` turns samples into the one
JSON line per system.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


def now_ms() -> int:
    return int(time.time() * 1000)


class Ledger:
    """Records produced, in production order, with the wall-clock ms their TTL ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._deadlines: list[int] = []  # non-decreasing
        self._cumulative: list[int] = []
        self.total = 0

    def add(self, deadline_ms: int, count: int) -> None:
        with self._lock:
            if self._deadlines and deadline_ms < self._deadlines[-1]:
                deadline_ms = self._deadlines[-1]  # the wall clock stepped back: keep the order
            self.total += count
            self._deadlines.append(deadline_ms)
            self._cumulative.append(self.total)

    def unexpired(self, at_ms: int) -> int:
        """Records whose TTL ends after ``at_ms``."""
        with self._lock:
            i = bisect_right(self._deadlines, at_ms)
            return self.total - (self._cumulative[i - 1] if i else 0)


@dataclass
class Sample:
    t_s: float  # seconds since the phase started
    stored: int
    expired: int
    worst_past_ttl_s: float
    engine_expired: int | None = None  # what the system itself reports as expired, when it does


@dataclass
class Load:
    """One system's produce loop: paced calls of ``batch`` records to a drawn (namespace, shard)."""

    names: Sequence[str]
    shards: int
    rate: int
    batch: int
    ttl_ms: int
    record_bytes: int
    latencies_ms: list[float] = field(default_factory=list)
    ledger: Ledger = field(default_factory=Ledger)

    def run(self, seconds: float, send: Callable[[str, int, int], None], stop: threading.Event | None = None) -> None:
        """``send(namespace, shard, deadline_ms)`` produces one batch whose TTL ends at ``deadline_ms``."""
        interval = self.batch / self.rate
        rng = random.Random(7)
        next_at = start = time.monotonic()
        while time.monotonic() - start < seconds and not (stop is not None and stop.is_set()):
            name, shard = rng.choice(self.names), rng.randrange(self.shards)
            deadline = now_ms() + self.ttl_ms
            started = time.perf_counter()
            send(name, shard, deadline)
            self.latencies_ms.append((time.perf_counter() - started) * 1000)
            self.ledger.add(deadline, self.batch)
            next_at += interval
            time.sleep(max(0.0, next_at - time.monotonic()))


class Sampler:
    """Calls ``probe(t_s)`` every ``every_s`` seconds on a thread until stopped; keeps its samples."""

    def __init__(self, probe: Callable[[float], Sample | None], every_s: float = 1.0) -> None:
        self.probe, self.every_s = probe, every_s
        self.samples: list[Sample] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._start = time.monotonic()

    def start(self) -> Sampler:
        self._start = time.monotonic()
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        self._stop.set()
        self._thread.join()
        return self.samples

    def _run(self) -> None:
        tick = 0
        while True:
            tick += 1
            if self._stop.wait(max(0.0, self._start + tick * self.every_s - time.monotonic())):
                return
            try:
                sample = self.probe(time.monotonic() - self._start)
            except Exception:  # a slow or failed probe is a missing sample, not a failed bench
                self.errors += 1
                continue
            if sample is not None:
                self.samples.append(sample)


def percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[int(q * (len(ordered) - 1))], 2)


def summary(
    system: str, load: Load, samples: Sequence[Sample], warmup_s: float, seconds: float, **extra: Any
) -> dict[str, Any]:
    """The system's JSON line: steady-state (after ``warmup_s``) and whole-phase figures."""
    steady = [s for s in samples if s.t_s >= warmup_s] or list(samples)

    def ratio(s: Sample) -> float:
        # A batch produced while the probe ran may be in the ledger and not yet in ``stored``: at most one
        # batch under (< 0.2 % of what is stored here), clamped at 0.
        return max(0, s.expired) / s.stored if s.stored else 0.0

    line: dict[str, Any] = {
        "bench": "lifecycle",
        "system": system,
        "seconds": seconds,
        "samples": len(samples),
        "steady_samples": len(steady),
        "expired_ratio": round(statistics.fmean(ratio(s) for s in steady), 4) if steady else None,
        "expired_ratio_max": round(max(ratio(s) for s in steady), 4) if steady else None,
        "worst_past_ttl_s": round(max(s.worst_past_ttl_s for s in steady), 2) if steady else None,
        "expired_ratio_max_all": round(max((ratio(s) for s in samples), default=0.0), 4),
        "worst_past_ttl_s_all": round(max((s.worst_past_ttl_s for s in samples), default=0.0), 2),
        "produce_p50_ms": percentile(load.latencies_ms, 0.5),
        "produce_p99_ms": percentile(load.latencies_ms, 0.99),
        "produced": load.ledger.total,
        "stored_records": samples[-1].stored if samples else None,
        "lost_samples": sum(1 for s in samples if s.expired < -load.batch),  # unexpired records missing
    }
    windows: dict[int, list[float]] = {}
    for s in samples:
        windows.setdefault(int(s.t_s // 10), []).append(ratio(s))
    # The ratio's course over the phase: the mean of each 10 s window.
    line["expired_ratio_by_10s"] = [round(statistics.fmean(v), 3) for _, v in sorted(windows.items())]
    line["worst_past_ttl_s_by_10s"] = [
        round(max(x.worst_past_ttl_s for x in samples if int(x.t_s // 10) == w), 1) for w in sorted(windows)
    ]
    engine = [s for s in steady if s.engine_expired is not None]
    if engine:
        line["engine_expired_ratio"] = round(
            statistics.fmean(s.engine_expired / s.stored if s.stored else 0.0 for s in engine),  # type: ignore[operator]
            4,
        )
    line.update(extra)
    return line
