"""The job registry: ``python -m spark_jobs <job>`` dispatches to a job registered here.

A job is a module in :mod:`spark_jobs.jobs` whose entry point is decorated with :func:`register`::

    @register("lake-export", "Export sealed segments to the Parquet lake.")
    def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int: ...

``main`` parses its own options, builds a session unless one is handed in (tests do), does the I/O
around pure DataFrame transforms, and returns an exit code. :func:`load_jobs` imports every module in
:mod:`spark_jobs.jobs`, so adding a module is all it takes to add a job.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JOBS_PACKAGE = "spark_jobs.jobs"


class JobMain(Protocol):
    def __call__(self, argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int: ...


@dataclass(frozen=True)
class Job:
    name: str
    summary: str
    main: JobMain

    @property
    def prog(self) -> str:
        """The command line that runs this job, for its ``--help``."""
        return f"python -m spark_jobs {self.name}"


class UnknownJobError(LookupError):
    def __init__(self, name: str, known: Sequence[str]) -> None:
        self.name = name
        self.known = tuple(known)
        super().__init__(f"unknown job {name!r}; known jobs: {', '.join(self.known) or '(none)'}")


_REGISTRY: dict[str, Job] = {}


def register(name: str, summary: str) -> Callable[[JobMain], JobMain]:
    """Register the decorated function as the entry point of job ``name``."""

    def decorator(main: JobMain) -> JobMain:
        existing = _REGISTRY.get(name)
        if existing is not None and existing.main is not main:
            raise ValueError(f"job {name!r} is already registered")
        _REGISTRY[name] = Job(name=name, summary=summary, main=main)
        return main

    return decorator


def load_jobs() -> None:
    """Import every module of :mod:`spark_jobs.jobs` so that its jobs register themselves."""
    package = importlib.import_module(JOBS_PACKAGE)
    for module in pkgutil.iter_modules(package.__path__, prefix=f"{JOBS_PACKAGE}."):
        if not module.name.rsplit(".", 1)[-1].startswith("_"):
            importlib.import_module(module.name)


def jobs() -> list[Job]:
    """Registered jobs, by name."""
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


def get_job(name: str) -> Job:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownJobError(name, sorted(_REGISTRY)) from None
