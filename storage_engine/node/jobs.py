"""Long lifecycle operations as jobs on the node: start, poll progress, cancel.

A job repeats one bounded engine call (an expiry scan, retention, reclamation,
a cleaner run, ...) while the engine reports ``more`` work, summing the
results; cancellation is checked between two calls, so a job stops within one
bounded step. Jobs live in memory: a node restart forgets them (a caller polls
a missing job as 404 and starts it again; every step is safe to repeat).
"""

from __future__ import annotations

import enum
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from storage_engine.api import LIFECYCLE_COUNTS, LifecycleResult
from storage_engine.errors import AlreadyRunningError, StorageError, UnknownJobError

SUMMED = (*LIFECYCLE_COUNTS, "duration_ms")


class JobState(enum.StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass
class Job:
    id: str
    operation: str
    target: dict[str, Any]
    state: JobState = JobState.RUNNING
    steps: int = 0
    totals: dict[str, float] = field(default_factory=lambda: dict.fromkeys(SUMMED, 0))
    error: str = ""
    cancel: threading.Event = field(default_factory=threading.Event)
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "operation": self.operation,
            "target": self.target,
            "state": self.state.value,
            "steps": self.steps,
            "totals": self.totals,
            "error": self.error,
            "cancel_requested": self.cancel.is_set(),
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }


class JobRegistry:
    """Runs jobs on their own threads; remembers the last ``keep`` finished ones."""

    def __init__(self, keep: int = 1000, max_steps: int = 100_000) -> None:
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._keep = keep
        self._max_steps = max_steps

    def start(self, operation: str, target: dict[str, Any], step: Callable[[], LifecycleResult]) -> Job:
        with self._lock:
            for job in self._jobs.values():
                if job.state is JobState.RUNNING and job.operation == operation and job.target == target:
                    raise AlreadyRunningError(f"{operation} on {target} (job {job.id})")
            job = Job(id=str(next(self._ids)), operation=operation, target=target)
            self._jobs[job.id] = job
            self._trim()
        threading.Thread(target=self._run, args=(job, step), name=f"job-{job.id}", daemon=True).start()
        return job

    def _run(self, job: Job, step: Callable[[], LifecycleResult]) -> None:
        try:
            while not job.cancel.is_set() and job.steps < self._max_steps:
                result = step()
                job.steps += 1
                for name in SUMMED:
                    job.totals[name] += getattr(result, name)
                if not result.more:
                    break
            job.state = JobState.CANCELLED if job.cancel.is_set() else JobState.SUCCEEDED
        except StorageError as exc:
            job.state, job.error = JobState.FAILED, str(exc)
        except Exception as exc:  # a bug must not kill the node; the job reports it
            job.state, job.error = JobState.FAILED, f"{type(exc).__name__}: {exc}"
        finally:
            job.finished_at = time.time()

    def get(self, job_id: str) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise UnknownJobError(job_id)
        return job

    def cancel(self, job_id: str) -> Job:
        job = self.get(job_id)
        job.cancel.set()
        return job

    def list(self) -> list[Job]:
        return list(self._jobs.values())

    def stop_all(self) -> None:
        for job in self._jobs.values():
            job.cancel.set()

    def _trim(self) -> None:
        finished = [k for k, j in self._jobs.items() if j.state is not JobState.RUNNING]
        for key in finished[: max(0, len(finished) - self._keep)]:
            del self._jobs[key]
