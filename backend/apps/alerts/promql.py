"""The console's alert rules as Prometheus alerting rules over the storage nodes' own series.

A rule of the console names one of its metrics (``metrics.catalog.SERIES``) at a level (``rules.rule_levels``).
Here each becomes a PromQL expression over what the node publishes on its ``/metrics``
(``storage_engine/node/metric_catalog.py``, ``docs/metrics.md``): a namespace's figure is the sum over its
shards (across nodes: a node reports a namespace's shards it does not host as empty), a ratio the ratio of the
sums, a subscription's backlog its sum over shards. Two quantities live only in the console and are read from
its ``/metrics``: the TTL-scan duration (a scan is a console task run of many bounded node steps; per
namespace, and per node for the node-wide sweeps) and the Celery queue depth.

Thresholds are not written into the file: the console publishes each rule's threshold as a gauge
(``exposition.AlertCollector``) and the expression compares with it through ``on(...) group_left``, so a
threshold, a policy value or a rule's enabled state changes without a new export (a disabled rule publishes
no threshold, so its Prometheus rule matches nothing). How a rule's threshold is published, per level:

- ``FIXED``: an absolute threshold, one series ``lcs_alert_rule_threshold{rule}``;
- ``NAMESPACE``: relative to a policy field, per namespace (``{rule, namespace}``), joined ``on(namespace)``;
- ``CLUSTER``: a namespace policy field on a node-wide series: the cluster default (``namespace=""``);
- ``NODE_GAUGE``: relative to a node policy field the node publishes itself (its disk ratios, e.g.
  ``lcs_disk_warning_ratio``): the node's gauge times the rule's factor ``lcs_alert_rule_threshold_factor``;
- ``NODE``: relative to another node policy field: per node (``{rule, node}``), joined ``on(node)`` — the
  node's targets carry a ``node`` label naming it as the console does (see ``docs/metrics.md``).

Node-scoped rules select ``node="<name>"``, the same target label.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from backend.apps.alerts.models import AlertRule
from backend.apps.alerts.rules import FORECAST, NODE_POLICY_FIELDS, alert_name, rule_levels, scope_filter
from backend.apps.metrics.catalog import NAMESPACE, NODE, QUEUE, SERIES, SHARD
from backend.apps.metrics.selectors import FORECAST_HORIZON_S, FORECAST_WINDOW_S

GROUP = "lcs-alerts"
BUILTIN_GROUP = "lcs-nodes"
NODE_JOB = "lcs-node"
WEB_JOB = "lcs-web"
THRESHOLD = "lcs_alert_rule_threshold"
FACTOR = "lcs_alert_rule_threshold_factor"
TASK_RUN_DURATION = "lcs_task_run_duration_seconds"
RATE_WINDOW = "5m"

FIXED, NAMESPACE_JOIN, CLUSTER, NODE_GAUGE, NODE_JOIN = "fixed", "namespace", "cluster", "node_gauge", "node"
# Node policy fields the node publishes as gauges of its own (storage_engine/node/metric_catalog.py).
NODE_POLICY_GAUGES = {
    "disk_max_used_ratio": "lcs_disk_max_used_ratio",
    "disk_clean_forcibly_ratio": "lcs_disk_clean_forcibly_ratio",
    "disk_warning_ratio": "lcs_disk_warning_ratio",
}


def threshold_join(rule: AlertRule, level: str) -> str:
    """How the threshold of ``rule`` on its series of ``level`` is published and joined (module docstring)."""
    policy = rule.threshold_policy
    if not policy:
        return FIXED
    if policy in NODE_POLICY_FIELDS:
        if level in (SHARD, NAMESPACE):
            return NAMESPACE_JOIN  # the policy of the namespace's node, per namespace
        return NODE_GAUGE if policy in NODE_POLICY_GAUGES else NODE_JOIN
    return NAMESPACE_JOIN if level in (SHARD, NAMESPACE) else CLUSTER


# -- the node's series behind each metric of the console ----------------------------------------------------


@dataclass(frozen=True)
class Quantity:
    """A console metric over the node's series: ``series`` aggregated with ``agg`` (``sum``, ``max``; empty:
    the series as is), or the ratio of two sums; ``per_subscription`` keeps the subscription label."""

    series: str
    agg: str = "sum"
    denominator: str = ""
    per_subscription: bool = False
    matchers: str = ""  # fixed label matchers of the series, e.g. kind="expiry_scan"


QUANTITIES: dict[str, Quantity] = {
    "expired_ratio": Quantity("lcs_shard_expired_records", denominator="lcs_shard_stored_records"),
    "expired_bytes_ratio": Quantity("lcs_shard_expired_bytes", denominator="lcs_shard_stored_bytes"),
    "expired_records": Quantity("lcs_shard_expired_records"),
    "expired_bytes": Quantity("lcs_shard_expired_bytes"),
    "stored_bytes": Quantity("lcs_shard_stored_bytes"),
    "local_bytes": Quantity("lcs_shard_local_bytes"),
    "remote_only_bytes": Quantity("lcs_shard_remote_only_bytes"),
    "stored_records": Quantity("lcs_shard_stored_records"),
    "live_records": Quantity("lcs_shard_live_records"),
    "segments": Quantity("lcs_shard_segments"),
    "log_start_offset": Quantity("lcs_shard_log_start_offset", "max"),
    "end_offset": Quantity("lcs_shard_end_offset", "max"),
    "backlog_messages": Quantity("lcs_subscription_backlog_messages"),
    "backlog_live_messages": Quantity("lcs_subscription_backlog_live_messages"),
    "backlog_bytes": Quantity("lcs_subscription_backlog_bytes"),
    # What backlog_quota_bytes limits: one subscription's bytes over its shards (an alert per subscription).
    "subscription_backlog_bytes_max": Quantity("lcs_subscription_backlog_bytes", per_subscription=True),
    "backlog_age_seconds": Quantity("lcs_subscription_backlog_age_seconds", "max", per_subscription=True),
    # Console task runs (its /metrics): per namespace, and per node for the node-wide sweeps.
    "scan_duration_seconds": Quantity(TASK_RUN_DURATION, "", matchers='kind="expiry_scan"'),
    "up": Quantity("up", ""),
    "disk_used_ratio": Quantity("lcs_disk_used_ratio", ""),
    "disk_used_bytes": Quantity("lcs_disk_used_bytes", ""),
    "disk_capacity_bytes": Quantity("lcs_disk_capacity_bytes", ""),
    "delete_queue_length": Quantity("lcs_read_check_queue_length", ""),
    "delete_queue_drops_total": Quantity("lcs_read_check_drops_total", ""),
    "scan_runs_total": Quantity("lcs_ttl_scan_runs_total", ""),
    "scan_deleted_records_total": Quantity("lcs_ttl_scan_expired_records_total", ""),
    "compaction_runs_total": Quantity("lcs_compaction_runs_total", ""),
    "compaction_reclaimed_bytes_total": Quantity("lcs_compaction_reclaimed_bytes_total", ""),
    "reclaimed_bytes_total": Quantity("lcs_reclaim_bytes_total", ""),
    "tier_local_bytes": Quantity("lcs_tier_local_bytes", ""),
    "tier_remote_bytes": Quantity("lcs_tier_remote_bytes", ""),
    "tier_remote_only_bytes": Quantity("lcs_tier_remote_only_bytes", ""),
    "tier_offload_pending_segments": Quantity("lcs_tier_offload_pending_segments", ""),
    "tier_offload_lag_seconds": Quantity("lcs_tier_offload_lag_seconds", ""),
    "tier_offload_failures_total": Quantity("lcs_tier_offload_failures_total", ""),
    "celery_queue_depth": Quantity("lcs_celery_queue_messages", ""),
}


def _latency(series: str, sel: str, without: str = "") -> str:
    spent = f"rate({_series(series + '_sum', sel)}[{RATE_WINDOW}])"
    served = f"rate({_series(series + '_count', sel)}[{RATE_WINDOW}])"
    if without:
        return f"(sum without ({without}) ({spent}) / sum without ({without}) ({served}))"
    return f"({spent} / {served})"


def _reads(part: str, sel: str) -> str:
    return f"sum without (operation) ({_series('lcs_read_duration_seconds_' + part, sel)})"


# Metrics that are PromQL of their own over the node's histograms and counters (``sel``: the scope's label
# matchers). The console keeps running totals of appends and reads and derives rates between two
# collections; here the node's engine histograms give both, and Prometheus computes the rates.
COMPUTED: dict[str, Callable[[str], str]] = {
    "append_requests_total": lambda sel: _series("lcs_append_duration_seconds_count", sel),
    "append_seconds_total": lambda sel: _series("lcs_append_duration_seconds_sum", sel),
    "read_requests_total": lambda sel: _reads("count", sel),
    "read_seconds_total": lambda sel: _reads("sum", sel),
    "delete_rate": lambda sel: f"rate({_series('lcs_ttl_scan_expired_records_total', sel)}[{RATE_WINDOW}])",
    "tier_offload_failure_rate": lambda sel: f"rate({_series('lcs_tier_offload_failures_total', sel)}[{RATE_WINDOW}])",
    "append_latency_seconds": lambda sel: _latency("lcs_append_duration_seconds", sel),
    "read_latency_seconds": lambda sel: _latency("lcs_read_duration_seconds", sel, "operation"),
}


def quote(value: Any) -> str:
    """A PromQL (and YAML-safe) double-quoted string."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def _matchers(*parts: str, labels: dict[str, Any] | None = None) -> str:
    items = [p for p in parts if p] + [f"{k}={quote(v)}" for k, v in (labels or {}).items()]
    return ",".join(items)


def _series(name: str, matchers: str) -> str:
    return f"{name}{{{matchers}}}" if matchers else name


def _grouping(level: str, quantity: Quantity | None, scope_type: str) -> list[str]:
    labels = {SHARD: ["namespace", "shard"], NAMESPACE: ["namespace"]}.get(level, [])
    if quantity is not None and quantity.per_subscription:
        labels.append("subscription")
    if scope_type == "node" and level in (SHARD, NAMESPACE):
        labels.insert(0, "node")
    return labels


def quantity_expr(rule: AlertRule, level: str, node_job: str = NODE_JOB) -> str:
    """The PromQL of ``rule``'s metric at ``level`` within its scope (no comparison yet)."""
    metric = "disk_used_ratio" if rule.metric == FORECAST else rule.metric
    pinned = scope_filter(rule.scope_type, rule.scope)
    if metric in COMPUTED:
        return COMPUTED[metric](_matchers(labels=pinned))
    quantity = QUANTITIES[metric]
    fixed = [quantity.matchers]
    if metric == "up":
        fixed.append(f"job={quote(node_job)}")
    if quantity.series == TASK_RUN_DURATION:  # one task-run series per namespace, or per node for sweeps
        target = "namespace" if level == NAMESPACE else "node"
        if target not in pinned:
            fixed.append(f'{target}!=""')
    selector = _series(quantity.series, _matchers(*fixed, labels=pinned))
    if rule.metric == FORECAST:
        return f"predict_linear({selector}[{_duration(FORECAST_WINDOW_S)}], {FORECAST_HORIZON_S})"
    if not quantity.agg:
        return selector
    by = ", ".join(_grouping(level, quantity, rule.scope_type))
    total = f"{quantity.agg} by ({by}) ({selector})"
    if quantity.denominator:
        below = _series(quantity.denominator, _matchers(*fixed, labels=pinned))
        return f"({total} / {quantity.agg} by ({by}) ({below}))"
    return total


def comparison(rule: AlertRule, level: str, node_job: str = NODE_JOB) -> str:
    """``<quantity> <comparator> <the published threshold>``, joined as ``threshold_join`` says."""
    left = quantity_expr(rule, level, node_job)
    rule_id = f"rule={quote(rule.pk)}"
    join = threshold_join(rule, level)
    if join == FIXED:
        right = f"on() group_left max({THRESHOLD}{{{rule_id}}})"
    elif join == NAMESPACE_JOIN:
        right = f'on(namespace) group_left max by (namespace) ({THRESHOLD}{{{rule_id},namespace!=""}})'
    elif join == CLUSTER:
        right = f'on() group_left max({THRESHOLD}{{{rule_id},namespace="",node=""}})'
    elif join == NODE_JOIN:
        right = f'on(node) group_left max by (node) ({THRESHOLD}{{{rule_id},node!=""}})'
    else:
        gauge = NODE_POLICY_GAUGES[rule.threshold_policy]
        node = _matchers(labels={"node": rule.scope}) if rule.scope_type == "node" else ""
        right = f"({_series(gauge, node)} * on() group_left max({FACTOR}{{{rule_id}}}))"
    return f"{left} {rule.comparator} {right}"


def rule_expr(rule: AlertRule, node_job: str = NODE_JOB) -> str:
    """The PromQL of one rule: a comparison per level of series it watches, joined with ``or`` (the TTL
    scan's namespace scans and node-wide sweeps, ``rules.rule_levels``)."""
    terms = [comparison(rule, level, node_job) for level in rule_levels(rule.metric, rule.scope_type)]
    return terms[0] if len(terms) == 1 else " or ".join(f"({t})" for t in terms)


# -- rules and annotations ----------------------------------------------------------------------------------

_VALUE = {
    "ratio": "{{ $value | humanizePercentage }}",
    "bytes": "{{ $value | humanize1024 }}B",
    "seconds": "{{ $value | humanizeDuration }}",
}
_WHERE = {
    SHARD: "namespace {{ $labels.namespace }} shard {{ $labels.shard }}",
    NAMESPACE: "namespace {{ $labels.namespace }}",
    NODE: "node {{ with $labels.node }}{{ . }}{{ else }}{{ $labels.instance }}{{ end }}",
    QUEUE: "queue {{ $labels.queue }}",
}


def _duration(seconds: int) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def where(rule: AlertRule) -> str:
    """Where an alert of the rule is, as a template over its labels."""
    levels = rule_levels(rule.metric, rule.scope_type)
    if levels == (NAMESPACE, NODE):  # namespace scans and node-wide sweeps
        return "{{ with $labels.namespace }}namespace {{ . }}{{ else }}node {{ $labels.node }}{{ end }}"
    text = _WHERE[levels[0]]
    quantity = QUANTITIES.get(rule.metric)
    if quantity is not None and quantity.per_subscription:
        text += " subscription {{ $labels.subscription }}"
    return text


def prometheus_rule(rule: AlertRule, node_job: str = NODE_JOB) -> dict[str, Any]:
    series = SERIES.get("disk_used_ratio" if rule.metric == FORECAST else rule.metric)
    value = _VALUE.get(series.unit if series is not None else "", "{{ $value | humanize }}")
    metric = "disk use forecast 24 h ahead" if rule.metric == FORECAST else rule.metric
    return {
        "alert": alert_name(rule.name),
        "expr": rule_expr(rule, node_job),
        "for": _duration(rule.for_s),
        "labels": {"severity": str(rule.severity), "rule": str(rule.pk)},
        "annotations": {
            "summary": f"{rule.name}: {metric} {value} ({where(rule)})",
            "description": rule.description
            or f"{rule.metric} {rule.comparator} the rule's threshold ({THRESHOLD}{{rule={quote(rule.pk)}}}).",
        },
    }


def builtin_rules(node_job: str = NODE_JOB, web_job: str = WEB_JOB) -> list[dict[str, Any]]:
    """Rules over the node alone, whatever the console says: a node down, appends refused, failed shards;
    and the console's own /metrics, which every other rule's threshold comes from."""
    node = _WHERE[NODE]
    return [
        {
            "alert": "LcsNodeDown",
            "expr": f"up{{job={quote(node_job)}}} == 0",
            "for": "1m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": f"Storage {node} is down",
                "description": "Prometheus cannot scrape the storage node: its namespaces can be neither "
                "written nor read, and its lifecycle work has stopped.",
            },
        },
        {
            "alert": "LcsDiskFull",
            "expr": "lcs_disk_full == 1",
            "for": "0s",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": f"Disk full on {node}: appends are refused",
                "description": "Disk use is above the node's disk_warning_ratio (lcs_disk_warning_ratio): the "
                "node refuses appends until use falls back (nothing acknowledged is lost).",
            },
        },
        {
            "alert": "LcsShardFailed",
            "expr": "lcs_shard_failed == 1",
            "for": "0s",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": f"Shard {{{{ $labels.shard }}}} of namespace {{{{ $labels.namespace }}}} failed on {node}",
                "description": "The shard stopped on a failure (a corrupt segment, a failed write): its reads "
                "and appends fail until the node restarts.",
            },
        },
        {
            "alert": "LcsConsoleMetricsDown",
            "expr": f"up{{job={quote(web_job)}}} == 0",
            "for": "5m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Prometheus cannot scrape the console's /metrics ({{ $labels.instance }})",
                "description": "The console publishes the alert rules' thresholds: while it is not scraped, "
                "the rules that compare with them cannot fire.",
            },
        },
    ]


def export(
    rules: list[AlertRule], node_job: str = NODE_JOB, web_job: str = WEB_JOB, builtin: bool = True
) -> dict[str, Any]:
    """A Prometheus rule file: the node's built-in rules, then one alerting rule per console rule."""
    groups = []
    if builtin:
        groups.append({"name": BUILTIN_GROUP, "rules": builtin_rules(node_job, web_job)})
    groups.append({"name": GROUP, "rules": [prometheus_rule(rule, node_job) for rule in rules]})
    return {"groups": groups}
