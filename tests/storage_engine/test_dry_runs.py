"""Dry runs of the lifecycle steps (``dry_run=True``): the same decisions, nothing changed.

For each step — TTL scan, retention, reclamation, file cleaning, compaction, and every other
operation through the node's calls; per namespace and node-wide — a dry run must leave every
record, segment, file and figure as it was, and report what the real step then does: the same
segments, records and bytes. Every adapter, the injected clock, no sleeping. (Random states for
every operation: ``test_dry_run_properties.py``.)
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from storage_engine.api import LifecycleResult, NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.node.lifecycle import run_step
from storage_engine.node_api.protocol import SPECS, Operation, Scope, StepRequest
from storage_engine.policies.policy import NodePolicy
from tests.storage_engine.conftest import OpenAdapter
from tests.storage_engine.lifecycle_util import FAR_FUTURE, append_one, assert_verified, make_ns, other_hour, read_all

COUNTS = ("expired_records", "segments_deleted", "segments_rewritten", "records_removed", "forced_deletes", "rolled")


def state(adapter: StorageAdapter, data_dir: Path) -> tuple[Any, ...]:
    """Everything a dry run must not change: readable records, segments, figures, files."""
    namespaces = sorted(n.name for n in adapter.list_namespaces())
    shards = [(ns, s) for ns in namespaces for s in range(adapter.get_namespace(ns).shards)]
    files = sorted((str(p.relative_to(data_dir)), p.stat().st_size) for p in data_dir.rglob("*.log"))
    return (
        [[(r.offset, r.value) for r in read_all(adapter, ns, s)] for ns, s in shards],
        [adapter.list_segments(ns, s) for ns, s in shards],
        [adapter.shard_stats(ns, s) for ns, s in shards],
        files,
    )


def counts(result: LifecycleResult) -> dict[str, int]:
    return {k: getattr(result, k) for k in COUNTS}


def check(adapter: StorageAdapter, data_dir: Path, dry: LifecycleResult, real: LifecycleResult) -> None:
    assert not dry.more
    assert counts(dry) == counts(real)
    assert dry.bytes_reclaimed == real.bytes_reclaimed
    assert_verified(adapter)


@pytest.fixture
def engine(open_adapter: OpenAdapter, tmp_path: Path) -> tuple[StorageAdapter, Path]:
    return open_adapter(lifecycle_worker=False, disk_capacity_bytes=1 << 40), tmp_path / "data"


def test_retention_dry_run(engine: tuple[StorageAdapter, Path], clock: ManualClock) -> None:
    adapter, data_dir = engine
    ns = make_ns(adapter, "ret", shards=2, retention_ms=60_000, segment_ms=10_000)
    for _ in range(4):  # a segment of 5 records per 10 s on each shard
        for shard in (0, 1):
            adapter.append(ns, shard, [NewRecord(b"r" * 40)] * 5)
        clock.advance(10_001)
    clock.advance(30_000)  # the first two segments are past retention; the idle active one rolls
    before = state(adapter, data_dir)
    dry = adapter.apply_retention(ns, dry_run=True)
    assert state(adapter, data_dir) == before
    assert dry.segments_deleted == 4 and dry.records_removed == 20
    check(adapter, data_dir, dry, adapter.apply_retention(ns))
    assert state(adapter, data_dir) != before


def test_ttl_scan_dry_run_counts_due_entries(engine: tuple[StorageAdapter, Path], clock: ManualClock) -> None:
    adapter, data_dir = engine
    ns = make_ns(adapter, "scan", shards=2)
    now = clock.now_ms()
    for shard in (0, 1):
        adapter.append(ns, shard, [NewRecord(b"a", expire_at=now + 1000, key=b"k%d" % i) for i in range(7)])
        adapter.append(ns, shard, [NewRecord(b"b", expire_at=FAR_FUTURE, tags=("t",))] * 3)
    clock.advance(1001)
    before = state(adapter, data_dir)
    dry = adapter.expire_scan(ns, manual=True, dry_run=True)
    node_wide = adapter.expire_scan(None, manual=True, dry_run=True)
    assert state(adapter, data_dir) == before
    assert dry.expired_records == node_wide.expired_records == 14
    check(adapter, data_dir, dry, adapter.expire_scan(ns, manual=True))
    assert adapter.expire_scan(ns, manual=True, dry_run=True).expired_records == 0


def test_reclaim_dry_run_drops_and_rewrites(engine: tuple[StorageAdapter, Path], clock: ManualClock) -> None:
    adapter, data_dir = engine
    ns = make_ns(adapter, "rec", ttl_ms=60_000, segment_ms=10_000, reclaim_dead_ratio=0.5)
    adapter.append(ns, 0, [NewRecord(b"old" * 20)] * 6)  # wholly expired once a minute passes
    clock.advance(10_001)
    soon = clock.now_ms() + 5_000
    adapter.append(ns, 0, [NewRecord(b"x" * 30, expire_at=soon)] * 8 + [NewRecord(b"y" * 30)] * 2)
    clock.advance(10_001)
    append_one(adapter, ns, b"active")
    clock.advance(45_000)
    adapter.expire_scan(ns, manual=True)  # 8 of the second segment's 10 are now dead: worth a rewrite
    before = state(adapter, data_dir)
    dry = adapter.reclaim(ns, manual=True, dry_run=True)
    assert state(adapter, data_dir) == before
    assert (dry.segments_deleted, dry.segments_rewritten, dry.records_removed) == (1, 1, 14)
    real = adapter.reclaim(ns, manual=True)
    assert counts(dry) == counts(real)
    # A rewrite's bytes are the removed records' stored bytes (``expired_bytes``); the real
    # rewrite also saves the store's per-record overhead (RocksDB's 16-byte record key) and
    # may save or spend a batch header's worth.
    slack = 64 + 16 * real.records_removed
    assert abs(dry.bytes_reclaimed - real.bytes_reclaimed) <= slack, (dry.bytes_reclaimed, real.bytes_reclaimed)
    assert [r.value for r in read_all(adapter, ns)] == [b"y" * 30] * 2 + [b"active"]


def test_node_wide_reclaim_dry_run_covers_every_namespace(
    engine: tuple[StorageAdapter, Path], clock: ManualClock
) -> None:
    adapter, data_dir = engine
    for name in ("a", "b", "c"):
        ns = make_ns(adapter, name, ttl_ms=1_000, segment_ms=500)
        adapter.append(ns, 0, [NewRecord(b"z" * 25)] * 4)
    clock.advance(2_000)  # every record expired; each idle active segment is sealed and dropped
    before = state(adapter, data_dir)
    dry = adapter.reclaim(None, manual=True, dry_run=True)
    assert state(adapter, data_dir) == before
    assert (dry.segments_deleted, dry.records_removed, dry.rolled) == (3, 12, 3)
    check(adapter, data_dir, dry, adapter.reclaim(None, manual=True))


def test_file_cleaning_dry_run(engine: tuple[StorageAdapter, Path], clock: ManualClock) -> None:
    adapter, data_dir = engine
    adapter.set_node_policy(NodePolicy(file_reserved_ms=1000))  # manual: at any hour
    ns = make_ns(adapter, "files", segment_bytes=1024)
    for _ in range(9):
        append_one(adapter, ns, b"x" * 300, key=b"k", tags=("t",))
    clock.advance(1000)
    before = state(adapter, data_dir)
    dry = adapter.clean_files(manual=True, dry_run=True)
    assert state(adapter, data_dir) == before
    assert dry.segments_deleted > 0
    assert adapter.stats().counters["cleaner_segments_deleted_total"] == 0
    check(adapter, data_dir, dry, adapter.clean_files(manual=True))


def test_compaction_dry_run_through_the_same_flag(engine: tuple[StorageAdapter, Path], clock: ManualClock) -> None:
    adapter, data_dir = engine
    ns = make_ns(adapter, "cmp", cleanup_policy="compact", segment_bytes=1024, min_compaction_lag_ms=0)
    for i in range(40):
        append_one(adapter, ns, b"v%02d" % i * 8, key=b"k%d" % (i % 4))
    before = state(adapter, data_dir)
    dry = adapter.compact(ns, dry_run=True)
    assert state(adapter, data_dir) == before
    real = adapter.compact(ns, manual=True)
    assert dry.records_removed == real.records_removed > 0
    assert_verified(adapter)


def test_forced_cleaning_dry_run_simulates_the_watermark(
    open_adapter: OpenAdapter, tmp_path: Path, adapter_name: str
) -> None:
    """Above the forcible ratio the cleaner deletes until use is back at the watermark: the
    dry run counts drops against the disk it would leave, as the real run measures it."""
    if adapter_name == "rocksdb":
        pytest.skip("RocksDB hands dropped ranges' space back only when it compacts them, so the real run overshoots")
    adapter = open_adapter(lifecycle_worker=False, disk_capacity_bytes=8 << 20)
    data_dir = tmp_path / "data"
    ns = make_ns(adapter, "forced", segment_bytes=256 * 1024)
    big = b"b" * 60_000
    for _ in range(25):
        adapter.append(ns, 0, [NewRecord(big)])
    measured = adapter.check_disk()
    forcibly = measured.used_ratio - 1.5 * 4 * len(big) / measured.capacity_bytes
    adapter.set_node_policy(
        NodePolicy(
            file_reserved_ms=10**12,
            delete_when="00",
            disk_max_used_ratio=forcibly,
            disk_clean_forcibly_ratio=forcibly,
            disk_warning_ratio=0.99,
        )
    )
    before = state(adapter, data_dir)
    dry = adapter.clean_files(dry_run=True)
    assert state(adapter, data_dir) == before
    assert dry.forced_deletes == dry.segments_deleted > 0
    real = adapter.clean_files()
    assert (dry.segments_deleted, dry.forced_deletes) == (real.segments_deleted, real.forced_deletes)


def test_dry_run_leaves_an_idle_active_segment_active(engine: tuple[StorageAdapter, Path], clock: ManualClock) -> None:
    adapter, _ = engine
    ns = make_ns(adapter, "idle", ttl_ms=1_000, segment_ms=60_000)
    adapter.append(ns, 0, [NewRecord(b"i")] * 3)
    clock.advance(1_001)
    [active] = adapter.list_segments(ns, 0)
    dry = adapter.reclaim(ns, manual=True, dry_run=True)
    assert (dry.rolled, dry.segments_deleted, dry.records_removed) == (1, 1, 3)
    assert adapter.list_segments(ns, 0) == [active]


def test_every_operation_that_changes_data_answers_its_dry_run_at_once(
    engine: tuple[StorageAdapter, Path], clock: ManualClock, adapter_name: str
) -> None:
    """Every operation whose spec offers a dry run (all but the disk check), through the node's own
    calls (protocol SPECS → node.lifecycle CALLS), per namespace and node-wide: nothing changes and
    the answer never asks to be called again. Adapters without segment files skip offload and recall."""
    adapter, data_dir = engine
    ns = make_ns(adapter, "every", shards=2, ttl_ms=5_000, segment_ms=1_000, cleanup_policy="compact,delete")
    adapter.create_subscription(ns, "late")
    for i in range(30):
        adapter.append(ns, i % 2, [NewRecord(b"v%d" % i * 20, key=b"k%d" % (i % 3), expire_at=clock.now_ms() + 2_000)])
        clock.advance(400)
    adapter.update_namespace(
        ns,
        replace(
            adapter.get_namespace(ns).policy,
            backlog_quota_bytes=200,
            backlog_quota_policy="consumer_backlog_eviction",
            remote_storage_enabled=True,
            local_retention_ms=0,
        ),
    )
    before = state(adapter, data_dir)
    offered = [op for op, spec in SPECS.items() if spec.dry_run]
    assert set(SPECS) - set(offered) == {Operation.DISK_CHECK}
    for op in offered:
        targets: dict[Scope, list[str | None]] = {Scope.NAMESPACE: [ns], Scope.NODE: [None], Scope.ANY: [ns, None]}
        scopes = targets[SPECS[op].scope]
        for namespace in scopes:
            result = run_step(adapter, StepRequest(op, namespace, dry_run=True))
            assert isinstance(result, LifecycleResult) and not result.more, (op, namespace, result)
            if op in (Operation.OFFLOAD, Operation.RECALL) and adapter_name != "segment":
                assert result.skipped == "unsupported"
            assert state(adapter, data_dir) == before, (op, namespace)
    assert [s.cursors for s in adapter.list_subscriptions(ns)] == [(-1, -1)]


def test_a_dry_run_outside_off_peak_hours_says_so_once(engine: tuple[StorageAdapter, Path], clock: ManualClock) -> None:
    """A scheduled (not manual) scan or reclamation outside ``off_peak_hours`` is skipped and asks to be
    called again later; its dry run says it is skipped and never asks to be repeated."""
    adapter, data_dir = engine
    adapter.set_node_policy(NodePolicy(off_peak_hours=other_hour(clock)))
    ns = make_ns(adapter, "peak", ttl_ms=60_000)
    adapter.append(ns, 0, [NewRecord(b"p", expire_at=clock.now_ms() + 10)] * 3 + [NewRecord(b"q")] * 10)
    clock.advance(11)  # 3 of 13 expired: not urgent (urgent_expired_ratio 0.5)
    before = state(adapter, data_dir)
    for call in (adapter.expire_scan, adapter.reclaim):
        real = call(ns)
        assert (real.skipped, real.more) == ("off_peak", True)
        dry = call(ns, dry_run=True)
        assert (dry.skipped, dry.more) == ("off_peak", False)
    assert state(adapter, data_dir) == before
