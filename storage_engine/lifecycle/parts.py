"""The lifecycle parts of one engine, wired together (see the package docstring for each)."""

from __future__ import annotations

from collections.abc import Callable

from storage_engine.clock import Clock
from storage_engine.config import EngineConfig
from storage_engine.lifecycle.cleaner import FileCleaner
from storage_engine.lifecycle.due_sweeps import DueSweeps
from storage_engine.lifecycle.read_checks import ReadCheckQueue
from storage_engine.lifecycle.reclaimer import Reclaimer
from storage_engine.lifecycle.retainer import Retention
from storage_engine.lifecycle.runtime import LifecycleRuntime
from storage_engine.lifecycle.scanner import TTLScanner
from storage_engine.lifecycle.shards import ShardSource
from storage_engine.lifecycle.sweeps import NodeSweep
from storage_engine.policies.policy import NodePolicy


class LifecycleParts:
    """Every lifecycle part over one :class:`ShardSource`; they share one :class:`LifecycleRuntime`.

    ``stored_policy``/``persist_policy``: see :class:`LifecycleRuntime`. With
    ``config.lifecycle_worker`` the read-check queue runs its worker thread.
    """

    def __init__(
        self,
        source: ShardSource,
        config: EngineConfig,
        clock: Clock,
        stored_policy: tuple[NodePolicy, int] | None = None,
        persist_policy: Callable[[NodePolicy, int], None] | None = None,
    ) -> None:
        self.runtime = rt = LifecycleRuntime(source, config, clock, stored_policy, persist_policy)
        self.sweep = NodeSweep(rt)
        self.read_checks = ReadCheckQueue(rt, worker=config.lifecycle_worker)
        self.scanner = TTLScanner(rt)
        self.retention = Retention(rt, self.sweep)
        self.reclaimer = Reclaimer(rt, self.sweep)
        self.cleaner = FileCleaner(rt)
        self.due = DueSweeps(rt, self.scanner, self.retention)

    def counters(self) -> dict[str, float]:
        """The lifecycle's counters and gauges, with the read-check queue and the last disk figures."""
        out = self.runtime.counters.snapshot()
        out["read_check_queue_length"] = self.read_checks.length()
        out.update(self.runtime.disk.figures())
        return out

    def stop(self) -> None:
        self.read_checks.stop()
