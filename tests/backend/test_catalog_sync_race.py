"""The first catalog sync at start-up races the other writers of the same rows (issue 26: a one-off
``IntegrityError``): the bootstrap's sync, beat's periodic sync, the sync a metrics collection queues and the
collection itself all find a shard's rows missing and insert them. Each writer tolerates losing that race: the
segment and shard-status inserts are upserts, and a shard-status create that loses updates the winner's row.

The first two tests force the losing order (the other writer looks, waits until this one has looked too, then
inserts and commits first) on whichever database the suite runs on; the last runs real syncs and collections at
once, in rounds, on PostgreSQL (SQLite lets one writer in at a time, so the race there is the forced one)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection

from backend.apps.catalog import services as catalog
from backend.apps.catalog.models import Segment, ShardStatus
from backend.apps.metrics import services as metrics
from backend.apps.namespaces.models import Namespace
from storage_engine.api import NewRecord, SegmentInfo
from storage_engine.node_api.client import NodeClient

pytestmark = pytest.mark.django_db(transaction=True)


class Gate:
    """Holds this writer between its look at the rows and its insert until the other writer has looked as well
    and then finished (inserted and committed)."""

    def __init__(self) -> None:
        self.both_looked = threading.Barrier(2, timeout=20)
        self.other_done = threading.Event()

    def hold(self) -> None:
        self.both_looked.wait()
        assert self.other_done.wait(20)


class GatedSegments(list[SegmentInfo]):
    """The node's segments, handed to ``sync_shard`` after it has read the catalog's rows: iterating them waits
    at the gate (what a slower sync does between its read and its insert)."""

    def __init__(self, segments: list[SegmentInfo], gate: Gate) -> None:
        super().__init__(segments)
        self.gate = gate

    def __iter__(self) -> Iterator[SegmentInfo]:
        self.gate.hold()
        return super().__iter__()


class GatedStats(dict[str, Any]):
    """A shard's stats, read by ``update_shard_status`` after it looked for the shard's row."""

    def __init__(self, stats: dict[str, Any], gate: Gate) -> None:
        super().__init__(stats)
        self.gate = gate
        self.held = False

    def get(self, key: str, default: Any = None) -> Any:
        if not self.held:
            self.held = True
            self.gate.hold()
        return super().get(key, default)


class LookedFirst(dict[tuple[str, int], dict[str, Any]]):
    """A collection's shard figures: iterated after the collection read the existing rows; tells the gate it
    has looked, and the other writer waits for it to finish."""

    def __init__(self, figures: dict[tuple[str, int], dict[str, Any]], gate: Gate) -> None:
        super().__init__(figures)
        self.gate = gate

    def items(self) -> Any:
        self.gate.both_looked.wait()
        return super().items()


def in_thread(work: Callable[[], Any], errors: list[BaseException], done: threading.Event | None = None):
    def run() -> None:
        try:
            work()
        except BaseException as exc:
            errors.append(exc)
        finally:
            if done is not None:
                done.set()
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.fixture
def filled(api_as: Any, registered_node: Any, node: Any) -> Namespace:
    admin = api_as("admin")
    assert admin.post("/api/namespaces/", {"name": "orders", "shards": 2}, format="json").status_code == 201
    admin.patch("/api/namespaces/orders/policy", {"set": {"segment_bytes": 1024}}, format="json")
    with NodeClient(node.url, node.token) as client:
        for i in range(60):
            client.append("orders", i % 2, [NewRecord(value=b"v" * 200, key=b"k%d" % (i % 5))])
    return Namespace.objects.get(name="orders")


class LookedSegments(list[SegmentInfo]):
    """The winner's segments: iterated once it has read the catalog's rows; tells the gate it has looked."""

    def __init__(self, segments: list[SegmentInfo], gate: Gate) -> None:
        super().__init__(segments)
        self.gate = gate

    def __iter__(self) -> Iterator[SegmentInfo]:
        self.gate.both_looked.wait()
        return super().__iter__()


def test_a_sync_that_loses_the_insert_race_for_segments_updates_the_rows(filled, node):
    with NodeClient(node.url, node.token) as client:
        segments = client.list_segments("orders", 0)
    assert len(segments) > 2
    gate, errors = Gate(), list[BaseException]()
    loser = in_thread(lambda: catalog.sync_shard(filled, 0, GatedSegments(segments, gate)), errors)
    # Both look (no rows yet); the winner inserts and commits first, then the loser inserts the same segments.
    winner = in_thread(lambda: catalog.sync_shard(filled, 0, LookedSegments(segments, gate)), errors, gate.other_done)
    for thread in (loser, winner):
        thread.join(30)
    assert not errors, errors
    rows = Segment.objects.filter(namespace=filled, shard=0)
    assert sorted(rows.values_list("base_offset", flat=True)) == [s.base_offset for s in segments]
    assert {r.base_offset: r.size_bytes for r in rows} == {s.base_offset: s.size_bytes for s in segments}


def test_a_shard_status_create_that_loses_to_a_collection_updates_the_row(filled, node):
    with NodeClient(node.url, node.token) as client:
        stats = client.shard_stats("orders", 0)
    gate, errors = Gate(), list[BaseException]()
    sync = in_thread(lambda: catalog.update_shard_status(filled, 0, GatedStats(stats, gate)), errors)
    figures = {("orders", 0): {**stats, "backlog_messages": 0, "backlog_live_messages": 0, "backlog_bytes": 0}}
    collect = in_thread(
        lambda: catalog.record_collected_figures(LookedFirst(figures, gate), metrics.clock.now()),
        errors,
        gate.other_done,
    )
    for thread in (sync, collect):
        thread.join(30)
    assert not errors, errors
    (row,) = ShardStatus.objects.filter(namespace=filled, shard=0)
    assert (row.size_bytes, row.local_bytes, row.remote_only_bytes) == (
        stats["size_bytes"],
        stats["local_bytes"],
        stats["remote_only_bytes"],
    )


def test_first_syncs_and_collections_at_once_never_fail(filled, node):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL; SQLite runs one writer at a time (the forced races above)")
    with NodeClient(node.url, node.token) as client:
        expected = {n: [s.base_offset for s in client.list_segments("orders", n)] for n in (0, 1)}
    for _ in range(8):  # each round is a first sync: the catalog knows nothing of the namespace yet
        Segment.objects.filter(namespace=filled).delete()
        ShardStatus.objects.filter(namespace=filled).delete()
        start, errors = threading.Barrier(3, timeout=20), list[BaseException]()

        def after_start(work: Callable[[], Any], start: threading.Barrier = start) -> Callable[[], Any]:
            return lambda: (start.wait(), work())

        threads = [
            in_thread(after_start(lambda: catalog.sync_namespace(filled)), errors),
            in_thread(after_start(lambda: catalog.sync_namespace(filled)), errors),
            in_thread(after_start(metrics.collect), errors),
        ]
        for thread in threads:
            thread.join(60)
        assert not errors, errors
        for n, bases in expected.items():
            assert (
                sorted(Segment.objects.filter(namespace=filled, shard=n).values_list("base_offset", flat=True)) == bases
            )
        assert ShardStatus.objects.filter(namespace=filled).count() == 2
