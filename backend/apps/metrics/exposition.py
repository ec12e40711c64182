"""The control plane's own series on its ``/metrics``, computed at each scrape (prometheus_client collectors).

The web publishes what only the console knows: its Celery queues and its task runs here, its alert rules'
thresholds and its alerts (``backend.apps.alerts.exposition``), and django-prometheus's request and database
metrics. The storage nodes' figures are on each node's own ``/metrics`` only — Prometheus scrapes them
there, so nothing is published twice (``docs/metrics.md``).

Each app registers its collector once, in its ``AppConfig.ready``, into prometheus_client's registry;
``selectors.prometheus_text`` renders :func:`registry`. Behind gunicorn (``gunicorn.conf.py``) every worker
keeps its request and database metrics in files under ``PROMETHEUS_MULTIPROC_DIR`` and a scrape, whichever
worker answers it, adds them all up (prometheus_client's multiprocess mode).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

from django.db.models import Count
from prometheus_client import multiprocess
from prometheus_client.core import REGISTRY, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from backend.apps.metrics import clock
from backend.apps.metrics.services import celery_queue_depths, celery_queue_names
from backend.apps.runs.models import Kind, State, TaskRun
from backend.apps.runs.selectors import run_durations

log = logging.getLogger(__name__)


# The control plane's own collectors (they read the database: one process's view is everybody's).
COLLECTORS: list[Collector] = []


def register(collector: Collector) -> None:
    """Register ``collector`` once (``ready`` may run again, e.g. in tests)."""
    if any(type(c) is type(collector) for c in COLLECTORS):
        return
    COLLECTORS.append(collector)
    try:
        REGISTRY.register(collector)
    except ValueError:  # the same series names are registered already
        log.debug("metrics: %s already registered", type(collector).__name__)


def registry() -> CollectorRegistry:
    """What ``/metrics`` renders: prometheus_client's registry; with ``PROMETHEUS_MULTIPROC_DIR`` set (the web
    under gunicorn), every worker's request and database metrics added up from their files, and the control
    plane's collectors."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not directory:
        return REGISTRY
    merged = CollectorRegistry()
    multiprocess.MultiProcessCollector(merged, path=directory)
    for collector in COLLECTORS:
        merged.register(collector)
    return merged


class CeleryQueueCollector(Collector):
    """``lcs_celery_queue_messages{queue}``, asked of the broker at the scrape: a backed-up queue is seen
    even when the workers that would run the metrics collection are the ones stuck."""

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("lcs_celery_queue_messages", _QUEUE_HELP, labels=["queue"])

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("lcs_celery_queue_messages", _QUEUE_HELP, labels=["queue"])
        try:
            depths = celery_queue_depths(celery_queue_names())
        except Exception:  # a scrape never fails for the broker: the series is absent instead
            log.exception("metrics: Celery queue depths unavailable")
            depths = {}
        for queue, depth in sorted(depths.items()):
            family.add_metric([queue], depth)
        yield family


_QUEUE_HELP = "Messages waiting in a Celery broker queue (the default queue, each node's queue, routed queues)."
_RUNS_HELP = (
    "Task runs kept by the console, by kind and state (scheduled sweeps fold into one row per kind, target and window)."
)
_DURATION_HELP = (
    "How long the task run in progress has been running, else how long the last successful one took, per "
    "kind and target: a namespace, or a node for the node-wide sweeps (dry runs excluded)."
)


class TaskRunCollector(Collector):
    """``lcs_task_runs{kind, state}`` and ``lcs_task_run_duration_seconds{kind, namespace, node}``."""

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("lcs_task_runs", _RUNS_HELP, labels=["kind", "state"])
        yield GaugeMetricFamily("lcs_task_run_duration_seconds", _DURATION_HELP, labels=["kind", "namespace", "node"])

    def collect(self) -> Iterator[Metric]:
        runs = GaugeMetricFamily("lcs_task_runs", _RUNS_HELP, labels=["kind", "state"])
        counts = {
            (row["kind"], row["state"]): row["n"]
            for row in TaskRun.objects.values("kind", "state").annotate(n=Count("id"))
        }
        for kind in Kind.values:  # every kind and state, 0 included: rates and deltas need the zeros
            for state in State.values:
                runs.add_metric([kind, state], counts.get((kind, state), 0))
        yield runs
        durations = GaugeMetricFamily(
            "lcs_task_run_duration_seconds", _DURATION_HELP, labels=["kind", "namespace", "node"]
        )
        for (kind, namespace, node), seconds in sorted(run_durations(clock.now()).items()):
            durations.add_metric([kind, namespace, node], seconds)
        yield durations
