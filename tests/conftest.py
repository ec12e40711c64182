"""Suite-wide setup: the real services the tests use, and shared fixtures."""

from __future__ import annotations

import atexit
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("APP_ENV", "test")

from tests.support.processes import NodeProc, kill_leftovers, own_children, start_node
from tests.support.services import ensure_postgres, ensure_redis
from tests.support.workers import (
    SharedFixtureScheduling,
    give_each_test_its_own_id,
    known_durations,
    longest_first,
    worker_id,
)


def _killed(signum: int, _frame: object) -> None:
    kill_leftovers()
    os._exit(128 + signum)


# However this test process ends (normally, on an exception, or killed by a timeout or a stopped xdist run), no
# node, worker or launched system it started outlives it to eat the machine's two cores.
own_children()
atexit.register(kill_leftovers)
signal.signal(signal.SIGTERM, _killed)


@pytest.fixture(scope="session", autouse=True)
def _real_services() -> None:
    ensure_redis()
    if os.environ.get("DATABASE_URL", "").startswith("postgres"):
        ensure_postgres()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[NodeProc]:
    """A real storage-node process on a free loopback port, with its own data dir."""
    proc = start_node(tmp_path / "node-data")
    yield proc
    proc.stop()


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> SharedFixtureScheduling:
    # Under pytest-xdist (`make test` runs `-n …`), tests sharing one expensive thing run on one worker, so it
    # starts once: tests/support/workers.py says which.
    return SharedFixtureScheduling(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    give_each_test_its_own_id(items)
    if worker_id() != "main":  # an xdist worker: the long single tests first (tests/support/workers.py)
        items[:] = longest_first(items, known_durations())
