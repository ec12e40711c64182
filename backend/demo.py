"""``make up``'s demo producer: a realistic trickle into the demo namespaces from the first minute.

So that a new operator's first Overview is not empty, this process (the ``demo``
line of the ``Procfile``) writes into the namespaces ``bootstrap --demo``
created, straight to the node (``NODE_URL``, ``NODE_TOKEN``) as a producer
would:

- at start, a backfill spread over the last ``BACKFILL_MINUTES`` (a stream with a
  TTL: over its TTL, so nothing arrives already expired) with producer timestamps,
  so charts have something to show at once;
- then every ``TICK_S`` a few records per namespace: ``orders`` keyed by order
  id with a 30-minute TTL, ``sensor-readings`` tagged by sensor with a
  2-minute TTL (expired data appears and is reclaimed within minutes),
  ``payments.events`` with headers and no TTL, ``user-profiles`` keyed
  updates of a small key set (duplicate keys for compaction);
- a consumer of the ``billing`` subscription on ``orders`` that acknowledges
  a little less than is produced, so a backlog is visible.

The demo namespaces are created (``bootstrap --demo``) with :data:`POLICIES`: their
records expire within minutes at a trickle, so a segment would take days to reach
``segment_bytes`` or the default ``segment_ms``; short segments go whole at their
deadline, which keeps the expired ratio under 5 % (the built-in alert is at 20 %) with
no rewrites. ``tests/storage_engine/test_demo_expired_ratio.py`` replays an hour of this
load against the engine and checks it after every sweep.

``DEMO_PRODUCER=0`` turns it off (the process then just waits, since honcho
stops every process when one exits). It stops on SIGTERM/SIGINT. Failures
(node not up yet, a namespace not pushed yet) are logged and retried. It runs
as ``manage.py demo`` so that the subscription is created through the control
plane's service (listed and audited like any other).
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
import time
from collections.abc import Callable

from storage_engine.api import NewRecord
from storage_engine.errors import StorageError
from storage_engine.node_api.client import NodeClient

log = logging.getLogger("demo")

TICK_S = 1.0
BACKFILL_MINUTES = 30
BACKFILL_RECORDS = 600  # steps per namespace at most (a stream with a TTL: one per tick of its TTL)
SUBSCRIPTION = ("orders", "billing")
CONSUMER_LAG = 20  # records per shard the demo consumer leaves unacknowledged
MINUTE_MS = 60_000
NAMESPACES = [("orders", 4), ("payments.events", 2), ("sensor-readings", 4), ("user-profiles", 2)]  # name, shards
TTLS = {"orders": 30 * MINUTE_MS, "sensor-readings": 2 * MINUTE_MS}  # the records' expire_at − timestamp

# Overrides the demo namespaces are created with (bootstrap --demo). A segment spans about one or two
# ``segment_ms`` of record time and goes whole at its deadline, so only that much of a TTL is expired
# and still stored: 2-4 s of a 2-minute TTL, 30-60 s of 30 minutes (an hour of this load peaks under
# 2 %, tests/storage_engine/test_demo_expired_ratio.py).
POLICIES: dict[str, dict[str, int]] = {
    "orders": {"segment_ms": 30_000},
    "sensor-readings": {"segment_ms": 2_000},
}


def orders(rng: random.Random, now: int, at: int | None = None) -> list[NewRecord]:
    order = rng.randrange(100_000)
    value = b'{"order": %d, "amount": %d}' % (order, rng.randrange(1, 500))
    return [NewRecord(value, key=b"order-%d" % order, timestamp=at, expire_at=(at or now) + TTLS["orders"])]


def sensor_readings(rng: random.Random, now: int, at: int | None = None) -> list[NewRecord]:
    out = []
    for _ in range(3):
        sensor = rng.randrange(12)
        value = b'{"celsius": %.1f}' % rng.uniform(15, 30)
        expire_at = (at or now) + TTLS["sensor-readings"]
        out.append(NewRecord(value, tags=(f"sensor-{sensor}",), timestamp=at, expire_at=expire_at))
    return out


def payments(rng: random.Random, now: int, at: int | None = None) -> list[NewRecord]:
    value = b'{"payment": %d, "status": "settled"}' % rng.randrange(1_000_000)
    return [NewRecord(value, headers=(("source", b"demo"),), timestamp=at)]


def profiles(rng: random.Random, now: int, at: int | None = None) -> list[NewRecord]:
    user = rng.randrange(40)
    return [NewRecord(b'{"user": %d, "visits": %d}' % (user, rng.randrange(100)), key=b"user-%d" % user, timestamp=at)]


Generator = Callable[[random.Random, int, "int | None"], list[NewRecord]]
STREAMS: dict[str, Generator] = {
    "orders": orders,
    "sensor-readings": sensor_readings,
    "payments.events": payments,
    "user-profiles": profiles,
}


class DemoProducer:
    """The demo load on one node client. ``ensure_subscription`` makes sure the demo subscription
    exists (through the control plane, so the console lists it); it may raise StorageError."""

    def __init__(
        self, client: NodeClient, clock: Callable[[], int], ensure_subscription: Callable[[], None], seed: int = 7
    ) -> None:
        self.client, self.clock, self.ensure_subscription = client, clock, ensure_subscription
        self.rng = random.Random(seed)
        self.backfilled: set[str] = set()
        self.subscribed = False

    def backfill(self, namespace: str) -> None:
        """Records with producer timestamps over the last BACKFILL_MINUTES, or the stream's TTL when
        shorter (none arrives expired), sent a segment's time window per call (a batch is never
        split across segments, so one spanning minutes would make a segment expire over minutes)."""
        now = self.clock()
        span = min(BACKFILL_MINUTES * MINUTE_MS, TTLS.get(namespace, BACKFILL_MINUTES * MINUTE_MS))
        start = now - span + 1  # the oldest expires 1 ms from now, not at once
        steps = min(BACKFILL_RECORDS, int(span / (TICK_S * 1000)))  # no denser than the ticks that follow
        step = span // steps
        window = POLICIES.get(namespace, {}).get("segment_ms", MINUTE_MS)
        chunks: dict[int, list[NewRecord]] = {}
        for i in range(steps):
            at = start + i * step
            chunks.setdefault(at // window, []).extend(STREAMS[namespace](self.rng, now, at))
        for records in chunks.values():
            for i in range(0, len(records), 200):
                self.client.produce(namespace, records[i : i + 200])
        self.backfilled.add(namespace)

    def tick(self) -> int:
        """One round of produce (and backfill for namespaces that just appeared); records written."""
        written = 0
        now = self.clock()
        for namespace, make in STREAMS.items():
            try:
                if namespace not in self.backfilled:
                    self.backfill(namespace)
                records = make(self.rng, now, None)
                self.client.produce(namespace, records)
                written += len(records)
            except StorageError as exc:  # not created or pushed yet, or the node restarts: try next tick
                log.debug("demo: %s: %s", namespace, exc)
        self.consume()
        return written

    def consume(self) -> None:
        """Acknowledge most of what was produced, so the backlog stays small but visible."""
        namespace, name = SUBSCRIPTION
        try:
            if not self.subscribed:
                self.ensure_subscription()
                self.subscribed = True
            for row in self.client.backlog(namespace, name):
                if row["end_offset"] - row["cursor"] - 1 > CONSUMER_LAG:
                    self.client.acknowledge(namespace, name, row["shard"], row["end_offset"] - CONSUMER_LAG)
        except StorageError as exc:  # the namespace or subscription is not there yet
            log.debug("demo: consume: %s", exc)


def run(client: NodeClient, ensure_subscription: Callable[[], None]) -> None:
    """Produce every TICK_S until SIGTERM/SIGINT (or just wait there with ``DEMO_PRODUCER=0``)."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    if os.environ.get("DEMO_PRODUCER", "1").lower() in ("0", "false", "no", "off"):
        log.info("demo producer off (DEMO_PRODUCER=0)")
        stop.wait()
        return
    producer = DemoProducer(client, lambda: int(time.time() * 1000), ensure_subscription)
    log.info("demo producer writing every %.0f s (DEMO_PRODUCER=0 turns it off)", TICK_S)
    while not stop.wait(TICK_S):
        producer.tick()
