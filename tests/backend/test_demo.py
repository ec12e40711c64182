"""make up's demo producer (backend/demo.py) against a real node: data from the first minute.

The node runs on an injected clock held at the producer's "now" (tests/support/clocked_node.py), so what has
expired is a fact of the demo's data, not of how long this machine took to write it."""

from __future__ import annotations

import io
import random
import time
from pathlib import Path

from django.core.management import call_command

from backend import demo
from backend.apps.lifecycle.management.commands.bootstrap import DEMO_NAMESPACES
from backend.apps.lifecycle.management.commands.demo import ensure_subscription
from backend.apps.namespaces.models import Namespace
from backend.apps.nodes.models import StorageNode
from backend.apps.nodes.services import DEFAULT_NODE_NAME
from storage_engine.clock import ManualClock
from storage_engine.node_api.client import NodeClient
from tests.support.clocked_node import clocked_node


def test_the_demo_fills_every_namespace_with_expiring_data_and_a_backlog(db, settings, tmp_path: Path):
    now = int(time.time() * 1000)
    clock = ManualClock(now)
    with clocked_node(tmp_path / "node", clock, token="demo-token") as url:
        settings.NODE_URL, settings.NODE_TOKEN = url, "demo-token"
        StorageNode.objects.create(name=DEFAULT_NODE_NAME, url=url, token="demo-token")
        call_command("bootstrap", "--demo", stdout=io.StringIO())  # as make up does: with the demo's policies
        with NodeClient(url, "demo-token") as client:
            producer = demo.DemoProducer(client, lambda: now, ensure_subscription)
            for _ in range(3):
                producer.tick()
            stats = {name: [client.shard_stats(name, s) for s in range(n)] for name, n in DEMO_NAMESPACES}
            segments = {name: [client.list_segments(name, s) for s in range(n)] for name, n in DEMO_NAMESPACES}
            client_policy = {name: client.get_namespace(name).policy.to_dict() for name in demo.POLICIES}
            backlog = client.backlog(*demo.SUBSCRIPTION)
            # One second on, the oldest backfilled second of each stream with a TTL has expired.
            clock.advance(1_000)
            a_second_on = {
                name: sum(client.shard_stats(name, s)["expired_records"] for s in range(n))
                for name, n in DEMO_NAMESPACES
            }
    for name, shards in stats.items():
        stored = sum(s["record_count"] for s in shards)
        # The backfill landed (a stream with a TTL: one step a second over its TTL), then the ticks.
        ttl_s = demo.TTLS.get(name, 10**9) // 1000
        steps = min(demo.BACKFILL_RECORDS, ttl_s)
        assert stored >= steps * len(demo.STREAMS[name](random.Random(1), now, now)), name
        # Nothing arrives expired: the backfill spans at most a stream's TTL, its oldest record expiring 1 ms after
        # the producer's now; a second later the first second of a stream with a TTL has.
        assert sum(s["expired_records"] for s in shards) == 0, name
        assert (a_second_on[name] > 0) == (name in demo.TTLS), name
    # Short TTLs come with short segments (make up's policies): they go whole at their deadlines.
    for name, overrides in demo.POLICIES.items():
        assert Namespace.objects.get(name=name).policy_overrides == overrides
        assert client_policy[name] == {**client_policy[name], **overrides}  # the node enforces them
    assert max(len(client_segments) for client_segments in segments["sensor-readings"]) > 10
    assert sum(s["expired_records"] for s in stats["payments.events"]) == 0  # no TTL there
    # The subscription exists in the control plane (the console lists it) and keeps a small backlog.
    assert Namespace.objects.get(name="orders").subscriptions.filter(name="billing").exists()
    assert backlog and all(0 < b["messages"] <= demo.CONSUMER_LAG for b in backlog if b["end_offset"] > 20)
