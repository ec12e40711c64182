"""The engine-side helpers every tier test shares; the SeaweedFS/``file://`` tier fixtures stay in
:mod:`tests.storage_engine.tier_util`.

A segment engine on a tier (:func:`engine_for`) with the clock injected, namespace ``n`` (one
shard) of a tiered policy (:func:`policy`: 4 KiB segments, no total retention, local copies
dropped once offloaded) filled with records of :func:`record`, and the checks that read it back.

Import ``clock_fixture`` and ``engine_fixture`` into a test module to use them (``engine`` needs
``tier_fixture`` from :mod:`tests.storage_engine.tier_util` there too): ``clock`` is a
:class:`ManualClock` at :data:`T0`, ``engine`` a fresh engine on ``tier`` closed after the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from storage_engine import open_engine
from storage_engine.api import NewRecord, Record, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.config import EngineConfig
from storage_engine.policies.policy import NamespacePolicy, NodePolicy
from tests.storage_engine.tier_util import Tier

T0 = 1_700_000_000_000
N = 120


def policy(**over: object) -> NamespacePolicy:
    base: dict[str, object] = {
        "segment_bytes": 4096,
        "retention_ms": None,
        "remote_storage_enabled": True,
        "local_retention_ms": 0,
    }
    return NamespacePolicy(**{**base, **over})  # type: ignore[arg-type]


def record(i: int, **over: object) -> NewRecord:
    """Record ``i``: value ``b"<i>:vvv…"``, one of 11 keys, one of 3 tags, timestamp ``T0 + 10 i``."""
    fields: dict[str, object] = {
        "value": b"%d:" % i + b"v" * 200,
        "key": b"k%d" % (i % 11),
        "tags": (f"t{i % 3}",),
        "timestamp": T0 + i * 10,
    }
    return NewRecord(**{**fields, **over})  # type: ignore[arg-type]


@pytest.fixture(name="clock")
def clock_fixture() -> ManualClock:
    return ManualClock(T0)


def engine_for(
    data_dir: Path,
    tier: Tier | str,
    clock: ManualClock,
    node: NodePolicy | None = None,
    capacity: int | None = None,
) -> StorageAdapter:
    """A segment engine on ``tier`` (a :class:`Tier` or a tier URI) without the lifecycle worker;
    files are deleted without delay unless ``node`` says otherwise; ``capacity`` is a disk quota."""
    config = EngineConfig(
        data_dir=data_dir,
        lifecycle_worker=False,
        tier_uri=tier if isinstance(tier, str) else tier.uri,
        node_policy=node or NodePolicy(file_delete_delay_ms=0),
        disk_capacity_bytes=capacity,
    )
    return open_engine(config, clock)


@pytest.fixture(name="engine")
def engine_fixture(tmp_path: Path, tier: Tier, clock: ManualClock) -> Iterator[StorageAdapter]:
    e = engine_for(tmp_path / "data", tier, clock)
    yield e
    e.close()


def read_all(engine: StorageAdapter, start: int = 0) -> list[Record]:
    out: list[Record] = []
    offset = start
    while True:
        page = engine.read("n", 0, offset, max_records=17)
        if not page.records:
            return out
        out += page.records
        offset = page.next_offset


def local_files(data_dir: Path) -> list[str]:
    return sorted(p.name for p in (data_dir / "segments" / "n" / "0").iterdir())


def check_every_lookup(engine: StorageAdapter, n: int = N, *, by_timestamp: bool = True) -> None:
    """Records ``0 … n-1`` of :func:`record` read back by offset, key and tag, and (unless
    ``by_timestamp`` is false) by timestamp."""
    records = read_all(engine)
    assert [r.offset for r in records] == list(range(n))
    assert all(r.value == b"%d:" % r.offset + b"v" * 200 for r in records)
    for k in range(11):
        latest = max(i for i in range(n) if i % 11 == k)
        found = engine.read_key("n", 0, b"k%d" % k)
        assert found is not None and found.offset == latest
    for t in range(3):
        got = engine.read_tag("n", 0, f"t{t}", max_records=1000)
        assert [r.offset for r in got.records] == [i for i in range(n) if i % 3 == t]
    if by_timestamp:
        for i in (0, 1, 57, n - 1):
            assert engine.offset_for_timestamp("n", 0, T0 + i * 10) == i
            assert engine.offset_for_timestamp("n", 0, T0 + i * 10 - 5) == i
