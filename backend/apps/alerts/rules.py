"""What a rule may say: metrics, scopes, policy-relative thresholds, and the built-in rules (DESIGN §4)."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any

from backend.apps.metrics.catalog import NAMESPACE, NODE, QUEUE, SERIES, SHARD
from storage_engine.policies.policy import NamespacePolicy, NodePolicy

# The disk-use fit 24 h ahead (a ratio), per node; no value, so nothing to evaluate, until the node's disk
# samples span metrics.selectors.FORECAST_MIN_HISTORY_S.
FORECAST = "forecast"

# metric → the levels its series exist at
METRIC_LEVELS: dict[str, tuple[str, ...]] = {name: s.levels for name, s in SERIES.items()}
METRIC_LEVELS[FORECAST] = (NODE,)
METRICS = tuple(sorted(METRIC_LEVELS))

COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


def _numeric_fields(cls: type) -> set[str]:
    out = set()
    for f in dataclasses.fields(cls):
        default = f.default
        if (isinstance(default, int | float) and not isinstance(default, bool)) or (
            default is None and "int" in str(f.type)
        ):
            out.add(f.name)
    return out


NODE_POLICY_FIELDS = _numeric_fields(NodePolicy)
NAMESPACE_POLICY_FIELDS = _numeric_fields(NamespacePolicy) - NODE_POLICY_FIELDS
POLICY_FIELDS = tuple(sorted(NODE_POLICY_FIELDS | NAMESPACE_POLICY_FIELDS))


def primary_level(metric: str, scope_type: str) -> str:
    """The level of the series a rule looks at, for its scope."""
    levels = METRIC_LEVELS[metric]
    if scope_type == "shard":
        return SHARD
    if scope_type == "node":
        return NODE if NODE in levels else SHARD
    if scope_type == "namespace":
        return NAMESPACE if NAMESPACE in levels else SHARD
    for level in (NAMESPACE, NODE, QUEUE, SHARD):
        if level in levels:
            return level
    return levels[0]


def rule_levels(metric: str, scope_type: str) -> tuple[str, ...]:
    """Every level of series a rule looks at: its primary level, and for a rule over everything on a metric
    with both per-namespace and per-node series, the node series too. Those node series are not sums of the
    namespace ones but work of their own: the TTL scan's per-namespace series come from scans of one
    namespace, its per-node series from the node-wide sweeps (scheduled and due scans), which no namespace
    series shows."""
    primary = primary_level(metric, scope_type)
    levels = METRIC_LEVELS[metric]
    if scope_type == "all" and primary == NAMESPACE and NODE in levels:
        return (NAMESPACE, NODE)
    return (primary,)


def scope_errors(metric: str, scope_type: str, scope: str) -> dict[str, str]:
    """Field → rule for a metric/scope combination that cannot be evaluated."""
    levels = METRIC_LEVELS.get(metric)
    if levels is None:
        return {"metric": f"must be one of {', '.join(METRICS)}"}
    if scope_type == "all":
        return {"scope": "must be empty when scope_type is all"} if scope else {}
    if not scope:
        return {"scope": f"names the {scope_type} when scope_type is {scope_type}"}
    if scope_type == "shard":
        if SHARD not in levels:
            return {"scope_type": f"{metric} has no per-shard series"}
        ns, _, number = scope.rpartition("/")
        if not ns or not number.isdigit():
            return {"scope": "must be <namespace>/<shard number> when scope_type is shard"}
    if scope_type == "namespace" and not {SHARD, NAMESPACE} & set(levels):
        return {"scope_type": f"{metric} has no per-namespace series"}
    if scope_type == "node" and not {NODE, SHARD} & set(levels):
        return {"scope_type": f"{metric} has no per-node series"}
    return {}


def scope_filter(scope_type: str, scope: str) -> dict[str, Any]:
    """The label values a scope pins."""
    if scope_type == "namespace":
        return {"namespace": scope}
    if scope_type == "node":
        return {"node": scope}
    if scope_type == "shard":
        ns, _, number = scope.rpartition("/")
        return {"namespace": ns, "shard": int(number)}
    return {}


def alert_name(name: str) -> str:
    """A rule's name as a Prometheus alert name (``Disk above the warning watermark`` →
    ``DiskAboveTheWarningWatermark``); the Alertmanager channel sends the console's alerts under it too."""
    words = "".join(c if c.isalnum() else " " for c in name).split()
    text = "".join(w[:1].upper() + w[1:] for w in words)
    return text if text[:1].isalpha() else f"Lcs{text}"


@dataclasses.dataclass(frozen=True)
class DefaultRule:
    key: str
    name: str
    metric: str
    comparator: str
    threshold: float
    for_s: int
    severity: str
    threshold_policy: str = ""
    description: str = ""


DEFAULT_RULES = (
    DefaultRule(
        "expired_ratio",
        "Expired ratio above 20 %",
        "expired_ratio",
        ">",
        0.20,
        900,
        "warning",
        description="More than a fifth of a namespace's stored records are expired but not reclaimed: "
        "the TTL scan or reclamation is falling behind.",
    ),
    DefaultRule(
        "scan_duration",
        "TTL scan longer than 10 minutes",
        "scan_duration_seconds",
        ">",
        600,
        0,
        "warning",
        description="A TTL-index scan runs (or last ran) longer than 10 minutes.",
    ),
    DefaultRule(
        "delete_queue",
        "Delete queue above its threshold",
        "delete_queue_length",
        ">",
        0.8,
        300,
        "warning",
        threshold_policy="read_check_queue_size",
        description="The read-path clean-up queue is over 80 % of its capacity (read_check_queue_size); "
        "at 100 % clean-ups are dropped.",
    ),
    DefaultRule(
        "disk_max_used",
        "Disk above the max-used watermark",
        "disk_used_ratio",
        ">",
        1.0,
        300,
        "info",
        threshold_policy="disk_max_used_ratio",
        description="Expired files are now deleted at any hour.",
    ),
    DefaultRule(
        "disk_clean_forcibly",
        "Disk above the clean-forcibly watermark",
        "disk_used_ratio",
        ">",
        1.0,
        60,
        "warning",
        threshold_policy="disk_clean_forcibly_ratio",
        description="The oldest sealed files are deleted even if not expired.",
    ),
    DefaultRule(
        "disk_warning",
        "Disk above the warning watermark",
        "disk_used_ratio",
        ">",
        1.0,
        0,
        "critical",
        threshold_policy="disk_warning_ratio",
        description="The node rejects writes (disk full) until use falls back.",
    ),
    DefaultRule(
        "disk_forecast",
        "Disk forecast to reach the warning watermark within 24 h",
        FORECAST,
        ">=",
        1.0,
        1800,
        "warning",
        threshold_policy="disk_warning_ratio",
        description="A least-squares fit of the last 6 h of disk use reaches the warning watermark within 24 h "
        "(evaluated once the node's disk samples span 30 minutes; held 30 minutes before it fires).",
    ),
    DefaultRule(
        "backlog_bytes",
        "Backlog over its byte quota",
        "subscription_backlog_bytes_max",
        ">",
        1.0,
        300,
        "warning",
        threshold_policy="backlog_quota_bytes",
        description="A subscription's backlog exceeds the namespace's backlog_quota_bytes.",
    ),
    DefaultRule(
        "backlog_age",
        "Backlog over its time quota",
        "backlog_age_seconds",
        ">",
        1.0,
        300,
        "warning",
        threshold_policy="backlog_quota_seconds",
        description="A subscription's oldest unacknowledged message is older than backlog_quota_seconds.",
    ),
    DefaultRule(
        "offload_lag",
        "Offload lag above 1 hour",
        "tier_offload_lag_seconds",
        ">",
        3600,
        600,
        "warning",
        description="A sealed segment of a namespace with remote storage has waited more than an hour to be "
        "offloaded: the object store is unreachable or failing, or offloading cannot keep up "
        "(offload_bandwidth_bytes_per_s, offload_concurrency). Local disk keeps what should have moved.",
    ),
    DefaultRule(
        "offload_errors",
        "Repeated upload errors to the object store",
        "tier_offload_failure_rate",
        ">",
        0,
        900,
        "warning",
        description="Segment uploads to the object store have kept failing for 15 minutes (the node retries with "
        "backoff; lcs_tier_offload_failures_total): check the tier URI, credentials and the store itself.",
    ),
)
