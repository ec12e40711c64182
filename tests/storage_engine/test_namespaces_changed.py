"""A lifecycle step names the namespaces it changed (``LifecycleResult.namespaces_changed``, issue 26), so the
control plane can attribute a node-wide sweep's work: the namespaces whose records it expired or removed,
never one it only looked at; a dry run names those it would change; a call on one namespace names it."""

from __future__ import annotations

from pathlib import Path

from storage_engine.api import LifecycleResult, NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from tests.storage_engine.lifecycle_util import make_ns
from tests.storage_engine.tier_engine import T0, N, engine_for, record
from tests.storage_engine.tier_engine import policy as tier_policy


def _three(adapter: StorageAdapter, clock: ManualClock) -> None:
    """``hot`` and ``warm`` hold records that are due; ``cold`` only records that are not."""
    now = clock.now_ms()
    for name, due in (("hot", 3), ("warm", 1), ("cold", 0)):
        make_ns(adapter, name, shards=2)
        adapter.append(name, 1, [NewRecord(b"gone", expire_at=now + 10)] * due + [NewRecord(b"kept")])
    clock.advance(100)


def test_a_node_wide_scan_names_whom_it_changed(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    _three(lc_adapter, clock)
    dry = lc_adapter.expire_scan(None, dry_run=True)
    real = lc_adapter.expire_scan(None)
    assert real.namespace is None and real.expired_records == 4
    assert real.namespaces_changed == ("hot", "warm")  # sorted; cold was walked past, not changed
    assert dry.namespaces_changed == real.namespaces_changed  # what it would change is what it changes
    assert lc_adapter.expire_scan(None).namespaces_changed == ()  # nothing left to do: nobody changed
    assert real.to_dict()["namespaces_changed"] == ("hot", "warm")


def test_a_deadline_driven_scan_names_them_too(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    _three(lc_adapter, clock)
    assert lc_adapter.sweep_due("expire-scan").namespaces_changed == ("hot", "warm")


def test_a_call_on_one_namespace_names_it_when_it_changed_it(lc_adapter: StorageAdapter, clock: ManualClock) -> None:
    _three(lc_adapter, clock)
    assert lc_adapter.expire_scan("warm").namespaces_changed == ("warm",)
    assert lc_adapter.expire_scan("cold").namespaces_changed == ()
    assert lc_adapter.expire_scan("warm").namespaces_changed == ()  # done already


def test_the_field_has_one_shape_whatever_it_is_given() -> None:
    """A node's JSON answer gives a list, a sweep a set: both are the sorted tuple; scanning alone is no change."""
    assert LifecycleResult("expire_scan", namespaces_changed=["b", "a", "b"]).namespaces_changed == ("a", "b")  # type: ignore[arg-type]
    assert LifecycleResult("reclaim", namespace="x", scanned=9, rolled=1).namespaces_changed == ()
    assert LifecycleResult("reclaim", namespace="x", segments_rewritten=1).namespaces_changed == ("x",)
    assert LifecycleResult("subscription_ttl", namespace="x", cursors_moved=2).namespaces_changed == ("x",)


def test_node_wide_offload_and_recall_name_the_namespaces_they_moved(tmp_path: Path) -> None:
    """Tiered storage sweeps too: the node-wide offload names the namespaces whose segments it uploaded or whose
    local copies it dropped, the node-wide recall those it brought back; the rest were only looked at."""
    clock = ManualClock(T0)
    engine = engine_for(tmp_path / "data", (tmp_path / "tier").as_uri(), clock)
    try:
        for name, over in (("moved", {}), ("empty", {}), ("local", {"remote_storage_enabled": False})):
            engine.create_namespace(name, 1, tier_policy(**over))
        for i in range(N):
            engine.append("moved", 0, [record(i)])
            engine.append("local", 0, [record(i)])
        clock.set(T0 + N * 10 + 1000)
        assert engine.offload(None, dry_run=True).namespaces_changed == ("moved",)
        first = engine.offload(None)
        assert first.segments_offloaded > 0 and first.namespaces_changed == ("moved",)
        while engine.offload(None).more:
            pass
        assert engine.offload(None).namespaces_changed == ()  # all of it is in the object store already
        engine.update_namespace("moved", tier_policy(local_retention_ms=None))  # keep everything local again
        assert engine.recall(None, dry_run=True).namespaces_changed == ("moved",)
        recalled = engine.recall(None, limit=1000)
        assert recalled.segments_recalled > 0 and recalled.namespaces_changed == ("moved",)
        assert engine.recall(None).namespaces_changed == ()
    finally:
        engine.close()
