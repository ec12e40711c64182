"""Reads of alerts: lists for the API, and the current values a rule is evaluated against."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from django.db.models import Count, Prefetch, Q, QuerySet

from backend.apps.alerts.models import Alert, AlertEvent, AlertRule, AlertState, Channel, Notification, Severity
from backend.apps.alerts.rules import FORECAST, NAMESPACE_POLICY_FIELDS, NODE_POLICY_FIELDS, rule_levels, scope_filter
from backend.apps.metrics import clock
from backend.apps.metrics import selectors as metrics
from backend.apps.metrics.catalog import NAMESPACE, QUEUE, SHARD
from backend.apps.metrics.models import MetricSeries
from backend.apps.namespaces.models import Namespace
from backend.apps.nodes.models import StorageNode
from backend.apps.policies.selectors import CLUSTER, cluster_policy, effective_namespace_policy, effective_node_policy
from storage_engine.policies.policy import NamespacePolicy, resolve_policy


def alert_list() -> QuerySet[Alert]:
    return Alert.objects.select_related("rule", "acknowledged_by")


def is_silenced(alert: Alert, now: datetime | None = None) -> bool:
    """No notifications for the alert now: silenced until a later time."""
    return alert.silenced_until is not None and alert.silenced_until > (now or clock.now())


def alert_status(now: datetime | None = None) -> dict[str, Any]:
    """Whether alerts fire, for the Overview's overall status: ``firing`` while any alert fires (silenced or
    acknowledged ones too: silencing stops notifications, not the condition), else ``ok``; with counts."""
    now = now or clock.now()
    firing = Alert.objects.filter(state=AlertState.FIRING)
    counts = firing.aggregate(
        firing=Count("id"),
        silenced=Count("id", filter=Q(silenced_until__gt=now)),
        acknowledged=Count("id", filter=Q(acknowledged_at__isnull=False)),
        critical=Count("id", filter=Q(severity=Severity.CRITICAL)),
    )
    return {
        "status": "firing" if counts["firing"] else "ok",
        **counts,
        "pending": Alert.objects.filter(state=AlertState.PENDING).count(),
    }


def alert_detail() -> QuerySet[Alert]:
    events = AlertEvent.objects.select_related("actor")
    notifications = Notification.objects.select_related("channel", "event")
    return alert_list().prefetch_related(
        Prefetch("events", queryset=events), Prefetch("notifications", queryset=notifications)
    )


def rule_list() -> QuerySet[AlertRule]:
    return AlertRule.objects.prefetch_related(Prefetch("channels", queryset=Channel.objects.only("id")))


def channel_list() -> QuerySet[Channel]:
    return Channel.objects.all()


def redacted_target(channel: Channel) -> str:
    """A channel's target as non-admins see it: a webhook's or an Alertmanager's URL scheme and host (a path
    and query often carry a token, e.g. Slack's), an email address's domain."""
    if channel.kind in ("webhook", "alertmanager"):
        parts = urlsplit(channel.target)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        try:
            port = parts.port
        except ValueError:
            port = None
        if parts.scheme and host:
            return f"{parts.scheme}://{host}{f':{port}' if port else ''}/…"
        return "…"
    domains = [a.strip().rpartition("@")[2] for a in channel.target.split(",") if a.strip()]
    return ", ".join(f"…@{d}" if d else "…" for d in domains)


def labels_key(labels: dict[str, Any]) -> str:
    return ",".join(f"{k}={labels[k]}" for k in ("node", "namespace", "shard", "queue") if k in labels)


def _level_rows(level: str) -> QuerySet[MetricSeries]:
    rows = metrics.fresh_series()
    if level == SHARD:
        return rows.filter(shard__isnull=False)
    if level == NAMESPACE:
        return rows.filter(shard__isnull=True, node="").exclude(namespace="")
    if level == QUEUE:
        return rows.exclude(queue="")
    return rows.filter(namespace="", queue="").exclude(node="")


@dataclass
class Observation:
    labels: dict[str, Any]
    value: float
    threshold: float | None  # None: the policy leaves it unset; not evaluated


@dataclass
class PolicyCache:
    """Effective policies, each resolved once per evaluation."""

    nodes: dict[str, Any] = field(default_factory=dict)
    namespaces: dict[str, Any] = field(default_factory=dict)
    node_policies: dict[str, Any] = field(default_factory=dict)
    namespace_policies: dict[str, Any] = field(default_factory=dict)
    cluster: Any = None

    def __post_init__(self) -> None:
        self.nodes = {n.name: n for n in StorageNode.objects.all()}
        self.namespaces = {ns.name: ns for ns in Namespace.objects.select_related("node")}

    def node_value(self, node: str | None, name: str) -> Any:
        if node not in self.nodes:
            return None
        if node not in self.node_policies:
            self.node_policies[node] = effective_node_policy(self.nodes[node])
        return getattr(self.node_policies[node], name)

    def namespace_value(self, namespace: str | None, name: str) -> Any:
        if self.cluster is None:
            self.cluster = cluster_policy()
        if namespace is None:  # a node-wide series: the cluster default applies
            key = ""
            if key not in self.namespace_policies:
                self.namespace_policies[key] = resolve_policy(NamespacePolicy, [(CLUSTER, self.cluster.overrides)])[0]
        else:
            key = namespace
            if namespace not in self.namespaces:
                return None
            if key not in self.namespace_policies:
                self.namespace_policies[key] = effective_namespace_policy(self.namespaces[namespace], self.cluster)
        return getattr(self.namespace_policies[key], name)

    def threshold(self, rule: AlertRule, labels: dict[str, Any]) -> float | None:
        if not rule.threshold_policy:
            return rule.threshold
        name = rule.threshold_policy
        if name in NODE_POLICY_FIELDS:
            node = labels.get("node")
            if node is None and labels.get("namespace") in self.namespaces:
                node = self.namespaces[labels["namespace"]].node.name
            value = self.node_value(node, name)
        elif name in NAMESPACE_POLICY_FIELDS:
            value = self.namespace_value(labels.get("namespace"), name)
        else:
            value = None
        return None if value is None else rule.threshold * float(value)


def observations(rule: AlertRule, now_ms: int, policies: PolicyCache) -> list[Observation]:
    """The rule's metric now, per label set within its scope, with the threshold that applies to each.

    The forecast has a value only once the node's disk history is long enough (``metrics.disk_forecast``):
    before that the rule observes nothing, so it cannot fire from a few minutes of samples.
    """
    metric = "disk_used_ratio" if rule.metric == FORECAST else rule.metric
    rows = [
        row
        for level in rule_levels(rule.metric, rule.scope_type)
        for row in _level_rows(level)
        .filter(name=metric, **scope_filter(rule.scope_type, rule.scope))
        .order_by("node", "namespace", "shard", "queue")
    ]
    out = []
    for row in rows:
        value = row.last_value
        if rule.metric == FORECAST:
            value = metrics.forecast_value(row.node, now_ms)
        if value is None:
            continue
        labels = row.labels
        out.append(Observation(labels, float(value), policies.threshold(rule, labels)))
    return out
