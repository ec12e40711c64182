"""Writes of metrics history: the collector and downsampling.

``collect`` samples every node's ``GET /v1/stats``, the control plane's scan
runs and the Celery broker queues into :class:`Sample` rows (one timestamp per
collection), and stores the shards' figures of the same answer in the catalog
(``ShardStatus``). ``downsample`` rolls closed 5-minute buckets into :class:`Rollup`
rows and deletes raw samples after 24 h and rollups after 30 days, in bounded
batches. Both take ``now`` (else :func:`clock.now`); nothing here sleeps.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from amqp.exceptions import ChannelError

# The project's Celery app (backend.config.celery), current once Django's settings load: the apps never import
# backend.config, whose URLs import them.
from celery import current_app as app
from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Max, Min, Q, Sum
from django.db.models.functions import Mod
from django_celery_beat.models import PeriodicTask
from kombu import Connection

from backend.apps.catalog.figures import ratio
from backend.apps.catalog.services import mark_tiers_stale, record_collected_figures
from backend.apps.metrics import clock
from backend.apps.metrics.catalog import (
    APPEND_ROUTES,
    BACKLOG_SERIES,
    NODE_COUNTER_KEYS,
    READ_ROUTES,
    SHARD_SERIES,
    SUMMED_SHARD_SERIES,
    TIER_MOVE_SERIES,
)
from backend.apps.metrics.models import MetricSeries, Rollup, Sample, series_key
from backend.apps.namespaces.models import Namespace
from backend.apps.namespaces.selectors import placement_by_node_name
from backend.apps.nodes.gateway import client_for, describe_node_error
from backend.apps.nodes.models import StorageNode
from backend.apps.nodes.selectors import queue_for
from backend.apps.nodes.services import record_node_health
from backend.apps.runs.models import Kind
from backend.apps.runs.selectors import run_durations
from storage_engine.errors import StorageError

log = logging.getLogger(__name__)

ROLLUP_STEP_MS = 5 * 60_000
RAW_RETENTION_MS = 24 * 3_600_000
ROLLUP_RETENTION_MS = 30 * 24 * 3_600_000
# Per downsample run: buckets rolled up and rows deleted (batch × batches per table).
ROLLUP_MAX_BUCKETS = 36
DELETE_BATCH = 5_000
DELETE_MAX_BATCHES = 20


def interval_s() -> int:
    """Seconds between two collections (``METRICS_INTERVAL_S``, default 15)."""
    return int(getattr(settings, "METRICS_INTERVAL_S", 15))


# A point's identity: (name, node, namespace, shard, queue).
Labels = tuple[str, str, str, int | None, str]


@dataclass
class CollectResult:
    ts: int
    samples: int = 0
    nodes_up: int = 0
    nodes_down: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # node → what went wrong with it
    queues: dict[str, int] = field(default_factory=dict)
    shards_changed: int = 0  # shards whose data changed since the last collection (their segments need a sync)


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _first(counters: dict[str, Any], keys: Iterable[str]) -> float | None:
    for key in keys:
        value = _num(counters.get(key))
        if value is not None:
            return value
    return None


def _shard_points(node: str, shard: dict[str, Any], points: dict[Labels, float], sums: dict[str, dict[str, float]]):
    """A ``shards`` row of ``/v1/stats`` (the engine's ``ShardStats``): each figure as it is, never derived
    from another; the namespace's series add the shards' up."""
    ns, number = str(shard.get("namespace", "")), shard.get("shard")
    if not ns or not isinstance(number, int):
        return
    for field_name, name in SHARD_SERIES.items():
        value = _num(shard.get(field_name))
        if value is None:
            continue
        points[(name, node, ns, number, "")] = value
        if name in SUMMED_SHARD_SERIES:
            sums[ns][name] = sums[ns].get(name, 0.0) + value


def _subscription_points(node: str, subs: Any, points: dict[Labels, float], sums: dict[str, dict[str, float]]):
    """The ``subscriptions`` rows of ``/v1/stats`` (one per subscription and shard, the engine's ``BacklogInfo``).

    Backlog is summed as Pulsar sums a topic's ``msgBacklog``: a shard's series over the subscriptions on that
    shard, a namespace's over its subscriptions (the same as over its shards). The age is the oldest's.
    """
    if not isinstance(subs, list):
        return
    for sub in subs:
        if not isinstance(sub, dict) or not sub.get("namespace") or not isinstance(sub.get("shard"), int):
            continue
        ns, number = str(sub["namespace"]), sub["shard"]
        for key, name in BACKLOG_SERIES.items():
            value = _num(sub.get(key))
            if value is None:
                continue
            label = (name, node, ns, number, "")
            points[label] = points.get(label, 0.0) + value
            sums[ns][name] = sums[ns].get(name, 0.0) + value
            if name == "backlog_bytes":  # this subscription's bytes over its shards, for the quota's figure
                own = f"{SUBSCRIPTION_BYTES}{sub.get('subscription', '')}"
                sums[ns][own] = sums[ns].get(own, 0.0) + value
        age_ms = _num(sub.get("backlog_age_ms"))
        if age_ms is not None:
            label = ("backlog_age_seconds", node, ns, number, "")
            points[label] = max(points.get(label, 0.0), age_ms / 1000)
            sums[ns]["backlog_age_seconds"] = max(sums[ns].get("backlog_age_seconds", 0.0), age_ms / 1000)


# A key of ``sums`` holding one subscription's backlog bytes over its shards (never a series itself).
SUBSCRIPTION_BYTES = "\0subscription-bytes:"


def _namespace_points(sums: dict[str, dict[str, float]], points: dict[Labels, float]) -> None:
    """Each namespace's series: its shards' figures and its subscriptions' backlog summed (0 without a
    subscription), and its ratios as the ratios of the sums."""
    for ns, figures in sums.items():
        for name in BACKLOG_SERIES.values():
            figures.setdefault(name, 0.0)
        per_subscription = [v for k, v in figures.items() if k.startswith(SUBSCRIPTION_BYTES)]
        figures = {k: v for k, v in figures.items() if not k.startswith(SUBSCRIPTION_BYTES)}
        # What backlog_quota_bytes limits: the largest subscription's bytes (the engine's quota check).
        figures["subscription_backlog_bytes_max"] = max(per_subscription, default=0.0)
        for name, value in figures.items():
            points[(name, "", ns, None, "")] = value
        if "expired_records" in figures and "stored_records" in figures:
            points[("expired_ratio", "", ns, None, "")] = ratio(figures["expired_records"], figures["stored_records"])
        if "expired_bytes" in figures and "stored_bytes" in figures:
            points[("expired_bytes_ratio", "", ns, None, "")] = ratio(figures["expired_bytes"], figures["stored_bytes"])


def shard_figures(points: dict[Labels, float]) -> dict[tuple[str, int], dict[str, float]]:
    """(namespace, shard) → the engine's ``ShardStats`` fields and the shard's backlog sums, as collected.

    Only shards whose node answered (a failed node's points were dropped) and reported the shard's stats.
    """
    fields_by_series = {series: name for name, series in SHARD_SERIES.items()}
    fields_by_series.update({series: series for series in BACKLOG_SERIES.values()})
    found: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    for (name, node, ns, shard, _queue), value in points.items():
        if shard is not None and node and name in fields_by_series:
            found[(ns, shard)][fields_by_series[name]] = value
    return {key: figures for key, figures in found.items() if "record_count" in figures}


def _node_points(node: str, stats: dict[str, Any], points: dict[Labels, float]) -> None:
    counters = stats.get("counters") or {}
    found: dict[str, float | None] = {name: _first(counters, keys) for name, keys in NODE_COUNTER_KEYS.items()}
    disk = stats.get("disk")
    if isinstance(disk, dict):  # a DiskStatus as a dict, if the node reports one
        found["disk_used_ratio"] = found["disk_used_ratio"] or _num(disk.get("used_ratio"))
        found["disk_used_bytes"] = found["disk_used_bytes"] or _num(disk.get("used_bytes"))
        found["disk_capacity_bytes"] = found["disk_capacity_bytes"] or _num(disk.get("capacity_bytes"))
    used, capacity = found["disk_used_bytes"], found["disk_capacity_bytes"]
    if found["disk_used_ratio"] is None and used is not None and capacity:
        found["disk_used_ratio"] = used / capacity
    http = stats.get("http") or {}
    for prefix, routes in (("append", APPEND_ROUTES), ("read", READ_ROUTES)):
        present = [http[r] for r in routes if isinstance(http.get(r), dict)]
        if present:
            found[f"{prefix}_requests_total"] = sum(_num(r.get("requests")) or 0.0 for r in present)
            found[f"{prefix}_seconds_total"] = sum(_num(r.get("seconds_sum")) or 0.0 for r in present)
    for name, value in found.items():
        if value is not None:
            points[(name, node, "", None, "")] = value


def _derived_points(ts: int, points: dict[Labels, float], previous: dict[str, MetricSeries]) -> None:
    """Rates from counter deltas since the last collection (a counter that went down restarted from 0)."""

    def delta(name: str, node: str) -> tuple[float, float] | None:
        now_value = points.get((name, node, "", None, ""))
        before = previous.get(series_key(name, node))
        if now_value is None or before is None or before.last_value is None or before.last_ts is None:
            return None
        if before.last_ts >= ts:
            return None
        change = now_value - before.last_value if now_value >= before.last_value else now_value
        return change, (ts - before.last_ts) / 1000

    nodes = {label[1] for label in points if label[0] == "up"}
    for node in nodes:
        for prefix in ("append", "read"):
            requests, seconds = delta(f"{prefix}_requests_total", node), delta(f"{prefix}_seconds_total", node)
            if requests and seconds and requests[0] > 0:
                points[(f"{prefix}_latency_seconds", node, "", None, "")] = seconds[0] / requests[0]
        deleted = delta("scan_deleted_records_total", node)
        if deleted and deleted[1] > 0:
            points[("delete_rate", node, "", None, "")] = deleted[0] / deleted[1]
        _windowed_rate(ts, points, node, "tier_offload_failures_total", "tier_offload_failure_rate")


RATE_WINDOW_MS = 5 * 60_000  # as Prometheus's rate(…[5m]) in the exported rules (alerts.promql.RATE_WINDOW)


def _windowed_rate(ts: int, points: dict[Labels, float], node: str, counter: str, rate: str) -> None:
    """``rate``: the increase of the node's ``counter`` per second over the last ``RATE_WINDOW_MS`` (from its
    oldest sample in the window), as Prometheus's ``rate`` over 5 minutes: a failure every few minutes (an
    offloader backing off) keeps it above 0, where the rate between two collections would flap to 0."""
    now_value = points.get((counter, node, "", None, ""))
    if now_value is None:
        return
    first = (
        Sample.objects.filter(series__key=series_key(counter, node), ts__gte=ts - RATE_WINDOW_MS, ts__lt=ts)
        .order_by("ts")
        .values_list("ts", "value")
        .first()
    )
    if first is None:
        return
    elapsed_s = (ts - first[0]) / 1000
    if elapsed_s <= 0:
        return
    increase = now_value - first[1] if now_value >= first[1] else now_value  # a restart counts from 0
    points[(rate, node, "", None, "")] = increase / elapsed_s


def _scan_points(ts: int, points: dict[Labels, float]) -> None:
    """TTL-index scan durations (the running scan's time so far, else the last one's): per namespace for scans
    of one namespace, per node for the node-wide sweeps (scheduled and due scans, which name no namespace)."""
    for (_kind, namespace, node), seconds in run_durations(clock.from_ms(ts), [Kind.EXPIRY_SCAN]).items():
        if namespace or node:
            points[("scan_duration_seconds", node, namespace, None, "")] = seconds


def celery_queue_names() -> list[str]:
    """The default queue, each node's lifecycle queue, configured and routed queues, queues of beat's periodic
    tasks, and ``METRICS_CELERY_QUEUES``. (The lifecycle schedules, ticked from their own table, start their
    tasks on the default queue and their runs on the node's queue: both are here already.)"""
    names = {app.conf.task_default_queue or settings.CELERY_TASK_DEFAULT_QUEUE}
    names.update(queue_for(node) for node in StorageNode.objects.all())
    for queue in app.conf.task_queues or ():
        names.add(getattr(queue, "name", None) or str(queue))
    routes = app.conf.task_routes
    if isinstance(routes, dict):
        names.update(r["queue"] for r in routes.values() if isinstance(r, dict) and r.get("queue"))
    names.update(q for q in PeriodicTask.objects.exclude(queue__isnull=True).values_list("queue", flat=True) if q)
    names.update(getattr(settings, "METRICS_CELERY_QUEUES", ()))
    return sorted(n for n in names if n)


def celery_queue_depths(names: Iterable[str]) -> dict[str, int]:
    """Messages waiting per queue, through kombu (Redis: LLEN of the list; filesystem: files in the folder)."""
    depths: dict[str, int] = {}
    url = settings.CELERY_BROKER_URL
    try:
        with Connection(url, transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS, connect_timeout=2) as conn:
            channel = conn.default_channel
            for name in names:
                try:
                    depths[name] = int(channel.queue_declare(queue=name, passive=True).message_count)
                except ChannelError:  # the queue does not exist (yet): nothing waits in it
                    depths[name] = 0
    except Exception as exc:  # a broken broker loses the queue series, never the collection
        log.warning("metrics: broker queue depths unavailable: %s", exc)
    return depths


def collect(now: datetime | None = None) -> CollectResult:
    """Sample every node, the scans and the broker queues at one timestamp."""
    ts = clock.now_ms(now)
    placed = placement_by_node_name()

    def hosts(node: str, row: dict[str, Any]) -> bool:
        """A namespace spread over nodes exists on each; a node's figures count only for its own shards."""
        return placed.get((str(row.get("namespace", "")), row.get("shard")), node) == node  # type: ignore[arg-type]

    result = CollectResult(ts=ts)
    points: dict[Labels, float] = {}
    sums: dict[str, dict[str, float]] = defaultdict(dict)
    for node in StorageNode.objects.order_by("name"):
        # One node at a time: whatever goes wrong with one (down, a bad URL or token, an answer that is not
        # its stats) marks that node down, keeps none of its figures, and the others are still collected.
        kept = dict(points), {ns: dict(figures) for ns, figures in sums.items()}
        try:
            with client_for(node) as client:
                stats = client.stats()
            for shard in stats.get("shards") or ():
                if isinstance(shard, dict) and hosts(node.name, shard):
                    _shard_points(node.name, shard, points, sums)
            subscriptions = stats.get("subscriptions")
            if isinstance(subscriptions, list):
                subscriptions = [s for s in subscriptions if not isinstance(s, dict) or hosts(node.name, s)]
            _subscription_points(node.name, subscriptions, points, sums)
            _node_points(node.name, stats, points)
        except Exception as exc:
            if isinstance(exc, StorageError):
                log.warning("metrics: node %s unavailable: %s", node.name, exc)
            else:  # a bug or a node answering nonsense: keep the traceback
                log.exception("metrics: node %s answered something unusable", node.name)
            points, sums = kept[0], defaultdict(dict, kept[1])
            points[("up", node.name, "", None, "")] = 0.0
            result.nodes_down.append(node.name)
            result.errors[node.name] = describe_node_error(exc)
            record_node_health(node, result.errors[node.name])
            continue
        points[("up", node.name, "", None, "")] = 1.0
        result.nodes_up += 1
        record_node_health(node)
    _namespace_points(sums, points)
    _scan_points(ts, points)
    result.queues = celery_queue_depths(celery_queue_names())
    for queue, depth in result.queues.items():
        points[("celery_queue_depth", "", "", None, queue)] = float(depth)
    previous_names = {"append_requests_total", "append_seconds_total", "read_requests_total", "read_seconds_total"}
    previous_names.add("scan_deleted_records_total")
    previous = {s.key: s for s in MetricSeries.objects.filter(name__in=previous_names)}
    _derived_points(ts, points, previous)
    moved = _tiers_moved(points)
    result.samples = write_points(ts, points)
    result.shards_changed = _record_shard_status(ts, points)
    _mark_tiers_stale(moved)
    return result


def _tiers_moved(points: dict[Labels, float]) -> list[str]:
    """The nodes whose tier gauges (``TIER_MOVE_SERIES``) changed since the last collection: segments moved
    between tiers there — an offload run, or the node's file cleaner offloading under disk pressure."""
    before = {s.key: s.last_value for s in MetricSeries.objects.filter(name__in=TIER_MOVE_SERIES)}
    moved = set()
    for (name, node, _namespace, _shard, _queue), value in points.items():
        if name in TIER_MOVE_SERIES and before.get(series_key(name, node), 0.0) != value:
            moved.add(node)
    return sorted(moved)


def _mark_tiers_stale(nodes: list[str]) -> None:
    """The namespaces on ``nodes`` are due for a segment sync (their segments' tiers changed); a failure here
    loses that, never the samples."""
    if not nodes:
        return

    try:
        mark_tiers_stale(Namespace.objects.filter(placements__node__name__in=nodes).distinct())
    except Exception:
        log.exception("metrics: could not mark the catalog's tiers stale")


def _record_shard_status(ts: int, points: dict[Labels, float]) -> int:
    """The catalog's shard figures from this same collection, so the namespace pages are as fresh as the
    metrics; a failure here loses the catalog update, never the samples already written."""
    try:
        return record_collected_figures(shard_figures(points), clock.from_ms(ts))
    except Exception:
        log.exception("metrics: could not record the shards' figures in the catalog")
        return 0


def _series_ids(labels: Iterable[Labels]) -> dict[Labels, MetricSeries]:
    wanted = {series_key(*label): label for label in labels}
    found = {s.key: s for s in MetricSeries.objects.filter(key__in=list(wanted))}
    missing = [
        MetricSeries(key=key, name=name, node=node, namespace=ns, shard=shard, queue=queue)
        for key, (name, node, ns, shard, queue) in wanted.items()
        if key not in found
    ]
    if missing:
        MetricSeries.objects.bulk_create(missing, ignore_conflicts=True, batch_size=500)
        found.update({s.key: s for s in MetricSeries.objects.filter(key__in=[m.key for m in missing])})
    return {label: found[key] for key, label in wanted.items()}


@transaction.atomic
def write_points(ts: int, points: dict[Labels, float]) -> int:
    """Store one collection: samples (a repeated timestamp is ignored) and each series' last value."""
    if not points:
        return 0
    series = _series_ids(points)
    Sample.objects.bulk_create(
        [Sample(series_id=series[label].pk, ts=ts, value=value) for label, value in points.items()],
        ignore_conflicts=True,
        batch_size=1000,
    )
    changed = []
    for label, value in points.items():
        row = series[label]
        if row.last_ts is None or row.last_ts <= ts:
            row.last_ts, row.last_value = ts, value
            changed.append(row)
    MetricSeries.objects.bulk_update(changed, ["last_ts", "last_value"], batch_size=500)
    return len(points)


@dataclass
class DownsampleResult:
    buckets_rolled: int = 0
    rollups_written: int = 0
    raw_deleted: int = 0
    rollups_deleted: int = 0
    series_deleted: int = 0
    more: bool = False


def _delete_in_batches(queryset: Any, model: Any) -> tuple[int, bool]:
    deleted = 0
    for _ in range(DELETE_MAX_BATCHES):
        ids = list(queryset.values_list("pk", flat=True)[:DELETE_BATCH])
        if not ids:
            return deleted, False
        deleted += model.objects.filter(pk__in=ids).delete()[1].get(model._meta.label, 0)
    return deleted, queryset.exists()


def downsample(now: datetime | None = None) -> DownsampleResult:
    """Roll closed 5-minute buckets up (at most ``ROLLUP_MAX_BUCKETS``), then expire old rows in batches."""
    now_ms = clock.now_ms(now)
    result = DownsampleResult()
    # A bucket is closed once a collection after its end could have landed (one interval of grace).
    closed_end = (now_ms - interval_s() * 1000) // ROLLUP_STEP_MS * ROLLUP_STEP_MS
    last = Rollup.objects.aggregate(m=Max("bucket"))["m"]
    start = last + ROLLUP_STEP_MS if last is not None else 0
    first_raw = Sample.objects.filter(ts__gte=start).aggregate(m=Min("ts"))["m"]
    if first_raw is not None:
        start = max(start, first_raw // ROLLUP_STEP_MS * ROLLUP_STEP_MS)
        end = min(start + ROLLUP_MAX_BUCKETS * ROLLUP_STEP_MS, closed_end)
        if start < end:
            groups = (
                Sample.objects.filter(ts__gte=start, ts__lt=end)
                .annotate(bucket=F("ts") - Mod(F("ts"), ROLLUP_STEP_MS))
                .values("series_id", "bucket")
                .annotate(n=Count("id"), total=Sum("value"), lo=Min("value"), hi=Max("value"))
            )
            rows = [
                Rollup(
                    series_id=g["series_id"], bucket=g["bucket"], count=g["n"], sum=g["total"], min=g["lo"], max=g["hi"]
                )
                for g in groups
            ]
            Rollup.objects.bulk_create(
                rows,
                update_conflicts=True,
                unique_fields=["series", "bucket"],
                update_fields=["count", "sum", "min", "max"],
                batch_size=1000,
            )
            result.buckets_rolled = (end - start) // ROLLUP_STEP_MS
            result.rollups_written = len(rows)
            result.more = end < closed_end and Sample.objects.filter(ts__gte=end, ts__lt=closed_end).exists()
    # Raw samples go after 24 h, but never before their bucket is rolled up.
    rolled_upto = (Rollup.objects.aggregate(m=Max("bucket"))["m"] or -ROLLUP_STEP_MS) + ROLLUP_STEP_MS
    raw_cutoff = min(now_ms - RAW_RETENTION_MS, rolled_upto)
    result.raw_deleted, more_raw = _delete_in_batches(Sample.objects.filter(ts__lt=raw_cutoff).order_by("ts"), Sample)
    old_rollups = Rollup.objects.filter(bucket__lt=now_ms - ROLLUP_RETENTION_MS).order_by("bucket")
    result.rollups_deleted, more_rollups = _delete_in_batches(old_rollups, Rollup)
    # Series nobody has reported for longer than rollups are kept hold no data any more.
    gone = MetricSeries.objects.filter(Q(last_ts__lt=now_ms - ROLLUP_RETENTION_MS) | Q(last_ts__isnull=True))
    result.series_deleted, more_series = _delete_in_batches(gone.order_by("pk"), MetricSeries)
    result.more = result.more or more_raw or more_rollups or more_series
    return result


def forget_series(*, namespace: str = "", node: str = "") -> int:
    """A deleted namespace's (or node's) series stop being current at once: their latest value is
    cleared, so no total, exposition or alert rule counts them; their samples stay for the charts."""
    rows = MetricSeries.objects.filter(namespace=namespace) if namespace else MetricSeries.objects.filter(node=node)
    return rows.exclude(last_value__isnull=True).update(last_value=None)
