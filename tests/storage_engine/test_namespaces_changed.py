"""A lifecycle step names the namespaces it changed (``LifecycleResult.namespaces_changed``, issue 26), so the
control plane can attribute a node-wide sweep's work: the namespaces whose records it expired or removed,
never one it only looked at; a dry run names those it would change; a call on one namespace names it."""

from __future__ import annotations

from storage_engine.api import LifecycleResult, NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from tests.storage_engine.lifecycle_util import make_ns


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
