"""The suite under pytest-xdist: which tests share a worker, and what each worker keeps to itself.

``make test`` runs ``pytest -n N``: tests are handed to N worker processes, each with its own PostgreSQL (or
SQLite) test database (pytest-django adds the worker's id to the name), Celery queue (the settings add the
worker's id, ``PYTEST_XDIST_WORKER``), cache key prefix (the settings add the process id), Spark warehouse and
temp directories (pytest's ``tmp_path`` is per worker); every node or system a test starts takes a free port.

A test that starts an expensive thing shared with others must meet those others on one worker, or each worker
would start its own copy. :class:`SharedFixtureScheduling` hands out work in units: all of the Spark suite
(one SparkSession: a JVM takes a core for half a minute and a gigabyte), all of a module with a module-scoped
fixture (a system launched once, a browser, a node shared by the module's tests), and every other test on its
own. (xdist's ``--dist loadgroup`` would do the same from ``xdist_group`` marks, but pytest 9 ignores the id
xdist 3.8 rewrites to carry the group, so its groups are silently dropped.) SeaweedFS, asked for by the s3 tier
tests, starts in a few seconds and runs once in each worker that needs it.

Units of many tests go first, largest first (xdist's own order); then single tests, those that took over 5 s in
a recent run first, longest first (``tests/durations.json``, written by ``python -m tests.support.timing_report
var/test-results.xml --write-durations tests/durations.json``), so that no minute-long test starts last while
the other workers sit idle. A stale file only changes the order.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest
from _pytest.nodeid import coerce_node_id
from xdist.scheduler import LoadScopeScheduling

from tests.support.processes import ROOT

SPARK_SUITE = "tests/spark/"
DURATIONS = ROOT / "tests" / "durations.json"
MODULE_FIXTURE = re.compile(r"@pytest\.fixture\([^)]*scope=\"module\"")


def worker_id() -> str:
    """``gw0``, ``gw1``… under xdist; ``main`` in a plain run."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


@functools.cache
def has_module_fixture(path: str) -> bool:
    """Whether the test module at ``path`` (relative to the repository) defines a module-scoped fixture."""
    try:
        return bool(MODULE_FIXTURE.search((ROOT / path).read_text()))
    except OSError:
        return False


def work_unit(nodeid: str) -> str:
    """The unit of work a test is handed out in: tests of one unit run on one worker, one after another."""
    path = nodeid.split("::", 1)[0]
    if path.startswith(SPARK_SUITE):
        return SPARK_SUITE
    if has_module_fixture(path):
        return path
    return nodeid


def known_durations(path: Path = DURATIONS) -> dict[str, float]:
    """The recorded seconds of the tests that took long (none when the file is missing or unreadable)."""
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def longest_first(items: list[pytest.Item], durations: dict[str, float]) -> list[pytest.Item]:
    """The single tests with a recorded duration first, longest first; every other test after them in its order
    (a unit of many tests keeps its order: an operator's story runs step after step). Every worker collects the
    same tests and orders them so; the scheduler builds its queue in that order, units of many tests first."""

    def weight(item: pytest.Item) -> float:
        return durations.get(item.nodeid, 0.0) if work_unit(item.nodeid) == item.nodeid else 0.0

    return sorted(items, key=lambda item: -weight(item))


class SharedFixtureScheduling(LoadScopeScheduling):
    """xdist's load-scope scheduling over :func:`work_unit`: the largest units first, then single tests, the
    long ones first (the workers collect them so: :func:`longest_first`), one at a time to whichever worker is
    free."""

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid)


def give_each_test_its_own_id(items: list[pytest.Item]) -> None:
    """Schemathesis' items (one per API operation) all get the test function's id under pytest 9, their
    parameters dropped; xdist schedules by id, so all but one would silently not run. Each gets its name back in
    its id (``test_x[GET /api/actions]``), as pytest gives a parametrized test."""
    counts = Counter(item.nodeid for item in items)
    for item in items:
        if counts[item.nodeid] > 1:
            item._id = coerce_node_id(f"{item.nodeid.split('::', 1)[0]}::{item.name}")
