"""The disk guard (DESIGN §3 "Disk watermarks"): the disk-full flag that refuses appends above
``disk_warning_ratio``, and the measurement the file cleaner and urgency checks read.

The flag is refreshed by :meth:`DiskGuard.check` (the scheduled disk check, every cleaner
run) and, on the append path, when the bytes appended since the last measurement could
have crossed the warning ratio — so a burst cannot fill the disk between two checks,
and a steady writer does not measure the disk on every append.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from storage_engine.api import DiskStatus
from storage_engine.clock import Clock
from storage_engine.errors import DiskFullError
from storage_engine.lifecycle.counters import Counters
from storage_engine.lifecycle.shards import ShardSource
from storage_engine.policies.policy import NodePolicy
from storage_engine.rules.cleaning import disk_status

log = logging.getLogger(__name__)


class DiskGuard:
    def __init__(
        self, source: ShardSource, clock: Clock, node_policy: Callable[[], NodePolicy], counters: Counters
    ) -> None:
        self._source = source
        self._clock = clock
        self._node_policy = node_policy
        self._counters = counters
        self._lock = threading.Lock()
        self._status: DiskStatus | None = None
        self._measured_at = 0
        self._pending = 0  # bytes appended since the last measurement

    @property
    def last(self) -> DiskStatus | None:
        """The last measurement (``None`` before the first)."""
        return self._status

    def check(self) -> DiskStatus:
        used, capacity, source = self._source.measure_disk()
        status = disk_status(used, capacity, self._node_policy(), source, self._source.pending_delete_bytes())
        with self._lock:
            was_full = self._status is not None and self._status.disk_full
            self._status = status
            self._measured_at = self._clock.now_ms()
            self._pending = 0
        if status.disk_full != was_full:
            log.warning(
                "disk %s: %.1f%% used", "full" if status.disk_full else "no longer full", 100 * status.used_ratio
            )
        return status

    def guard(self, nbytes: int) -> None:
        """Called before an append writes anything: raise DiskFullError above the warning ratio."""
        policy = self._node_policy()
        now = self._clock.now_ms()
        with self._lock:
            status = self._status
            self._pending += nbytes
            measure = status is None or now - self._measured_at >= policy.clean_interval_ms
            if status is not None and not measure and status.capacity_bytes > 0:
                if status.disk_full:
                    measure = now - self._measured_at >= min(1000, policy.clean_interval_ms)
                else:
                    estimate = (status.used_bytes + self._pending) / status.capacity_bytes
                    measure = estimate > policy.disk_warning_ratio
        if measure:
            status = self.check()
        if status is not None and status.disk_full:
            self._counters.add("appends_rejected_disk_full_total")
            raise DiskFullError(status.used_ratio, policy.disk_warning_ratio)

    def pressure(self) -> bool:
        """Use above ``disk_max_used_ratio`` (the last measurement, or a new one)."""
        status = self._status or self.check()
        return status.over_max_used

    def figures(self) -> dict[str, float]:
        """The last measurement as counters (none before the first)."""
        disk = self._status
        if disk is None:
            return {}
        return {
            "disk_used_bytes": disk.used_bytes,
            "disk_capacity_bytes": disk.capacity_bytes,
            "disk_used_ratio": disk.used_ratio,
            "disk_full": int(disk.disk_full),
            "disk_pending_delete_bytes": disk.pending_delete_bytes,
        }
