"""Fixtures of the shared contract suite: every test runs against each adapter.

An adapter whose module does not exist yet is skipped; an adapter whose module
exists but fails to import (a missing dependency, a syntax error) fails.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from storage_engine import open_engine
from storage_engine.api import StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.config import Durability, EngineConfig

ADAPTER_MODULES = {
    "memory": "storage_engine.adapters.memory",
    "segment": "storage_engine.adapters.segment",
    "rocksdb": "storage_engine.adapters.rocksdb",
}
PERSISTENT = {"segment", "rocksdb"}

OpenAdapter = Callable[..., StorageAdapter]


def _require_module(adapter: str) -> None:
    module = ADAPTER_MODULES[adapter]
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        # Skip only when the adapter's own module (or its package) is absent.
        if exc.name is not None and (module == exc.name or module.startswith(exc.name + ".")):
            pytest.skip(f"{adapter} adapter not implemented yet ({module} not found)")
        raise


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=list(ADAPTER_MODULES))
def adapter_name(request: pytest.FixtureRequest) -> str:
    _require_module(request.param)
    return str(request.param)


@pytest.fixture
def persistent_adapter_name(adapter_name: str) -> str:
    if adapter_name not in PERSISTENT:
        pytest.skip(f"the {adapter_name} adapter does not persist across close")
    return adapter_name


@pytest.fixture
def open_adapter(adapter_name: str, tmp_path: Path, clock: ManualClock) -> Iterator[OpenAdapter]:
    """Open (or reopen) the adapter under test on this test's data dir; all are closed at teardown."""
    opened: list[StorageAdapter] = []

    def _open(durability: Durability = Durability.NONE, **overrides: Any) -> StorageAdapter:
        config = EngineConfig(data_dir=tmp_path / "data", adapter=adapter_name, durability=durability, **overrides)
        engine = open_engine(config, clock=clock)
        opened.append(engine)
        return engine

    yield _open
    for engine in opened:
        engine.close()


@pytest.fixture
def adapter(open_adapter: OpenAdapter) -> StorageAdapter:
    # Durability.NONE keeps the suite fast; close() still fsyncs, and the
    # persistence and concurrency tests use fsync explicitly.
    return open_adapter()


@pytest.fixture
def lc_adapter(open_adapter: OpenAdapter) -> StorageAdapter:
    """An adapter for lifecycle tests: no background worker (tests drain the read-check
    queue themselves) and a disk quota far away, so the real disk never decides."""
    return open_adapter(lifecycle_worker=False, disk_capacity_bytes=1 << 40)
