"""An hour of ``make up``'s demo load against the engine: the demo namespaces' expired ratio stays
under 5 % after every lifecycle sweep, so the built-in "expired ratio above 20 %" alert never fires.

The load is the demo producer's own code (``backend.demo.DemoProducer``: the backfill, then a tick
a second) on the demo namespaces created with the demo's policies (``backend.demo.POLICIES``, as
``bootstrap --demo`` does), through a stand-in for the node's produce route that places records
as the node does (``storage_engine.node_api.placement``). The control plane is played as it schedules:
each deadline-driven sweep at the node's next due time (``next_due``, plus the grace and the minimum
gap per kind of ``backend/apps/lifecycle/services.py``), and the interval safety nets. Injected
clock, no sleeping.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import pytest

from backend import demo
from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.errors import UnknownNamespaceError
from storage_engine.node_api.placement import RoundRobin, shard_for_key
from storage_engine.policies.policy import namespace_policy_from
from tests.storage_engine.conftest import OpenAdapter

HOUR_S = 3_600
LIMIT = 0.05
GRACE_MS = 20  # DUE_GRACE_MS
MIN_GAP_MS = {"reclaim": 100, "expire-scan": 1_000, "retention": 1_000}  # DUE_MIN_GAP_MS
SAFETY_NET_MS = 60_000  # the interval sweeps, at least 60 s apart
TTL_NAMESPACES = ("orders", "sensor-readings")


class EngineProducer:
    """What the demo producer calls on its node client, answered by the engine as the node's routes do."""

    def __init__(self, adapter: StorageAdapter) -> None:
        self.adapter = adapter
        self.round_robin = RoundRobin()

    def produce(self, namespace: str, records: Sequence[NewRecord]) -> list[tuple[int, int]]:
        shards = self.adapter.get_namespace(namespace).shards
        by_shard: dict[int, list[NewRecord]] = defaultdict(list)
        for r in records:
            shard = shard_for_key(r.key, shards) if r.key is not None else self.round_robin.next_shard(shards)
            by_shard[shard].append(r)
        out = []
        for shard, batch in by_shard.items():
            base = self.adapter.append(namespace, shard, batch).base_offset
            out += [(shard, base + i) for i in range(len(batch))]
        return out


def no_subscription() -> None:
    raise UnknownNamespaceError("orders")  # the consumer is the control plane's; not part of this load


def expired_ratio(adapter: StorageAdapter, namespace: str) -> float:
    stats = [adapter.shard_stats(namespace, s) for s in range(adapter.get_namespace(namespace).shards)]
    stored = sum(s.record_count for s in stats)
    return sum(s.expired_records for s in stats) / stored if stored else 0.0


@pytest.mark.slow  # an hour of the demo, swept at every deadline: `make test` runs it, `make check` does not
@pytest.mark.parametrize("adapter_name", ["memory"], indirect=True)  # the rule's own tests cover every adapter
def test_an_hour_of_the_demo_keeps_the_expired_ratio_under_5_percent(
    open_adapter: OpenAdapter, clock: ManualClock
) -> None:
    adapter = open_adapter(lifecycle_worker=False, disk_capacity_bytes=1 << 40)
    for name, shards in demo.NAMESPACES:
        adapter.create_namespace(name, shards, namespace_policy_from(demo.POLICIES.get(name, {})))
    producer = demo.DemoProducer(EngineProducer(adapter), clock.now_ms, no_subscription)  # type: ignore[arg-type]
    start = clock.now_ms()
    next_tick = start
    last_run: dict[str, int] = {}
    safety_net = {"expire-scan": start + SAFETY_NET_MS, "reclaim": start + SAFETY_NET_MS}
    worst = dict.fromkeys(TTL_NAMESPACES, 0.0)
    sweeps = deleted = 0

    def check(after: str) -> None:
        for name in TTL_NAMESPACES:
            ratio = expired_ratio(adapter, name)
            worst[name] = max(worst[name], ratio)
            assert ratio < LIMIT, f"{name}: expired ratio {ratio:.3f} after {after} at +{clock.now_ms() - start} ms"

    while next_tick <= start + HOUR_S * 1000:
        due = adapter.next_due().due
        etas = {
            kind: max(when, last_run.get(kind, when) + MIN_GAP_MS[kind]) + GRACE_MS
            for kind, when in due.items()
            if when is not None
        }
        kind, eta = min([*etas.items(), *safety_net.items()], key=lambda item: item[1], default=("", next_tick))
        if next_tick <= eta:
            clock.advance(next_tick - clock.now_ms())
            producer.tick()
            next_tick += int(demo.TICK_S * 1000)
            continue
        clock.advance(max(0, eta - clock.now_ms()))
        if kind in safety_net and safety_net[kind] == eta:  # the interval sweep: node-wide
            result = adapter.expire_scan(None) if kind == "expire-scan" else adapter.reclaim(None)
            safety_net[kind] = eta + SAFETY_NET_MS
        else:
            result = adapter.sweep_due(kind)
            last_run[kind] = clock.now_ms()
        sweeps += 1
        deleted += result.segments_deleted
        check(f"{kind} sweep")
    # The load was real: data expired all along and whole segments went at their deadlines.
    assert sweeps > HOUR_S
    assert deleted > 1_000
    assert all(adapter.shard_stats("sensor-readings", s).log_start_offset > 0 for s in range(4))
    assert 0 < worst["sensor-readings"] < LIMIT
    assert expired_ratio(adapter, "payments.events") == 0.0  # no TTL there
