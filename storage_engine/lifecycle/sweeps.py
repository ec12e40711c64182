"""Node-wide steps (``namespace=None``): one pass over the namespaces, resumable, bounded.

Retention, reclamation and subscription expiry run node-wide as a sweep: the
per-namespace step for each namespace in name order, results added up
(:func:`add_results`), with one budget shared by the whole pass.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Any

from storage_engine.api import LIFECYCLE_COUNTS, LifecycleResult
from storage_engine.errors import UnknownNamespaceError
from storage_engine.lifecycle.runtime import LifecycleRuntime

NamespaceStep = Callable[[str, int | None], LifecycleResult]


def add_results(totals: dict[str, Any], result: LifecycleResult, extra: Sequence[str] = ()) -> None:
    """Add one step's counts (:data:`~storage_engine.api.LIFECYCLE_COUNTS`, and ``extra``) to ``totals``, and the
    namespaces it changed to ``totals["namespaces_changed"]`` (a set)."""
    for key in (*LIFECYCLE_COUNTS, *extra):
        totals[key] = totals.get(key, 0) + getattr(result, key)
    if result.namespaces_changed:
        totals.setdefault("namespaces_changed", set()).update(result.namespaces_changed)


class NodeSweep:
    """Runs a per-namespace step over every namespace; remembers where a pass stopped."""

    def __init__(self, rt: LifecycleRuntime) -> None:
        self._rt = rt
        self._resume: dict[str, str] = {}  # operation → the namespace its next step starts at

    def run(
        self,
        operation: str,
        step: NamespaceStep,
        limit: int | None,
        cost: Callable[[LifecycleResult], int] = lambda result: 0,
        dry_run: bool = False,
        counts: Sequence[str] = (),
    ) -> LifecycleResult:
        """One node-wide step: ``step(namespace, remaining limit)`` for each namespace, results
        added up. ``cost`` says how much of ``limit`` a result used, so the step stays bounded.

        A sweep is one pass over the namespaces in name order. A namespace with more to do,
        or a spent budget, ends the step with ``more``; the next step of the same operation
        resumes there (a point kept in memory: after a restart the pass starts again from
        the first namespace, which only repeats cheap checks). The pass ends (``more`` false)
        at the last namespace, so a sweep run finishes even under a steady load, and the next
        scheduled run starts a new pass. A namespace deleted meanwhile is passed over.
        A dry run's steps have no budget: it is one whole pass that leaves the resume point alone.
        ``counts``: the operation's own counts added up besides :data:`LIFECYCLE_COUNTS`.
        """
        rt = self._rt
        t0 = time.perf_counter()
        totals: dict[str, Any] = {}
        more = False
        remaining = limit
        names = sorted(rt.source.namespace_names())
        resume = None if dry_run else self._resume.pop(operation, None)
        first = bisect_left(names, resume) if resume is not None else 0
        rt.range_compactions.sweeping = True
        try:
            for name in names[first:]:
                try:
                    result = step(name, remaining)
                except UnknownNamespaceError:
                    continue
                add_results(totals, result, counts)
                if remaining is not None:
                    remaining -= cost(result)
                if (result.more and result.skipped is None) or (remaining is not None and remaining <= 0):
                    if result.more or name != names[-1]:
                        more = True
                        self._resume[operation] = name if result.more else name + "\0"  # \0: just after it
                    break
        finally:
            rt.range_compactions.sweeping = False
        if not dry_run:
            rt.compact_deferred()
        return rt.result(operation, None, None, t0, more=more, **totals)
