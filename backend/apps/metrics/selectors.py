"""Reads of metrics history: chart series, the summary, forecasts and the Prometheus exposition."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Avg, ExpressionWrapper, F, FloatField, Max, QuerySet, Sum
from django.db.models.functions import Mod
from prometheus_client import generate_latest

from backend.apps.catalog.figures import TIER_SPLIT, ratio
from backend.apps.metrics import clock, exposition
from backend.apps.metrics.catalog import NODE, SERIES, SHARD, UI_UNITS
from backend.apps.metrics.models import MetricSeries, Rollup, Sample
from backend.apps.metrics.services import ROLLUP_STEP_MS, interval_s
from backend.apps.nodes.models import StorageNode
from backend.apps.policies.selectors import effective_node_policy
from storage_engine.errors import InvalidArgumentError

RANGES: dict[str, int] = {"1h": 3_600, "6h": 6 * 3_600, "24h": 24 * 3_600, "7d": 7 * 86_400, "30d": 30 * 86_400}
RAW_MAX_RANGE_S = 24 * 3_600  # longer ranges read 5-minute rollups
MAX_POINTS = 300  # per line
MAX_LINES = 50
STALE_MS = 5 * 60_000  # a series not reported within this of the latest collection is gone
NODE_STALE_INTERVALS = 3  # a node not looked at for this many metrics intervals has an unknown health
FORECAST_WINDOW_S = 6 * 3_600
# A forecast needs this much history: samples spanning at least 30 minutes, at least 10 of them. Before
# that there is no forecast (the chart says so) and the forecast alert rule has nothing to evaluate.
FORECAST_MIN_HISTORY_S = 30 * 60
FORECAST_MIN_SAMPLES = 10
FORECAST_HORIZON_S = 24 * 3_600
FORECAST_STEP_S = 3_600
FORECAST_ETA_MAX_S = 7 * 86_400

WATERMARK_FIELDS = {
    "max_used": "disk_max_used_ratio",
    "clean_forcibly": "disk_clean_forcibly_ratio",
    "warning": "disk_warning_ratio",
}
WATERMARK_NODE_SERIES = ("disk_used_bytes", "disk_capacity_bytes", "disk_used_ratio")


@dataclass(frozen=True)
class Resolution:
    range_s: int
    raw: bool
    step_s: int


def resolution(range_name: str) -> Resolution:
    """Raw samples up to 24 h, 5-minute rollups beyond; the step keeps a line at most ``MAX_POINTS`` points."""
    if range_name not in RANGES:
        raise InvalidArgumentError("range", f"must be one of {', '.join(RANGES)}")
    range_s = RANGES[range_name]
    raw = range_s <= RAW_MAX_RANGE_S
    base = interval_s() if raw else ROLLUP_STEP_MS // 1000
    return Resolution(range_s, raw, base * max(1, math.ceil(range_s / (MAX_POINTS * base))))


def latest_ts() -> int | None:
    """When the last collection ran (epoch ms), or ``None`` before the first."""
    return MetricSeries.objects.aggregate(m=Max("last_ts"))["m"]


def fresh_series(names: list[str] | None = None) -> QuerySet[MetricSeries]:
    """Series reported by recent collections: a series stops being fresh ``STALE_MS`` after its last
    report, and at once when its namespace or node is deleted (``services.forget_series``), so the
    Overview's totals, the exposition and the alert rules never count what is gone."""
    latest = latest_ts()
    rows = MetricSeries.objects.filter(last_ts__gte=(latest or 0) - STALE_MS, last_value__isnull=False)
    return rows.filter(name__in=names) if names is not None else rows


def _chart_series(name: str, namespace: str | None, node: str | None) -> QuerySet[MetricSeries]:
    rows = MetricSeries.objects.filter(name=name)
    levels = SERIES[name].levels
    if SHARD in levels:
        if namespace or node:  # one line per shard of the namespace (or of the node)
            rows = rows.filter(shard__isnull=False)
            rows = rows.filter(namespace=namespace) if namespace else rows
            rows = rows.filter(node=node) if node else rows
        else:  # one line per namespace
            rows = rows.filter(shard__isnull=True, node="")
    elif NODE in levels and node:
        rows = rows.filter(node=node)
    return rows.order_by("node", "namespace", "shard", "queue")


def _with_latest(points: list[list[float]], row: MetricSeries, start_ms: int, now_ms: int) -> list[list[float]]:
    """``points`` ending at the series' latest sample (``last_ts``, ``last_value``), when it is in the range."""
    if row.last_ts is None or row.last_value is None or not start_ms < row.last_ts <= now_ms:
        return points
    if points and points[-1][0] >= row.last_ts:  # a stale series: its step holds only that sample
        points = points[:-1]
    return [*points, [int(row.last_ts), float(row.last_value)]]


def series_lines(
    name: str, range_name: str, namespace: str | None = None, node: str | None = None, now: datetime | None = None
) -> dict[str, Any]:
    """A fixed, named series for a chart: lines of ``[epoch_ms, value]``, one average per closed step, then
    the series' latest sample.

    Why not an average for the step still open (the one ``now`` is in): it holds the samples collected so
    far in it, so its mean is a partial one that disagrees with the figure everything else shows for the
    same moment. A 12 s step with a sample at 0 % and one at 97 % drew 48 % while the Overview card
    (``summary``, from each series' ``last_value``) said 97 %. So closed steps are averaged (each over
    all its samples), and the line ends at the latest sample itself, at its own time: the very
    ``last_value`` the summary, the namespace figures and the alert rules read, so a chart's last point
    is the current figure, never a mean of part of a step. (Dropping the open step without the latest
    sample would leave the line up to a step behind, showing an older figure than the card.)
    """
    if name not in UI_UNITS:
        raise InvalidArgumentError("series", f"must be one of {', '.join(UI_UNITS)}")
    res = resolution(range_name)
    now_ms = clock.now_ms(now)
    start_ms = now_ms - res.range_s * 1000
    rows = list(_chart_series(name, namespace, node).filter(last_ts__gte=start_ms)[: MAX_LINES + 1])
    truncated = len(rows) > MAX_LINES
    rows = rows[:MAX_LINES]
    step_ms = res.step_s * 1000
    open_step_ms = now_ms - now_ms % step_ms  # where the step still open starts
    by_series: dict[int, list[list[float]]] = defaultdict(list)
    if rows:
        ids = [r.pk for r in rows]
        if res.raw:
            base = Sample.objects.filter(series_id__in=ids, ts__gt=start_ms, ts__lt=open_step_ms)
            value: Any = Avg("value")
            time_field = "ts"
        else:  # rollup buckets (5 minutes) never straddle a step: steps are whole multiples of them
            base = Rollup.objects.filter(series_id__in=ids, bucket__gt=start_ms, bucket__lt=open_step_ms)
            value = ExpressionWrapper(Sum("sum") / Sum("count"), output_field=FloatField())
            time_field = "bucket"
        groups = (
            base.annotate(b=F(time_field) - Mod(F(time_field), step_ms))
            .values("series_id", "b")
            .annotate(v=value)
            .order_by("series_id", "b")
        )
        for g in groups:
            by_series[g["series_id"]].append([int(g["b"]), float(g["v"])])
    for r in rows:
        by_series[r.pk] = _with_latest(by_series.get(r.pk, []), r, start_ms, now_ms)
    out: dict[str, Any] = {
        "series": name,
        "unit": UI_UNITS[name],
        "range": range_name,
        "step_s": res.step_s,
        "resolution": "raw" if res.raw else "5m",
        "lines": [{"labels": r.labels, "points": by_series.get(r.pk, [])} for r in rows],
    }
    if truncated:
        out["truncated"] = True
    if name == "disk_used_ratio":
        nodes = _nodes_by_name()
        for line in out["lines"]:
            found = nodes.get(str(line["labels"].get("node")))
            line["watermarks"] = watermarks(found) if found else None
        chosen = node or (str(out["lines"][0]["labels"]["node"]) if out["lines"] else None)
        if chosen and chosen in nodes:
            marks = watermarks(nodes[chosen])
            out["watermarks"] = marks
            forecast = disk_forecast(chosen, now_ms)
            out["forecast"] = forecast_points(forecast.fit, now_ms) if forecast.fit else []
            out["forecast_node"] = chosen
            out["forecast_history_s"] = forecast.history_s
            out["forecast_min_history_s"] = FORECAST_MIN_HISTORY_S
            eta = crossing_ms(forecast.fit, marks["warning"], now_ms) if forecast.fit else None
            out["forecast_warning_at"] = eta
    return out


def _nodes_by_name() -> dict[str, Any]:
    return {n.name: n for n in StorageNode.objects.all()}


def watermarks(node: Any) -> dict[str, float]:
    policy = effective_node_policy(node)
    return {key: float(getattr(policy, field)) for key, field in WATERMARK_FIELDS.items()}


# -- forecast ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fit:
    """A least-squares trend: ``intercept + slope × (t − t0)`` (t in epoch ms, slope per second).

    Forecasts (:meth:`at`) project the trend from the last sample, not from the
    regression line: after a jump (a bulk load filling the disk) the line lags
    far below the current use, and a forecast starting below what the node
    already uses would tell the operator the wrong story.
    """

    slope: float
    intercept: float
    t0: int
    last_value: float
    t_last: int

    def at(self, t_ms: int) -> float:
        return self.last_value + self.slope * (t_ms - self.t_last) / 1000


def linear_fit(points: list[tuple[int, float]]) -> Fit | None:
    """Ordinary least squares over ``(epoch_ms, value)`` points; ``None`` with fewer than two instants."""
    if len(points) < 2:
        return None
    t0 = points[0][0]
    xs = [(t - t0) / 1000 for t, _ in points]
    ys = [v for _, v in points]
    n = len(points)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    if sxx == 0:
        return None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sxx
    return Fit(slope=slope, intercept=mean_y - slope * mean_x, t0=t0, last_value=ys[-1], t_last=points[-1][0])


@dataclass(frozen=True)
class DiskForecast:
    """The disk-use trend of one node: ``fit`` is ``None`` until there is enough history to mean something
    (samples spanning ``FORECAST_MIN_HISTORY_S``, at least ``FORECAST_MIN_SAMPLES``)."""

    fit: Fit | None
    history_s: int  # how long the samples in the window span
    samples: int


def disk_forecast(node: str, now_ms: int) -> DiskForecast:
    """The least-squares line through the node's disk use over the last ``FORECAST_WINDOW_S``, once the
    samples there span ``FORECAST_MIN_HISTORY_S``: a few minutes of samples forecast nothing."""
    samples = Sample.objects.filter(
        series__name="disk_used_ratio",
        series__node=node,
        series__namespace="",
        series__shard__isnull=True,
        ts__gte=now_ms - FORECAST_WINDOW_S * 1000,
        ts__lte=now_ms,
    ).order_by("ts")
    points = [(t, v) for t, v in samples.values_list("ts", "value")]
    history_s = (points[-1][0] - points[0][0]) // 1000 if points else 0
    enough = history_s >= FORECAST_MIN_HISTORY_S and len(points) >= FORECAST_MIN_SAMPLES
    return DiskForecast(linear_fit(points) if enough else None, int(history_s), len(points))


def disk_fit(node: str, now_ms: int) -> Fit | None:
    """The node's disk-use trend, or ``None`` without enough history (see :func:`disk_forecast`)."""
    return disk_forecast(node, now_ms).fit


def forecast_points(fit: Fit, now_ms: int) -> list[list[float]]:
    """The fit from now to now + 24 h, hourly, clamped to [0, 1] (it is a ratio)."""
    steps = FORECAST_HORIZON_S // FORECAST_STEP_S
    out = []
    for i in range(steps + 1):
        t = now_ms + i * FORECAST_STEP_S * 1000
        out.append([t, min(1.0, max(0.0, fit.at(t)))])
    return out


def forecast_value(node: str, now_ms: int, horizon_s: int = FORECAST_HORIZON_S) -> float | None:
    """Disk use the fit predicts ``horizon_s`` from now (clamped to [0, 1]); ``None`` without enough history,
    so the forecast alert rule evaluates nothing (and fires nothing) from a few minutes of samples."""
    fit = disk_fit(node, now_ms)
    return None if fit is None else min(1.0, max(0.0, fit.at(now_ms + horizon_s * 1000)))


def crossing_ms(fit: Fit, threshold: float, now_ms: int, max_s: int = FORECAST_ETA_MAX_S) -> int | None:
    """When the fit reaches ``threshold`` (now if the last sample already has), within ``max_s``."""
    if fit.last_value >= threshold:
        return now_ms
    if fit.slope <= 0:
        return None
    t = fit.t_last + int((threshold - fit.last_value) / fit.slope * 1000)
    t = max(t, now_ms)
    return t if t <= now_ms + max_s * 1000 else None


# -- summary and exposition ----------------------------------------------------------------------


# Namespace series the cluster totals add up (each a sum of the engine's figures; ratios of the sums). The
# stored bytes and their split are series of the same collections, so stored = local + remote only in the sums.
TOTALS = (
    "stored_bytes",
    *TIER_SPLIT,
    "stored_records",
    "live_records",
    "expired_records",
    "expired_bytes",
    "backlog_messages",
    "backlog_live_messages",
)


def node_health(now: datetime | None = None) -> dict[str, dict[str, Any]]:
    """Each registered node's health as the metrics collection last found it: the one definition behind
    Overview, Nodes and ``/api/health``. ``health`` is ``healthy`` or ``unhealthy`` (the collection's
    ``up`` series, and the error it recorded on the node), ``unknown`` when no collection looked at the
    node within ``NODE_STALE_INTERVALS`` intervals; ``last_seen_at`` is when it last answered."""
    now_ms = clock.now_ms(now)
    stale_ms = NODE_STALE_INTERVALS * interval_s() * 1000
    ups = {
        row.node: row
        for row in MetricSeries.objects.filter(name="up", namespace="", shard__isnull=True, queue="")
        if row.last_value is not None and row.last_ts is not None
    }
    out: dict[str, dict[str, Any]] = {}
    for node in StorageNode.objects.order_by("name"):
        up = ups.get(node.name)
        if up is None or now_ms - int(up.last_ts or 0) > stale_ms:
            health = "unknown"
        else:
            health = "healthy" if (up.last_value or 0.0) >= 1 else "unhealthy"
        last_seen = node.last_seen_at
        if health == "healthy" and up is not None and last_seen is None:
            last_seen = clock.from_ms(int(up.last_ts or 0))
        out[node.name] = {
            "health": health,
            "checked_at": clock.from_ms(int(up.last_ts)) if up is not None and up.last_ts is not None else None,
            "last_seen_at": last_seen,
            "error": node.last_error if health == "unhealthy" else "",
        }
    return out


def summary(now: datetime | None = None) -> dict[str, Any]:
    """Totals over every namespace from the latest collection, each node's health and disk."""
    now_ms = clock.now_ms(now)
    rows = fresh_series([*TOTALS, *WATERMARK_NODE_SERIES]).filter(shard__isnull=True)
    totals: dict[str, float] = defaultdict(float)
    disk: dict[str, dict[str, float]] = defaultdict(dict)
    for row in rows:
        if row.namespace:
            totals[row.name] += row.last_value or 0.0
        elif row.node:
            disk[row.node][row.name] = row.last_value or 0.0
    health = node_health(now)
    # Each node's split: its shards' series of the same collections as the totals, so the nodes add up to them.
    tiers: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(TIER_SPLIT, 0))
    for row in fresh_series(list(TIER_SPLIT)).filter(shard__isnull=False).exclude(node=""):
        tiers[row.node][row.name] += int(row.last_value or 0)
    nodes = []
    for name, node in sorted(_nodes_by_name().items()):
        marks = watermarks(node)
        forecast = disk_forecast(name, now_ms)
        eta = crossing_ms(forecast.fit, marks["warning"], now_ms) if forecast.fit else None
        figures = disk.get(name, {})
        nodes.append(
            {
                "name": name,
                **health.get(name, {"health": "unknown", "checked_at": None, "last_seen_at": None, "error": ""}),
                "disk_used_bytes": _int_or_none(figures.get("disk_used_bytes")),
                "disk_capacity_bytes": _int_or_none(figures.get("disk_capacity_bytes")),
                "disk_used_ratio": figures.get("disk_used_ratio"),
                "watermarks": marks,
                "forecast_warning_at": clock.from_ms(eta) if eta is not None else None,
                "forecast_history_s": forecast.history_s,
                "forecast_ready": forecast.fit is not None,
                **tiers[name],
            }
        )
    latest = latest_ts()
    return {
        "stored_bytes": int(totals["stored_bytes"]),
        **{name: int(totals[name]) for name in TIER_SPLIT},
        "stored_records": int(totals["stored_records"]),
        "live_records": int(totals["live_records"]),
        "expired_records": int(totals["expired_records"]),
        "expired_ratio": ratio(totals["expired_records"], totals["stored_records"]),
        "expired_bytes_ratio": ratio(totals["expired_bytes"], totals["stored_bytes"]),
        "backlog_messages": int(totals["backlog_messages"]),
        "backlog_live_messages": int(totals["backlog_live_messages"]),
        "collected_at": clock.from_ms(latest) if latest is not None else None,
        "forecast_min_history_s": FORECAST_MIN_HISTORY_S,
        "nodes": nodes,
    }


def _int_or_none(value: float | None) -> int | None:
    return None if value is None else int(value)


def prometheus_text() -> str:
    """``GET /metrics``: the control plane's own series (``exposition``: Celery queues, task runs, alerts and
    the rules' thresholds) and django-prometheus's request and database metrics, in the text exposition format.
    The nodes' figures are on the nodes' own ``/metrics``, never here."""
    return generate_latest(exposition.registry()).decode()
