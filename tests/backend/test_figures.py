"""Issue 16: every page shows one definition of each figure, the node's, and it is fresh.

A real node holds records that are expired three ways (their own TTL, the namespace TTL, live ones) and
two subscriptions over two shards. One metrics collection and one catalog sync later, the namespace
summary, the namespace list, the shard statuses, the segment rows, the metrics' latest values, the
Overview summary and the subscriptions' backlog all equal the node's own figures and each other.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from backend.apps.alerts import evaluation as alerts
from backend.apps.alerts.models import Alert, AlertRule
from backend.apps.catalog.figures import ratio
from backend.apps.catalog.models import Segment, ShardStatus
from backend.apps.catalog.services import STATUS_FIELDS, sync_namespace, sync_stalest
from backend.apps.metrics.catalog import SHARD_SERIES
from backend.apps.metrics.models import MetricSeries, series_key
from backend.apps.metrics.selectors import FORECAST_MIN_HISTORY_S
from backend.apps.metrics.services import collect, write_points
from backend.apps.namespaces.models import Namespace, ShardPlacement
from backend.apps.nodes.models import StorageNode
from backend.apps.runs.models import RunChange, TaskRun
from storage_engine.api import NewRecord
from storage_engine.node_api.client import NodeClient

HOUR_MS = 3_600_000


def latest(name: str, **labels) -> float | None:
    row = MetricSeries.objects.filter(key=series_key(name, **labels)).first()
    return row.last_value if row else None


@pytest.fixture
def figures_ns(api_as, registered_node, node):
    """Namespace "figs": 2 shards, 1 h TTL, small segments; per shard records expired by their own TTL, by
    the namespace's, and live ones; subscriptions "billing" (acked part of shard 0) and "audit"."""
    admin = api_as("admin")
    body = {"name": "figs", "shards": 2, "policy": {"ttl_ms": HOUR_MS, "segment_bytes": 1024}}
    assert admin.post("/api/namespaces/", body, format="json").status_code == 201
    for name in ("billing", "audit"):
        assert admin.post("/api/namespaces/figs/subscriptions", {"name": name}, format="json").status_code == 201
    now_ms = int(time.time() * 1000)
    with NodeClient(node.url, node.token) as client:
        for shard, (own, by_ttl, live) in enumerate([(6, 4, 10), (3, 0, 5)]):
            records = [NewRecord(value=b"o" * 120, expire_at=1)] * own
            records += [NewRecord(value=b"t" * 80, timestamp=now_ms - 2 * HOUR_MS)] * by_ttl
            records += [NewRecord(value=b"l" * 200)] * live
            for record in records:  # one at a time: several segments per shard
                client.append("figs", shard, [record])
        client.acknowledge("figs", "billing", 0, 4)
    return Namespace.objects.get(name="figs")


def test_every_page_carries_the_nodes_figures_unchanged(api_as, figures_ns, node, registered_node):
    result = collect()
    assert result.nodes_up == 1
    sync_namespace(figures_ns)
    with NodeClient(node.url, node.token) as client:
        stats = client.stats()
    shards = {s["shard"]: s for s in stats["shards"] if s["namespace"] == "figs"}
    subs = [s for s in stats["subscriptions"] if s["namespace"] == "figs"]
    assert set(shards) == {0, 1} and len(subs) == 4
    # What the node says (the engine's definitions): 13 of 28 records expired, 9 by their own TTL, 4 by the
    # namespace's; subscription backlog per shard summed over the subscriptions.
    assert sum(s["record_count"] for s in shards.values()) == 28
    assert sum(s["expired_records"] for s in shards.values()) == 13
    backlog = {n: sum(r["backlog_messages"] for r in subs if r["shard"] == n) for n in shards}
    live_backlog = {n: sum(r["backlog_live_messages"] for r in subs if r["shard"] == n) for n in shards}
    assert backlog == {0: 15 + 20, 1: 8 + 8}

    viewer = api_as("viewer")
    summary = viewer.get("/api/namespaces/figs/summary").json()
    row = next(r for r in viewer.get("/api/namespaces/").json()["results"] if r["name"] == "figs")
    segments = viewer.get("/api/segments/?namespace=figs&page_size=1000").json()["results"]
    subscriptions = viewer.get("/api/namespaces/figs/subscriptions").json()["results"]
    overview = viewer.get("/api/metrics/summary").json()

    # Per shard: the summary's rows, the catalog and the metrics carry the node's fields unchanged.
    for shard in summary["shards"]:
        mine = shards[shard["shard"]]
        for name in STATUS_FIELDS:
            assert shard[name] == mine[name], name
            assert latest(SHARD_SERIES[name], node=registered_node.name, namespace="figs", shard=shard["shard"]) == (
                pytest.approx(mine[name])
            ), name
        assert shard["backlog_messages"] == backlog[shard["shard"]]
        assert shard["backlog_live_messages"] == live_backlog[shard["shard"]]
        own_segments = [s for s in segments if s["shard"] == shard["shard"]]
        # Segments add up to their shard (the sync and the collection saw the same data).
        assert sum(s["record_count"] for s in own_segments) == mine["record_count"]
        assert sum(s["expired_records"] for s in own_segments) == mine["expired_records"]
        assert sum(s["live_count"] for s in own_segments) == mine["live_count"]
        assert sum(s["size_bytes"] for s in own_segments) == mine["size_bytes"]
        assert len(own_segments) == mine["segment_count"]
        for s in own_segments:
            assert s["expired_ratio"] == ratio(s["expired_records"], s["record_count"])
    statuses = {s.shard: s for s in ShardStatus.objects.filter(namespace=figures_ns)}
    assert {n: statuses[n].expired_ratio for n in shards} == {n: s["expired_ratio"] for n, s in shards.items()}

    assert len(segments) > 2  # several segments per shard: the sums are real sums

    # Per namespace: one value everywhere.
    stored = sum(s["record_count"] for s in shards.values())
    expired = sum(s["expired_records"] for s in shards.values())
    expired_bytes = sum(s["expired_bytes"] for s in shards.values())
    size = sum(s["size_bytes"] for s in shards.values())
    assert summary["stored_records"] == row["stored_records"] == overview["stored_records"] == stored
    assert latest("stored_records", namespace="figs") == stored
    assert (
        summary["live_records"]
        == overview["live_records"]
        == stored - expired
        == latest("live_records", namespace="figs")
    )
    assert summary["expired_records"] == overview["expired_records"] == expired == 13
    assert summary["stored_bytes"] == row["stored_bytes"] == overview["stored_bytes"] == size
    assert summary["expired_ratio"] == row["expired_ratio"] == overview["expired_ratio"] == pytest.approx(13 / 28)
    assert latest("expired_ratio", namespace="figs") == pytest.approx(13 / 28)
    assert summary["expired_bytes_ratio"] == pytest.approx(expired_bytes / size)
    assert latest("expired_bytes_ratio", namespace="figs") == pytest.approx(expired_bytes / size)
    assert summary["segment_count"] == row["segment_count"] == len(segments) == latest("segments", namespace="figs")
    # Backlog: a subscription's is the sum over its shards, the namespace's the sum over subscriptions.
    by_name = {s["name"]: s for s in subscriptions}
    assert by_name["billing"]["messages"] == 15 + 8 and by_name["audit"]["messages"] == 20 + 8
    total = by_name["billing"]["messages"] + by_name["audit"]["messages"]
    assert summary["backlog_messages"] == overview["backlog_messages"] == total == sum(backlog.values())
    assert latest("backlog_messages", namespace="figs") == total
    assert latest("backlog_messages", node=registered_node.name, namespace="figs", shard=0) == backlog[0]
    live_total = sum(s["live_messages"] for s in subscriptions)
    assert summary["backlog_live_messages"] == overview["backlog_live_messages"] == live_total
    assert latest("backlog_live_messages", namespace="figs") == live_total == sum(live_backlog.values())
    # The backlog quota compares the largest subscription's bytes.
    assert latest("subscription_backlog_bytes_max", namespace="figs") == max(s["bytes"] for s in subscriptions)
    # The Overview charts end at the same figures: a line's last point is its latest sample, not a step average.
    for series, figure in (("expired_ratio", overview["expired_ratio"]), ("backlog_messages", total)):
        chart = viewer.get(f"/api/metrics/series?series={series}&range=1h").json()
        (line,) = chart["lines"]
        assert line["labels"] == {"namespace": "figs"} and line["points"][-1][1] == pytest.approx(figure), series


def test_figures_catch_up_with_one_collection_and_changed_shards_sync_first(api_as, figures_ns, node):
    collect()
    sync_namespace(figures_ns)
    assert api_as("admin").post("/api/namespaces/", {"name": "other", "shards": 1}, format="json").status_code == 201
    other = Namespace.objects.get(name="other")
    sync_namespace(other)
    with NodeClient(node.url, node.token) as client:
        client.append("figs", 1, [NewRecord(value=b"n" * 50)] * 7)
    # One collection: the namespace page has the new records (no catalog sync needed).
    collect()
    summary = api_as("viewer").get("/api/namespaces/figs/summary").json()
    assert summary["stored_records"] == 28 + 7 and summary["shards"][1]["end_offset"] == 8 + 7
    assert summary["backlog_messages"] == 15 + 20 + 2 * (8 + 7)
    # The periodic segment sync takes the namespace whose figures changed before an up-to-date one.
    done = sync_stalest(limit=1)
    assert done.inserted + done.updated >= 1
    assert sum(Segment.objects.filter(namespace=figures_ns, shard=1).values_list("record_count", flat=True)) == 15
    # Now both are up to date: the next runs go round them, and an unchanged sync writes nothing.
    assert sync_stalest(limit=1).inserted == 0


def test_last_scan_and_compaction_count_node_wide_sweeps(api_as, db):
    """The last scan and compaction are the latest runs of the kind that changed the namespace (issue 26): a
    node-wide sweep that did (the node names the namespaces it changed), not one that found nothing there."""
    here = StorageNode.objects.create(name="here", url="http://127.0.0.1:9")
    elsewhere = StorageNode.objects.create(name="elsewhere", url="http://127.0.0.1:9")
    ns = Namespace.objects.create(name="swept", node=here, shards=1, sync_state="synced")
    ShardPlacement.objects.create(namespace=ns, shard=0, node=here)
    t = timezone.now().replace(microsecond=0)

    def run(kind: str, finished: Any, changed: bool, **target: Any) -> None:
        made = TaskRun.objects.create(kind=kind, state="succeeded", finished_at=finished, **target)
        if changed:
            RunChange.objects.create(run=made, namespace=ns, changed_at=finished)

    run("expiry_scan", t - timedelta(hours=2), True, node=here)  # the node-wide sweep that expired records here
    run("expiry_scan", t - timedelta(hours=3), True, namespace=ns, node=here)
    run("expiry_scan", t - timedelta(hours=1), False, node=here)  # swept it later, found nothing: not the last
    run("expiry_scan", t, False, node=elsewhere)  # hosts nothing here
    run("compaction", t - timedelta(minutes=5), True, namespace=ns, node=here)
    run("compaction", t, False, namespace=ns, node=here)  # removed nothing
    viewer = api_as("viewer")
    summary = viewer.get("/api/namespaces/swept/summary").json()
    row = viewer.get("/api/namespaces/").json()["results"][0]

    def at(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    assert at(summary["last_scan_at"]) == at(row["last_scan_at"]) == t - timedelta(hours=2)
    assert at(summary["last_compaction_at"]) == at(row["last_compaction_at"]) == t - timedelta(minutes=5)
    assert summary["backlog_messages"] is None  # never collected: unknown, not 0


def test_node_health_is_the_collections_everywhere(api_as, registered_node):
    viewer = api_as("viewer")
    before = viewer.get("/api/metrics/summary").json()["nodes"][0]
    assert before["health"] == "unknown" and before["error"] == ""  # never looked at: not "unhealthy"
    collect()
    node = viewer.get("/api/metrics/summary").json()["nodes"][0]
    assert node["health"] == "healthy" and node["last_seen_at"] and node["checked_at"]
    listed = viewer.get("/api/nodes/").json()
    listed = listed["results"] if isinstance(listed, dict) else listed
    assert listed[0]["healthy"] is True and listed[0]["last_seen_at"]
    health = viewer.get("/api/health").json()["components"]["node"]
    assert health["ok"] is True and "last metrics collection" in health["detail"]
    # The node goes away: the next collection says so on every page.
    StorageNode.objects.filter(pk=registered_node.pk).update(url="http://127.0.0.1:9")
    collect()
    node = viewer.get("/api/metrics/summary").json()["nodes"][0]
    assert node["health"] == "unhealthy" and "unavailable" in node["error"] and node["last_seen_at"]
    health = viewer.get("/api/health").json()["components"]["node"]
    assert health["ok"] is False and registered_node.name in health["detail"]


def test_overall_alert_status_and_silences(api_as, db, monkeypatch):
    T0 = datetime(2030, 1, 1, tzinfo=UTC)
    monkeypatch.setattr("backend.apps.metrics.clock.now", lambda: T0 + timedelta(seconds=30))
    AlertRule.objects.update(enabled=False)
    viewer = api_as("viewer")
    assert viewer.get("/api/alerts/status").json() == {
        "status": "ok",
        "firing": 0,
        "silenced": 0,
        "acknowledged": 0,
        "critical": 0,
        "pending": 0,
    }
    AlertRule.objects.create(name="expired", metric="expired_ratio", comparator=">", threshold=0.2, for_s=0)
    write_points(int(T0.timestamp() * 1000), {("expired_ratio", "", "a", None, ""): 0.5})
    write_points(int(T0.timestamp() * 1000), {("expired_ratio", "", "b", None, ""): 0.6})
    alerts.evaluate(now=T0)
    status = viewer.get("/api/alerts/status").json()
    assert (status["status"], status["firing"], status["silenced"]) == ("firing", 2, 0)
    one = Alert.objects.get(labels_key="namespace=a")
    api_as("operator").post(f"/api/alerts/{one.pk}/silence", {"minutes": 60}, format="json")
    status = viewer.get("/api/alerts/status").json()
    assert (status["status"], status["firing"], status["silenced"]) == ("firing", 2, 1)  # silenced still fires
    rows = {r["scope"]: r for r in viewer.get("/api/alerts/?state=firing").json()["results"]}
    assert rows["namespace=a"]["silenced"] is True and rows["namespace=b"]["silenced"] is False


def test_disk_forecast_needs_history_before_it_shows_or_fires(api_as, db, monkeypatch):
    T0 = datetime(2030, 1, 1, tzinfo=UTC)
    t0 = int(T0.timestamp() * 1000)
    StorageNode.objects.create(name="n1", url="http://127.0.0.1:9")
    AlertRule.objects.update(enabled=False)
    AlertRule.objects.filter(default_key="disk_forecast").update(enabled=True)
    viewer = api_as("viewer")

    def at(minutes: int) -> datetime:
        now = T0 + timedelta(minutes=minutes)
        monkeypatch.setattr("backend.apps.metrics.clock.now", lambda: now)
        return now

    # Five minutes of a steep climb (0.10 → 0.60): it would cross the 0.90 warning within the hour.
    for second in range(0, 5 * 60 + 1, 15):
        write_points(t0 + second * 1000, {("disk_used_ratio", "n1", "", None, ""): 0.1 + second / 600})
    alerts.evaluate(now=at(5))
    assert not Alert.objects.exists()
    series = viewer.get("/api/metrics/series?series=disk_used_ratio&range=1h").json()
    assert series["forecast"] == [] and series["forecast_warning_at"] is None
    assert series["forecast_history_s"] == 300 and series["forecast_min_history_s"] == FORECAST_MIN_HISTORY_S
    node = viewer.get("/api/metrics/summary").json()["nodes"][0]
    assert node["forecast_ready"] is False and node["forecast_warning_at"] is None
    # Thirty minutes of a slow climb: now there is a forecast, and the rule may go pending.
    for second in range(5 * 60 + 15, 31 * 60, 15):
        write_points(t0 + second * 1000, {("disk_used_ratio", "n1", "", None, ""): 0.6 + second / 100_000})
    now = at(31)
    series = viewer.get("/api/metrics/series?series=disk_used_ratio&range=1h").json()
    assert len(series["forecast"]) == 25 and series["forecast_warning_at"] is not None
    assert viewer.get("/api/metrics/summary").json()["nodes"][0]["forecast_ready"] is True
    alerts.evaluate(now=now)
    assert Alert.objects.get(rule__default_key="disk_forecast").state == "pending"


def test_messages_expire_at_their_effective_expiry(api_as, registered_node, node):
    """A record expires at its own TTL or the namespace's, whichever is first; the API says when."""
    body = {"name": "ttl", "shards": 1, "policy": {"ttl_ms": HOUR_MS}}
    assert api_as("admin").post("/api/namespaces/", body, format="json").status_code == 201
    now_ms = int(time.time() * 1000)
    with NodeClient(node.url, node.token) as client:
        client.append(
            "ttl",
            0,
            [
                NewRecord(value=b"soon", timestamp=now_ms, expire_at=now_ms + 600_000),  # its own TTL first
                NewRecord(value=b"late", timestamp=now_ms, expire_at=now_ms + 5 * HOUR_MS),  # the namespace's first
                NewRecord(value=b"none", timestamp=now_ms),  # only the namespace's
            ],
        )
    records = api_as("viewer").get("/api/namespaces/ttl/messages?shard=0").json()["records"]
    assert [(r["expire_at"], r["effective_expires_at"]) for r in records] == [
        (now_ms + 600_000, now_ms + 600_000),
        (now_ms + 5 * HOUR_MS, now_ms + HOUR_MS),
        (None, now_ms + HOUR_MS),
    ]


def test_a_collection_that_sees_changed_shards_starts_the_segment_sync(figures_ns, node, monkeypatch):
    from backend.apps.catalog import tasks as catalog_tasks
    from backend.apps.metrics import tasks as metrics_tasks

    queued: list[int] = []
    monkeypatch.setattr(catalog_tasks.sync_catalog, "delay", lambda: queued.append(1))
    assert metrics_tasks.collect_metrics()["shards_changed"] == 2  # first seen: both shards
    assert queued == [1]
    with NodeClient(node.url, node.token) as client:
        client.acknowledge("figs", "audit", 1, 3)  # only a backlog changes: no segment changed
    assert metrics_tasks.collect_metrics()["shards_changed"] == 0
    assert queued == [1]
    with NodeClient(node.url, node.token) as client:
        client.append("figs", 0, [NewRecord(value=b"x")])
    assert metrics_tasks.collect_metrics()["shards_changed"] == 1
    assert queued == [1, 1]
