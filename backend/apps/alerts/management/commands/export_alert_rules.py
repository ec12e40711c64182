"""Write the enabled alert rules as a Prometheus rules file (for teams that alert through Alertmanager).

Metrics map to the names of ``GET /metrics``. A policy-relative threshold
becomes one comparison per node or namespace with its effective value now
(joined with ``or``); re-export after policy changes. The disk forecast maps
to ``predict_linear`` over the last 6 h, 24 h ahead.
"""

from __future__ import annotations

from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandParser

from backend.apps.alerts.models import AlertRule
from backend.apps.alerts.rules import FORECAST, NODE_POLICY_FIELDS, rule_levels, scope_filter
from backend.apps.alerts.selectors import PolicyCache
from backend.apps.metrics.catalog import SERIES
from backend.apps.metrics.selectors import FORECAST_HORIZON_S, FORECAST_WINDOW_S, escape_label

GROUP = "lcs-alerts"


def _duration(seconds: int) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _selector(name: str, labels: dict[str, Any]) -> str:
    if not labels:
        return name
    inner = ",".join(f'{k}="{escape_label(str(v))}"' for k, v in labels.items())
    return f"{name}{{{inner}}}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def rule_expr(rule: AlertRule, policies: PolicyCache) -> str | None:
    """The PromQL expression of one rule, or ``None`` when no threshold applies anywhere.

    A rule that watches more than one level of series (``rules.rule_levels``: the TTL scan's namespace
    scans and node-wide sweeps) is the ``or`` of one expression per level."""
    terms = [t for level in rule_levels(rule.metric, rule.scope_type) for t in _level_terms(rule, level, policies)]
    return " or ".join(f"({t})" for t in terms) if len(terms) > 1 else (terms[0] if terms else None)


def _level_terms(rule: AlertRule, level: str, policies: PolicyCache) -> list[str]:
    """One comparison per threshold that applies, on the series of ``level``."""
    metric = "disk_used_ratio" if rule.metric == FORECAST else rule.metric
    prom = SERIES[metric].prom_name(level)
    pinned = scope_filter(rule.scope_type, rule.scope)

    def term(labels: dict[str, Any], threshold: float) -> str:
        selector = _selector(prom, labels)
        if rule.metric == FORECAST:
            selector = f"predict_linear({selector}[{_duration(FORECAST_WINDOW_S)}], {FORECAST_HORIZON_S})"
        return f"{selector} {rule.comparator} {_number(threshold)}"

    if not rule.threshold_policy:
        return [term(pinned, rule.threshold)]
    terms = []
    if rule.threshold_policy in NODE_POLICY_FIELDS:
        nodes = [pinned["node"]] if "node" in pinned else sorted(policies.nodes)
        if level in ("node", "shard"):
            for node in nodes:
                threshold = policies.threshold(rule, {"node": node})
                if threshold is not None:
                    terms.append(term({**pinned, "node": node}, threshold))
        else:  # per namespace: the node that hosts it
            for ns in [pinned["namespace"]] if "namespace" in pinned else sorted(policies.namespaces):
                threshold = policies.threshold(rule, {"namespace": ns})
                if threshold is not None:
                    terms.append(term({**pinned, "namespace": ns}, threshold))
    elif level in ("node", "queue"):  # a namespace policy field on a node-wide series: the cluster default
        threshold = policies.threshold(rule, {})
        if threshold is not None:
            terms.append(term(pinned, threshold))
    else:
        for ns in [pinned["namespace"]] if "namespace" in pinned else sorted(policies.namespaces):
            threshold = policies.threshold(rule, {"namespace": ns})
            if threshold is not None:
                terms.append(term({**pinned, "namespace": ns}, threshold))
    return terms


def export(rules: list[AlertRule]) -> tuple[dict[str, Any], list[str]]:
    policies = PolicyCache()
    out, skipped = [], []
    for rule in rules:
        expr = rule_expr(rule, policies)
        if expr is None:
            skipped.append(rule.name)
            continue
        out.append(
            {
                "alert": "".join(part.capitalize() for part in _words(rule.name)) or f"Rule{rule.pk}",
                "expr": expr,
                "for": _duration(rule.for_s),
                "labels": {"severity": rule.severity, "lcs_rule": rule.name},
                "annotations": {
                    "summary": f"{rule.name}: {{{{ $labels }}}} = {{{{ $value }}}}",
                    "description": rule.description or f"{rule.metric} {rule.comparator} threshold",
                },
            }
        )
    return {"groups": [{"name": GROUP, "rules": out}]}, skipped


def _words(name: str) -> list[str]:
    return "".join(c if c.isalnum() else " " for c in name).split()


class Command(BaseCommand):
    help = "Write the enabled alert rules as a Prometheus rules YAML file (metrics named as in GET /metrics)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("-o", "--output", default="-", help="file to write (default: standard output)")
        parser.add_argument("--all", action="store_true", help="include disabled rules")

    def handle(self, *args: Any, **options: Any) -> None:
        rules = AlertRule.objects.order_by("name")
        if not options["all"]:
            rules = rules.filter(enabled=True)
        document, skipped = export(list(rules))
        text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
        if options["output"] == "-":
            self.stdout.write(text, ending="")
        else:
            with open(options["output"], "w", encoding="utf-8") as handle:
                handle.write(text)
            self.stdout.write(f"wrote {len(document['groups'][0]['rules'])} rules to {options['output']}")
        for name in skipped:
            self.stderr.write(f"skipped {name!r}: its policy threshold is unset everywhere")
