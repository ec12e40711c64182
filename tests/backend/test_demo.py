"""make up's demo producer (backend/demo.py) against a real node: data from the first minute."""

from __future__ import annotations

import time

from backend import demo
from backend.apps.lifecycle.management.commands.bootstrap import DEMO_NAMESPACES
from backend.apps.lifecycle.management.commands.demo import ensure_subscription
from backend.apps.namespaces.models import Namespace
from backend.apps.namespaces.services import create_namespace
from storage_engine.client import NodeClient


def test_the_demo_fills_every_namespace_with_expiring_data_and_a_backlog(registered_node, node):
    for name, shards in DEMO_NAMESPACES:
        create_namespace(name=name, shards=shards)
    now = int(time.time() * 1000)
    with NodeClient(node.url, node.token) as client:
        producer = demo.DemoProducer(client, lambda: now, ensure_subscription)
        for _ in range(3):
            producer.tick()
        stats = {name: [client.shard_stats(name, s) for s in range(shards)] for name, shards in DEMO_NAMESPACES}
        backlog = client.backlog(*demo.SUBSCRIPTION)
    for name, shards in stats.items():
        stored = sum(s["record_count"] for s in shards)
        assert stored >= demo.BACKFILL_RECORDS, name  # the backfill landed, then the ticks
    # The backfill spans 30 minutes and sensor readings live 2: most are already expired.
    sensors = stats["sensor-readings"]
    assert sum(s["expired_records"] for s in sensors) > sum(s["record_count"] for s in sensors) / 2
    assert sum(s["expired_records"] for s in stats["payments.events"]) == 0  # no TTL there
    # The subscription exists in the control plane (the console lists it) and keeps a small backlog.
    assert Namespace.objects.get(name="orders").subscriptions.filter(name="billing").exists()
    assert backlog and all(0 < b["messages"] <= demo.CONSUMER_LAG for b in backlog if b["end_offset"] > 20)
