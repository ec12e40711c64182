"""Metrics history: the collector against a real node, downsampling, the chart API, forecasts, /metrics."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from kombu import Connection
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from backend.apps.metrics import services
from backend.apps.metrics.models import MetricSeries, Rollup, Sample, series_key
from backend.apps.metrics.selectors import crossing_ms, linear_fit
from backend.apps.metrics.services import ROLLUP_STEP_MS, collect, downsample, write_points
from backend.apps.nodes.gateway import client_for
from backend.apps.nodes.models import StorageNode
from storage_engine.api import NewRecord
from tests.backend.conftest import make_user

T0 = datetime(2030, 1, 1, tzinfo=UTC)
T0_MS = int(T0.timestamp() * 1000)
MIN = 60_000
HOUR = 3_600_000


@pytest.fixture
def fixed_now(monkeypatch):
    """Pin the metrics clock; returns a setter."""
    state = {"now": T0}
    monkeypatch.setattr("backend.apps.metrics.clock.now", lambda: state["now"])

    def set_now(when: datetime) -> None:
        state["now"] = when

    return set_now


def value(name: str, **labels) -> float | None:
    row = MetricSeries.objects.filter(key=series_key(name, **labels)).first()
    return row.last_value if row else None


def test_collector_stores_samples_from_a_real_node(registered_node, settings):
    queue = f"metrics-test-{uuid.uuid4().hex[:8]}"
    settings.METRICS_CELERY_QUEUES = [queue]
    with client_for(registered_node) as client:
        client.create_namespace("orders", 2)
        client.append("orders", 0, [NewRecord(value=b"x" * 100) for _ in range(3)])
        client.read("orders", 0, 0)
    StorageNode.objects.create(name="gone", url="http://127.0.0.1:9", token="x")
    with Connection(settings.CELERY_BROKER_URL, transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS) as conn:
        q = conn.SimpleQueue(queue)
        q.put({"n": 1})
        q.put({"n": 2})
        try:
            first = collect(now=T0)
        finally:
            q.clear()
            q.close()
    assert first.nodes_up == 1 and first.nodes_down == ["gone"]
    node = registered_node.name
    assert value("up", node=node) == 1.0 and value("up", node="gone") == 0.0
    assert value("stored_records", node=node, namespace="orders", shard=0) == 3
    assert value("stored_records", namespace="orders") == 3  # the namespace sums its shards
    assert value("end_offset", node=node, namespace="orders", shard=0) == 3
    assert value("log_start_offset", node=node, namespace="orders", shard=1) == 0
    assert value("segments", namespace="orders") >= 2
    assert value("stored_bytes", namespace="orders") > 300
    assert value("expired_ratio", namespace="orders") == 0.0
    assert value("append_requests_total", node=node) >= 1
    assert value("celery_queue_depth", queue=queue) == 2
    assert first.queues[queue] == 2
    assert f"{settings.CELERY_TASK_DEFAULT_QUEUE}.{node}" in first.queues  # the node's lifecycle queue
    assert Sample.objects.filter(ts=T0_MS).count() == first.samples
    # A second collection: latency over the interval from counter deltas; nothing absent is invented.
    with client_for(registered_node) as client:
        client.append("orders", 1, [NewRecord(value=b"y")])
    collect(now=T0 + timedelta(seconds=15))
    assert value("append_latency_seconds", node=node) > 0
    assert value("stored_records", namespace="orders") == 4
    assert value("celery_queue_depth", queue=queue) == 0
    assert Sample.objects.filter(series__key=series_key("up", node=node)).count() == 2
    # A retried collection at the same instant stores nothing twice.
    collect(now=T0 + timedelta(seconds=15))
    assert Sample.objects.filter(series__key=series_key("up", node=node)).count() == 2


@pytest.mark.parametrize("broker", ["redis", "filesystem"])
def test_celery_queue_depth_per_broker(db, settings, tmp_path, broker):
    if broker == "redis":
        settings.CELERY_BROKER_URL, settings.CELERY_BROKER_TRANSPORT_OPTIONS = "redis://127.0.0.1:6379/0", {}
    else:
        (tmp_path / "q").mkdir()
        settings.CELERY_BROKER_URL = "filesystem://"
        settings.CELERY_BROKER_TRANSPORT_OPTIONS = {
            "data_folder_in": str(tmp_path / "q"),
            "data_folder_out": str(tmp_path / "q"),
            "control_folder": str(tmp_path / "control"),  # else kombu writes ./control in the checkout
            "store_processed": False,
        }
    queue, empty = f"metrics-test-{uuid.uuid4().hex[:8]}", f"metrics-empty-{uuid.uuid4().hex[:8]}"
    with Connection(settings.CELERY_BROKER_URL, transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS) as conn:
        q = conn.SimpleQueue(queue)
        for n in range(3):
            q.put({"n": n})
        try:
            assert services.celery_queue_depths([queue, empty]) == {queue: 3, empty: 0}
        finally:
            q.clear()
            q.close()


def _fill(name: str, start_ms: int, end_ms: int, step_ms: int, fn, **labels) -> None:
    series = MetricSeries.objects.create(key=series_key(name, **labels), name=name, **labels)
    rows = [Sample(series=series, ts=t, value=fn(t)) for t in range(start_ms, end_ms, step_ms)]
    Sample.objects.bulk_create(rows, batch_size=2000)
    series.last_ts, series.last_value = rows[-1].ts, rows[-1].value
    series.save()


def test_downsampling_keeps_bounded_rows_and_correct_aggregates(db, monkeypatch):
    now = T0 + timedelta(hours=26)
    now_ms = int(now.timestamp() * 1000)
    _fill("stored_bytes", T0_MS, now_ms, MIN, lambda t: (t - T0_MS) // MIN, namespace="a")
    _fill("stored_bytes", T0_MS, now_ms, MIN, lambda t: 1.0, namespace="b")
    old = MetricSeries.objects.get(namespace="b")
    Rollup.objects.create(series=old, bucket=now_ms - 31 * 24 * HOUR, count=1, sum=1, min=1, max=1)
    monkeypatch.setattr(services, "DELETE_BATCH", 100)
    monkeypatch.setattr(services, "DELETE_MAX_BATCHES", 2)
    first = downsample(now=now)
    assert first.buckets_rolled == services.ROLLUP_MAX_BUCKETS and first.more  # bounded work per run
    assert first.raw_deleted <= 200
    runs = 1
    while downsample(now=now).more:
        runs += 1
        assert runs < 100
    a = MetricSeries.objects.get(namespace="a")
    # Each 5-minute bucket of series a holds minutes 5k..5k+4.
    bucket = Rollup.objects.get(series=a, bucket=T0_MS + 2 * ROLLUP_STEP_MS)
    assert (bucket.count, bucket.sum, bucket.min, bucket.max) == (5, 10 + 11 + 12 + 13 + 14, 10, 14)
    closed = (now_ms - 15_000) // ROLLUP_STEP_MS * ROLLUP_STEP_MS
    assert Rollup.objects.filter(series=a).count() == (closed - T0_MS) // ROLLUP_STEP_MS
    # Raw kept 24 h only; rollups past 30 days gone.
    assert not Sample.objects.filter(ts__lt=now_ms - 24 * HOUR).exists()
    assert Sample.objects.filter(series=a).count() == 24 * 60
    assert not Rollup.objects.filter(bucket__lt=now_ms - 30 * 24 * HOUR).exists()
    # Idempotent: nothing more to do.
    again = downsample(now=now)
    assert (again.rollups_written, again.raw_deleted, again.more) == (0, 0, False)


@pytest.fixture
def charted(db, fixed_now):
    """24 h of raw samples every 15 s for two namespaces (and one shard), rolled up for the long ranges."""
    now = T0 + timedelta(days=1)
    fixed_now(now)
    now_ms = int(now.timestamp() * 1000)
    start = now_ms - 24 * HOUR + 15_000
    _fill("expired_ratio", start, now_ms + 1, 15_000, lambda t: 0.1, namespace="orders")
    _fill("expired_ratio", start, now_ms + 1, 15_000, lambda t: 0.3, namespace="payments")
    _fill("expired_ratio", start, now_ms + 1, 15_000, lambda t: 0.2, node="node-1", namespace="orders", shard=0)
    while downsample(now=now).more:
        pass
    return now_ms


@pytest.mark.parametrize(
    ("range_name", "step_s", "resolution"),
    [("1h", 15, "raw"), ("6h", 75, "raw"), ("24h", 300, "raw"), ("7d", 2100, "5m"), ("30d", 8700, "5m")],
)
def test_series_ranges_steps_and_caps(api_as, charted, range_name, step_s, resolution):
    body = api_as("viewer").get(f"/api/metrics/series?series=expired_ratio&range={range_name}").json()
    assert (body["unit"], body["step_s"], body["resolution"]) == ("ratio", step_s, resolution)
    assert [line["labels"] for line in body["lines"]] == [{"namespace": "orders"}, {"namespace": "payments"}]
    for line in body["lines"]:
        assert 0 < len(line["points"]) <= 301
        times = [p[0] for p in line["points"]]
        # Closed steps at their start, then the latest sample at its own time (here: now).
        assert times == sorted(times) and all(t % (step_s * 1000) == 0 for t in times[:-1])
        assert times[-1] == charted and times[-2] + step_s * 1000 <= charted
    assert all(p[1] == pytest.approx(0.3) for p in body["lines"][1]["points"])
    if range_name == "1h":
        assert len(body["lines"][0]["points"]) == 240


def test_a_charts_last_point_is_the_latest_sample_the_summary_shows_not_a_partial_step(api_as, db, fixed_now, settings):
    """Issue 16: with a 4 s interval the 1 h chart has 12 s steps. The expired ratio goes 0 → 97 % within the
    step still open: its average would be 48 %, while the Overview card (the summary) says 97 %."""
    settings.METRICS_INTERVAL_S = 4
    step_ms = 12_000
    now_ms = T0_MS + HOUR + 4_000  # the open step [now − 4 s, now + 8 s) holds the samples at now − 4 s and now
    assert now_ms % step_ms == 4_000
    fixed_now(T0 + timedelta(milliseconds=now_ms - T0_MS))
    for t in range(T0_MS + 4_000, now_ms + 1, 4_000):
        jumped = t == now_ms
        write_points(
            t,
            {
                ("expired_ratio", "", "orders", None, ""): 0.97 if jumped else 0.0,
                ("expired_records", "", "orders", None, ""): 97.0 if jumped else 0.0,
                ("stored_records", "", "orders", None, ""): 100.0,
            },
        )
    viewer = api_as("viewer")
    body = viewer.get("/api/metrics/series?series=expired_ratio&range=1h").json()
    assert body["step_s"] == 12
    (line,) = body["lines"]
    card = viewer.get("/api/metrics/summary").json()["expired_ratio"]
    assert card == pytest.approx(0.97)
    assert line["points"][-1] == [now_ms, pytest.approx(card)]  # was [now − 4 s, 0.485]
    # The steps before are closed, each the average of all its three samples.
    assert line["points"][-2] == [now_ms - 4_000 - step_ms, 0.0]
    assert all(t % step_ms == 0 and t + step_ms <= now_ms for t, _ in line["points"][:-1])
    # A series that stopped reporting ends at its last sample, which is not drawn twice.
    fixed_now(T0 + timedelta(milliseconds=now_ms - T0_MS + 10 * MIN))
    (stale,) = viewer.get("/api/metrics/series?series=expired_ratio&range=1h").json()["lines"]
    assert stale["points"][-1] == [now_ms, pytest.approx(0.97)]
    assert stale["points"][-2] == [now_ms - 4_000, pytest.approx((0.0 + 0.97) / 2)]  # its step, closed by now


def test_series_per_shard_and_errors(api_as, charted):
    viewer = api_as("viewer")
    body = viewer.get("/api/metrics/series?series=expired_ratio&range=1h&namespace=orders").json()
    assert [line["labels"] for line in body["lines"]] == [{"node": "node-1", "namespace": "orders", "shard": 0}]
    response = viewer.get("/api/metrics/series?series=bogus&range=1h")
    assert response.status_code == 400 and "series" in response.json()["errors"]
    response = viewer.get("/api/metrics/series?series=stored_bytes&range=2h")
    assert response.status_code == 400 and "range" in response.json()["errors"]
    assert api_as(None).get("/api/metrics/series?series=stored_bytes").status_code == 401


def test_linear_fit_by_hand():
    # x = 0, 3600, 7200 s; y = 1, 2, 6 → slope = Σ(dx·dy)/Σdx² = (3600·2 + 3600·3)/(2·3600²) = 5/7200 per s,
    # intercept = ȳ − slope·x̄ = 3 − 2.5 = 0.5.
    fit = linear_fit([(T0_MS, 1.0), (T0_MS + HOUR, 2.0), (T0_MS + 2 * HOUR, 6.0)])
    assert fit.slope == pytest.approx(5 / 7200) and fit.intercept == pytest.approx(0.5)
    assert fit.at(T0_MS + 4 * HOUR) == pytest.approx(6 + 5)  # from the last sample, 2 h at the trend's slope
    jump = linear_fit([(T0_MS, 0.0), (T0_MS + 1000, 0.0), (T0_MS + 2000, 0.9)])  # a bulk load
    assert jump.at(T0_MS + 2000) == pytest.approx(0.9) and crossing_ms(jump, 0.9, T0_MS + 2000) == T0_MS + 2000
    assert linear_fit([(T0_MS, 1.0)]) is None and linear_fit([(T0_MS, 1.0), (T0_MS, 2.0)]) is None
    flat = linear_fit([(T0_MS, 0.5), (T0_MS + HOUR, 0.5)])
    assert crossing_ms(flat, 0.9, T0_MS + HOUR) is None


def test_disk_forecast_watermarks_and_summary(api_as, db, fixed_now):
    StorageNode.objects.create(name="node-1", url="http://127.0.0.1:9")
    now = T0 + timedelta(hours=6)
    fixed_now(now)
    now_ms = int(now.timestamp() * 1000)
    # Disk use 0.50 six hours ago, rising 0.01 per hour: 0.56 now, 0.80 in 24 h, 0.90 in 34 h.
    _fill("disk_used_ratio", T0_MS, now_ms + 1, MIN, lambda t: 0.5 + 0.01 * (t - T0_MS) / HOUR, node="node-1")
    write_points(now_ms, {("disk_used_bytes", "node-1", "", None, ""): 56.0})
    write_points(now_ms, {("disk_capacity_bytes", "node-1", "", None, ""): 100.0})
    write_points(now_ms, {("stored_bytes", "", "orders", None, ""): 1000.0})
    write_points(now_ms, {("stored_records", "", "orders", None, ""): 10.0})
    write_points(now_ms, {("expired_records", "", "orders", None, ""): 4.0})
    viewer = api_as("viewer")
    body = viewer.get("/api/metrics/series?series=disk_used_ratio&range=6h").json()
    assert body["watermarks"] == {"max_used": 0.75, "clean_forcibly": 0.85, "warning": 0.9}
    assert body["lines"][0]["labels"] == {"node": "node-1"}
    forecast = body["forecast"]
    assert len(forecast) == 25 and forecast[0][0] == now_ms and forecast[-1][0] == now_ms + 24 * HOUR
    assert forecast[0][1] == pytest.approx(0.56) and forecast[-1][1] == pytest.approx(0.80)
    summary = viewer.get("/api/metrics/summary").json()
    assert summary["stored_bytes"] == 1000 and summary["stored_records"] == 10
    assert summary["expired_ratio"] == pytest.approx(0.4) and summary["backlog_messages"] == 0
    (node,) = summary["nodes"]
    assert (node["disk_used_bytes"], node["disk_capacity_bytes"], node["disk_used_ratio"]) == (56, 100, 0.56)
    eta = datetime.fromisoformat(node["forecast_warning_at"].replace("Z", "+00:00"))
    assert abs((eta - (now + timedelta(hours=34))).total_seconds()) < 60


def test_prometheus_exposition_needs_a_viewer_and_carries_no_node_series(db, api_as):
    """The collection's node figures are the console's history; Prometheus reads them on the nodes (issue 18)."""
    write_points(T0_MS, {("stored_bytes", "node-1", "orders", 0, ""): 193.0})
    write_points(T0_MS, {("expired_ratio", "", "orders", None, ""): 0.25})
    write_points(T0_MS, {("delete_queue_drops_total", "node-1", "", None, ""): 7.0})
    write_points(T0_MS, {("up", "node-1", "", None, ""): 1.0})
    assert APIClient().get("/metrics").status_code == 401
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=make_user('scraper', 'viewer')).key}")
    response = client.get("/metrics", HTTP_ACCEPT="text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    assert "# TYPE lcs_celery_queue_messages gauge" in text and "# TYPE lcs_task_runs gauge" in text
    for name in (
        "lcs_shard_stored_bytes",
        "lcs_namespace_expired_ratio",
        "lcs_node_delete_queue_drops_total",
        "lcs_node_up",
    ):
        assert name not in text
    assert api_as("viewer").get("/metrics").status_code == 200  # a session works too


def test_a_deleted_namespace_leaves_the_totals_at_once(api_as, db, fixed_now):
    """Issue 16 (found by the story test): the Overview's totals kept a deleted namespace's last figures
    until its series went stale (5 min). Fresh series are those of namespaces and nodes that exist."""
    from backend.apps.namespaces.models import Namespace

    node = StorageNode.objects.create(name="n1", url="http://127.0.0.1:9")
    for name in ("kept", "gone"):
        Namespace.objects.create(name=name, node=node, shards=1)
    fixed_now(T0)
    write_points(
        T0_MS,
        {
            ("stored_records", "", "kept", None, ""): 80.0,
            ("stored_records", "", "gone", None, ""): 13.0,
            ("disk_used_ratio", "n1", "", None, ""): 0.5,
        },
    )
    viewer = api_as("viewer")
    assert viewer.get("/api/metrics/summary").json()["stored_records"] == 93
    Namespace.objects.filter(name="gone").delete()
    assert viewer.get("/api/metrics/summary").json()["stored_records"] == 80
    assert 'namespace="gone"' not in viewer.get("/api/metrics").content.decode()
