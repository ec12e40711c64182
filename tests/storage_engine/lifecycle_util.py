"""Helpers shared by the lifecycle tests (DESIGN §3)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hypothesis.stateful import RuleBasedStateMachine

from storage_engine import open_engine
from storage_engine.api import NewRecord, Record, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.config import EngineConfig
from storage_engine.policies.policy import HOUR_MS, NamespacePolicy, NodePolicy

FAR_FUTURE = 4_000_000_000_000
REPO_ROOT = Path(__file__).resolve().parents[2]


def make_ns(adapter: StorageAdapter, name: str = "ns", shards: int = 1, **policy: Any) -> str:
    adapter.create_namespace(name, shards, NamespacePolicy(**{"retention_ms": None, **policy}))
    return name


def read_all(adapter: StorageAdapter, ns: str, shard: int = 0) -> list[Record]:
    out: list[Record] = []
    offset = adapter.shard_stats(ns, shard).log_start_offset
    while True:
        page = adapter.read(ns, shard, offset, max_records=997)
        if not page.records:
            return out
        out.extend(page.records)
        offset = page.next_offset


def offsets(adapter: StorageAdapter, ns: str, shard: int = 0) -> list[int]:
    return [r.offset for r in read_all(adapter, ns, shard)]


def append_one(adapter: StorageAdapter, ns: str, value: bytes = b"v", shard: int = 0, **fields: Any) -> int:
    return adapter.append(ns, shard, [NewRecord(value, **fields)]).base_offset


def assert_verified(adapter: StorageAdapter, *namespaces: str) -> None:
    for ns in namespaces or [n.name for n in adapter.list_namespaces()]:
        report = adapter.verify(ns)
        assert report.ok, report.problems


def other_hour(clock: ManualClock) -> str:
    """An hour of the day three hours from now: a ``delete_when`` that is not the current hour."""
    return f"{(clock.now_ms() // HOUR_MS + 3) % 24:02d}"


class QuotaEngines:
    """Segment engines on a disk quota (``disk_capacity_bytes``: used = every byte under the data
    directory) with the file cleaner's clock injected, opened by a test and closed after it. Node policy
    fields default to ``file_reserved_ms=reserved_ms`` and a ``delete_when`` hour that is not now."""

    def __init__(self, data_dir: Path, clock: ManualClock, capacity: int, reserved_ms: int) -> None:
        self.data_dir, self.clock, self.capacity, self.reserved_ms = data_dir, clock, capacity, reserved_ms
        self.opened: list[Any] = []

    def __call__(self, capacity: int | None = None, **node: Any) -> Any:
        from storage_engine.adapters.segment import SegmentAdapter

        policy = NodePolicy(**{"file_reserved_ms": self.reserved_ms, "delete_when": other_hour(self.clock), **node})
        config = EngineConfig(
            data_dir=self.data_dir,
            adapter="segment",
            lifecycle_worker=False,
            disk_capacity_bytes=self.capacity if capacity is None else capacity,
            node_policy=policy,
        )
        engine = open_engine(config, self.clock)
        assert isinstance(engine, SegmentAdapter)
        engine.sleep = lambda seconds: self.clock.advance(int(seconds * 1000))  # never sleep for time
        self.opened.append(engine)
        return engine

    def close(self) -> None:
        for engine in self.opened:
            engine.close()


# Source for the crash tests' child processes (they define ``point`` and ``nth``): ``hook(obj, name, when)``
# makes the ``nth`` matching call of ``obj.name`` print "kill <point>" and SIGKILL the process.
KILL_HOOKS = """
calls = {"n": 0}
def die(*_a, **_k):
    calls["n"] += 1
    if calls["n"] >= nth:
        print("kill", point, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

def hook(obj, name, when=lambda *a, **k: True):
    orig = getattr(obj, name)
    def wrapper(*a, **k):
        if when(*a, **k):
            die()
        return orig(*a, **k)
    setattr(obj, name, wrapper)
"""


def run_child(
    script: str, *args: object, env: Mapping[str, str] | None = None, timeout: float = 120
) -> tuple[list[str], bool]:
    """Run a crash test's child, ``python -c script *args`` with the repository on ``PYTHONPATH`` and ``env``
    over this process's environment: its stdout lines, and whether a :data:`KILL_HOOKS` hook killed it (it
    printed ``kill`` and ended by SIGKILL). Any other end than that or a clean exit fails the test with the
    end of the child's stderr."""
    proc = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)],
        capture_output=True,
        env={**os.environ, **(env or {}), "PYTHONPATH": str(REPO_ROOT)},
        timeout=timeout,
        check=False,
    )
    lines = proc.stdout.decode().splitlines()
    killed = any(line.startswith("kill") for line in lines)  # two threads may both print it
    assert killed == (proc.returncode == -9), proc.stderr.decode()[-3000:]
    assert proc.returncode in (0, -9), proc.stderr.decode()[-3000:]
    return lines, killed


class EngineMachine(RuleBasedStateMachine):
    """Base of the lifecycle state machines: an engine of ``adapter_name`` on a temporary data dir with
    a manual clock, no background worker and a far disk quota; closed and removed at teardown."""

    adapter_name = "memory"
    node_policy = NodePolicy()

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="engine-machine-"))
        self.clock = ManualClock()
        config = EngineConfig(
            data_dir=self.tmp / "data",
            adapter=self.adapter_name,
            lifecycle_worker=False,
            disk_capacity_bytes=1 << 40,
            node_policy=self.node_policy,
        )
        self.engine: StorageAdapter = open_engine(config, self.clock)

    def teardown(self) -> None:
        self.engine.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
