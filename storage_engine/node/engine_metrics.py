"""The engine's figures as a Prometheus collector, read afresh at every scrape.

A custom collector (not Gauges updated as things happen) because the figures already
live in the engine: a scrape asks it once (``EngineStats``, the disk measured now, the
subscription backlog, the failed shards, the node policy) and yields metric families
from the answer, so nothing is counted twice and nothing goes stale between scrapes.
What each name means is :mod:`storage_engine.node.metric_catalog`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from storage_engine.api import BacklogInfo, StorageAdapter
from storage_engine.node.metric_catalog import (
    BACKLOG_GAUGES,
    DISK_GAUGES,
    ENGINE_COUNTERS,
    ENGINE_GAUGES,
    NOT_PUBLISHED,
    POLICY_GAUGES,
    SHARD_FAILED,
    SHARD_GAUGES,
    metric_name,
)

log = logging.getLogger("storage_node")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_:]")
SHARD_LABELS = ("namespace", "shard")
BACKLOG_LABELS = ("namespace", "subscription", "shard")


def all_backlog(engine: StorageAdapter) -> list[BacklogInfo]:
    """Every subscription's backlog on every shard, namespace by namespace."""
    return [row for info in engine.list_namespaces() for row in engine.backlog(info.name)]


class EngineCollector(Collector):
    """Yields the engine's families: shard and subscription gauges, engine counters (every known
    one, from 0), the disk and its policy thresholds, the failed shards and the build info."""

    def __init__(self, engine: StorageAdapter, version: str, backlog: Callable[[], list[BacklogInfo]]) -> None:
        self._engine = engine
        self._version = version
        self._backlog = backlog

    def collect(self) -> Iterator[Metric]:
        engine = self._engine
        # An info metric: lcs_node_build_info{version, adapter} 1 (a gauge in the text format).
        yield InfoMetricFamily(
            "lcs_node_build",
            "The node's package version and adapter.",
            {"version": self._version, "adapter": engine.name},
        )
        disk = engine.check_disk()  # measured now (it also refreshes the disk-full flag, as a scheduled check does)
        stats = engine.stats()
        failed = {(f.namespace, f.shard) for f in engine.failed_shards()}
        yield GaugeMetricFamily("lcs_namespaces", "Namespaces on this node.", value=stats.namespaces)
        for attr, (name, help_text) in SHARD_GAUGES.items():
            family = GaugeMetricFamily(name, help_text, labels=SHARD_LABELS)
            for s in stats.shards:
                family.add_metric([s.namespace, str(s.shard)], getattr(s, attr))
            yield family
        name, help_text = SHARD_FAILED
        family = GaugeMetricFamily(name, help_text, labels=SHARD_LABELS)
        for s in stats.shards:
            family.add_metric([s.namespace, str(s.shard)], 1 if (s.namespace, s.shard) in failed else 0)
        yield family
        for attr, (name, help_text) in DISK_GAUGES.items():
            yield GaugeMetricFamily(name, help_text, value=float(getattr(disk, attr)))
        policy = engine.node_policy()
        for attr, (name, help_text) in POLICY_GAUGES.items():
            yield GaugeMetricFamily(name, help_text, value=float(getattr(policy, attr)))
        yield from _engine_families(stats.counters)
        yield from _backlog_families(self._backlog())


def _engine_families(counters: dict[str, float]) -> Iterable[Metric]:
    """Every catalogued counter (0 when the engine has not counted it yet), the catalogued gauges the
    engine reports, and any key not catalogued yet, with a HELP saying so rather than none."""
    for key, help_text in ENGINE_COUNTERS.items():
        yield CounterMetricFamily(metric_name(key), help_text, value=counters.get(key, 0))
    for key, help_text in ENGINE_GAUGES.items():
        if key in counters:
            yield GaugeMetricFamily(metric_name(key), help_text, value=counters[key])
    for key in sorted(set(counters) - set(ENGINE_COUNTERS) - set(ENGINE_GAUGES) - NOT_PUBLISHED):
        name = metric_name(_UNSAFE.sub("_", key))
        help_text = f"Engine figure {key} (not yet described in storage_engine/node/metric_catalog.py)."
        if key.endswith("_total"):
            yield CounterMetricFamily(name, help_text, value=counters[key])
        else:
            yield GaugeMetricFamily(name, help_text, value=counters[key])


def _backlog_families(rows: list[BacklogInfo]) -> Iterable[Metric]:
    for attr, (name, help_text, divisor) in BACKLOG_GAUGES.items():
        family = GaugeMetricFamily(name, help_text, labels=BACKLOG_LABELS)
        for row in rows:
            family.add_metric([row.namespace, row.subscription, str(row.shard)], getattr(row, attr) / divisor)
        yield family
