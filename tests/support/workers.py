"""The suite under pytest-xdist: which tests share a worker, and what each worker keeps to itself.

``make test`` runs ``pytest -n N --dist loadgroup``: tests are handed to N worker processes, each with its own
PostgreSQL (or SQLite) test database (pytest-django adds the worker's id to the name), Celery queue (the settings
add the worker's id, ``PYTEST_XDIST_WORKER``), cache key prefix (the settings add the process id), Spark warehouse
and temp directories (pytest's ``tmp_path`` is per worker), and every node or system a test starts takes a free
port. A test that starts an expensive thing shared with others (a SparkSession, a system launched once for a
module) must meet those others on one worker, or each worker would start its own copy:
:func:`group_expensive_fixtures` puts them in one ``xdist_group``.
"""

from __future__ import annotations

import os

import pytest

# Session-wide fixtures that start a process of their own and are used by many modules: one group each, whichever
# module their tests are in. (SeaweedFS, asked for by the s3 tier tests, starts in a few seconds and runs once in
# each worker that needs it; a JVM takes a core for half a minute and a gigabyte, so Spark runs in one worker.)
SHARED_SESSION_FIXTURES = ("spark",)


def worker_id() -> str:
    """``gw0``, ``gw1``… under xdist; ``main`` in a plain run."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def _module_scoped_fixture_of_the_suite(item: pytest.Item) -> bool:
    """Whether the test uses a module-scoped fixture defined in the suite itself (a launched system, a node, a
    browser page shared by a module's tests): such a module runs on one worker."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    for definitions in info.name2fixturedefs.values():
        for definition in definitions:
            module = getattr(definition.func, "__module__", "") or ""
            if definition.scope == "module" and module.startswith("tests."):
                return True
    return False


def group_expensive_fixtures(items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        shared = next((name for name in SHARED_SESSION_FIXTURES if name in names), None)
        if shared is not None:
            item.add_marker(pytest.mark.xdist_group(shared))
        elif _module_scoped_fixture_of_the_suite(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
