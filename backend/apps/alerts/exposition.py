"""The alerts' series on the console's ``/metrics`` (a prometheus_client collector, computed at each scrape).

- ``lcs_alerts{rule, rule_name, severity, state}``: open alerts of each rule, pending and firing (0 included);
- ``lcs_alert_rule_threshold{rule, namespace, node}``: the threshold each enabled rule compares with, as the
  console evaluates it (absolute, or the policy value times the rule's factor, per namespace or node);
- ``lcs_alert_rule_threshold_factor{rule, policy}``: for a rule relative to a node policy field the node
  publishes itself (its disk ratios), the factor of the node's gauge.

The exported Prometheus rules (``promql.py``) compare the nodes' series with these, so a threshold, a policy or
a rule's enabled state changes without a new export. ``rule`` is the rule's id (``/api/alert-rules/<id>/``).
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from backend.apps.alerts.models import OPEN_STATES, Alert, AlertRule
from backend.apps.alerts.promql import (
    CLUSTER,
    FACTOR,
    FIXED,
    NAMESPACE_JOIN,
    NODE_GAUGE,
    NODE_JOIN,
    THRESHOLD,
    threshold_join,
)
from backend.apps.alerts.rules import rule_levels, scope_filter
from backend.apps.alerts.selectors import PolicyCache

ALERTS_HELP = "Open alerts of each console alert rule, by state (pending, firing)."
THRESHOLD_HELP = (
    "The threshold an enabled alert rule compares with: absolute, or its policy field's value times the rule's "
    "factor, per namespace (namespace policies) or node (node policies); namespace and node empty when one "
    "value applies everywhere."
)
FACTOR_HELP = (
    "For an enabled alert rule relative to a node policy field the node publishes (lcs_disk_*_ratio), the factor "
    "the node's gauge is multiplied by to give the threshold."
)


class AlertCollector(Collector):
    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("lcs_alerts", ALERTS_HELP, labels=["rule", "rule_name", "severity", "state"])
        yield GaugeMetricFamily(THRESHOLD, THRESHOLD_HELP, labels=["rule", "namespace", "node"])
        yield GaugeMetricFamily(FACTOR, FACTOR_HELP, labels=["rule", "policy"])

    def collect(self) -> Iterator[Metric]:
        rules = list(AlertRule.objects.order_by("pk"))
        yield _alerts(rules)
        thresholds = GaugeMetricFamily(THRESHOLD, THRESHOLD_HELP, labels=["rule", "namespace", "node"])
        factors = GaugeMetricFamily(FACTOR, FACTOR_HELP, labels=["rule", "policy"])
        policies = PolicyCache()
        for rule in rules:
            if not rule.enabled:
                continue  # its exported rule matches nothing while it is off
            for (namespace, node), value in sorted(rule_thresholds(rule, policies).items()):
                thresholds.add_metric([str(rule.pk), namespace, node], value)
            if any(threshold_join(rule, level) == NODE_GAUGE for level in rule_levels(rule.metric, rule.scope_type)):
                factors.add_metric([str(rule.pk), rule.threshold_policy], rule.threshold)
        yield thresholds
        yield factors


def _alerts(rules: list[AlertRule]) -> GaugeMetricFamily:
    family = GaugeMetricFamily("lcs_alerts", ALERTS_HELP, labels=["rule", "rule_name", "severity", "state"])
    counts: dict[tuple[str, str, str, str], int] = {}
    for rule in rules:
        if rule.enabled:  # every enabled rule, 0 included
            for state in OPEN_STATES:
                counts[(str(rule.pk), rule.name, str(rule.severity), str(state))] = 0
    rows = Alert.objects.filter(state__in=OPEN_STATES).values("rule_id", "rule_name", "severity", "state")
    for row in rows.annotate(n=Count("id")):
        key = (str(row["rule_id"] or ""), row["rule_name"], row["severity"], row["state"])
        counts[key] = counts.get(key, 0) + row["n"]
    for labels, value in sorted(counts.items()):
        family.add_metric(list(labels), value)
    return family


def rule_thresholds(rule: AlertRule, policies: PolicyCache) -> dict[tuple[str, str], float]:
    """(namespace, node) → the threshold of ``rule`` there, for each join its exported expression makes."""
    out: dict[tuple[str, str], float] = {}
    pinned = scope_filter(rule.scope_type, rule.scope)
    for level in rule_levels(rule.metric, rule.scope_type):
        join = threshold_join(rule, level)
        if join == FIXED:
            out[("", "")] = rule.threshold
        elif join == CLUSTER:
            value = policies.threshold(rule, {})
            if value is not None:
                out[("", "")] = value
        elif join == NAMESPACE_JOIN:
            names = [pinned["namespace"]] if "namespace" in pinned else sorted(policies.namespaces)
            for namespace in names:
                value = policies.threshold(rule, {"namespace": namespace})
                if value is not None:
                    out[(namespace, "")] = value
        elif join == NODE_JOIN:
            for node in [pinned["node"]] if "node" in pinned else sorted(policies.nodes):
                value = policies.threshold(rule, {"node": node})
                if value is not None:
                    out[("", node)] = value
    return out
