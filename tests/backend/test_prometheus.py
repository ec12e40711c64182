"""Issue 18: the web's /metrics carries the control plane's own series only (checked by ``promtool check metrics``),
and ``export_alert_rules`` writes Prometheus rules over the nodes' series (``promtool check rules`` and
``promtool test rules`` on input series)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import yaml
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from backend.apps.alerts.models import Alert, AlertRule, AlertState
from backend.apps.alerts.promql import export as export_rules
from backend.apps.alerts.rules import DEFAULT_RULES, METRICS, scope_errors
from backend.apps.metrics.services import write_points
from backend.apps.namespaces.models import Namespace
from backend.apps.nodes.models import StorageNode
from backend.apps.runs.models import Kind, State, TaskRun
from storage_engine.api import NewRecord
from storage_engine.node_api.client import NodeClient
from tests.backend.conftest import make_user
from tests.support.promtool import check_metrics, check_rules, needs_promtool, run_rule_tests

NOW = datetime(2030, 1, 1, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)
# Series the node publishes on its own /metrics (storage_engine/node/metric_catalog.py): never on the web's.
NODE_NAMES = re.compile(r"^lcs_(shard|namespace|node|subscription|disk)_|^lcs_\w*_up\b|^up\b")


def scrape(client: APIClient) -> str:
    response = client.get("/metrics")
    assert response.status_code == 200, response.content
    return response.content.decode()


@pytest.fixture
def scraper(db) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=make_user('scraper', 'viewer')).key}")
    return client


@pytest.fixture
def console(db, monkeypatch):
    """A node, two namespaces (one with a backlog quota), the collection's node series, task runs, an alert."""
    monkeypatch.setattr("backend.apps.metrics.clock.now", lambda: NOW)
    node = StorageNode.objects.create(
        name="n1", url="http://127.0.0.1:9", policy_overrides={"disk_warning_ratio": 0.95}
    )
    Namespace.objects.create(name="orders", node=node, shards=2, policy_overrides={"backlog_quota_bytes": 1000})
    Namespace.objects.create(name="audit", node=node, shards=1)
    write_points(
        NOW_MS,
        {
            ("stored_bytes", "n1", "orders", 0, ""): 193.0,
            ("expired_ratio", "", "orders", None, ""): 0.25,
            ("disk_used_ratio", "n1", "", None, ""): 0.5,
            ("up", "n1", "", None, ""): 1.0,
            ("delete_rate", "n1", "", None, ""): 3.0,
            ("delete_queue_drops_total", "n1", "", None, ""): 7.0,
        },
    )
    scan = TaskRun.objects.create(
        kind=Kind.EXPIRY_SCAN, namespace=Namespace.objects.get(name="orders"), state=State.RUNNING
    )
    TaskRun.objects.filter(pk=scan.pk).update(started_at=NOW - timedelta(seconds=42))
    sweep = TaskRun.objects.create(kind=Kind.EXPIRY_SCAN, node=node, state=State.SUCCEEDED)
    TaskRun.objects.filter(pk=sweep.pk).update(
        started_at=NOW - timedelta(minutes=30), finished_at=NOW - timedelta(minutes=30) + timedelta(seconds=700)
    )
    rule = AlertRule.objects.get(default_key="expired_ratio")
    Alert.objects.create(
        rule=rule,
        rule_name=rule.name,
        metric=rule.metric,
        labels_key="namespace=orders",
        state=AlertState.FIRING,
        started_at=NOW,
    )
    return node


def test_web_metrics_are_the_control_planes_own(console, scraper):
    text = scrape(scraper)
    names = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    assert len(names) == len(set(names))  # one family per name
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert not [s for s in samples if NODE_NAMES.search(s)]  # no node series, no *_up, no ratios twice
    assert not [s for s in samples if s.startswith("lcs_") and ("per_second" in s or "latency" in s)]  # no rates
    assert "# TYPE lcs_celery_queue_messages gauge" in text
    assert 'lcs_task_runs{kind="expiry_scan",state="running"} 1.0' in text
    assert 'lcs_task_runs{kind="compaction",state="failed"} 0.0' in text
    # A running scan of a namespace, and the last node-wide sweep (it took 700 s).
    assert 'lcs_task_run_duration_seconds{kind="expiry_scan",namespace="orders",node=""} 42.0' in text
    assert 'lcs_task_run_duration_seconds{kind="expiry_scan",namespace="",node="n1"} 700.0' in text
    rules = {r.default_key: r.pk for r in AlertRule.objects.exclude(default_key=None)}
    assert f'lcs_alert_rule_threshold{{namespace="",node="",rule="{rules["expired_ratio"]}"}} 0.2' in text
    # Relative to a namespace policy: per namespace that sets it (audit has no quota: no threshold).
    assert f'lcs_alert_rule_threshold{{namespace="orders",node="",rule="{rules["backlog_bytes"]}"}} 1000.0' in text
    assert f'namespace="audit",node="",rule="{rules["backlog_bytes"]}"' not in text
    # Relative to a disk ratio the node publishes itself: the factor of the node's gauge.
    assert f'lcs_alert_rule_threshold_factor{{policy="disk_warning_ratio",rule="{rules["disk_warning"]}"}} 1.0' in text
    firing = f'rule="{rules["expired_ratio"]}",rule_name="Expired ratio above 20 %",severity="warning",state="firing"'
    assert f"lcs_alerts{{{firing}}} 1.0" in text
    assert "# TYPE django_http_requests_total_by_method_total counter" in text
    assert "# TYPE django_db_execute_total counter" in text
    # A disabled rule publishes no threshold: its exported Prometheus rule matches nothing.
    AlertRule.objects.filter(pk=rules["expired_ratio"]).update(enabled=False)
    assert f'rule="{rules["expired_ratio"]}"}} 0.2' not in scrape(scraper)


@needs_promtool
def test_promtool_accepts_the_web_exposition_without_warnings(console, scraper):
    scrape(scraper)  # request metrics exist once a request went through
    complaints = check_metrics(scrape(scraper))
    assert not complaints.strip(), complaints


def export(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "rules.yml"
    call_command("export_alert_rules", "-o", str(out), *args)
    return yaml.safe_load(out.read_text())


def by_name(document: dict) -> dict[str, dict]:
    return {rule["alert"]: rule for group in document["groups"] for rule in group["rules"]}


def test_export_reads_the_nodes_series_and_the_published_thresholds(console, tmp_path):
    shard = AlertRule.objects.create(
        name="orders shard 0",
        metric="expired_ratio",
        scope_type="shard",
        scope="orders/0",
        comparator=">=",
        threshold=0.5,
        for_s=90,
    )
    rules = by_name(export(tmp_path))
    ids = {r.default_key: r.pk for r in AlertRule.objects.exclude(default_key=None)}
    expired = rules["ExpiredRatioAbove20"]
    assert expired["expr"] == (
        "(sum by (namespace) (lcs_shard_expired_records) / sum by (namespace) (lcs_shard_stored_records))"
        f' > on() group_left max(lcs_alert_rule_threshold{{rule="{ids["expired_ratio"]}"}})'
    )
    assert expired["for"] == "15m" and expired["labels"] == {"severity": "warning", "rule": str(ids["expired_ratio"])}
    assert "{{ $labels.namespace }}" in expired["annotations"]["summary"]
    assert "{{ $value | humanizePercentage }}" in expired["annotations"]["summary"]
    # Scans of one namespace, and the node-wide sweeps (scheduled and due scans): the console's task runs.
    scan = rules["TTLScanLongerThan10Minutes"]["expr"]
    assert 'lcs_task_run_duration_seconds{kind="expiry_scan",namespace!=""}' in scan
    assert 'lcs_task_run_duration_seconds{kind="expiry_scan",node!=""}' in scan
    assert rules["DiskAboveTheWarningWatermark"]["expr"] == (
        "lcs_disk_used_ratio > (lcs_disk_warning_ratio * on() group_left"
        f' max(lcs_alert_rule_threshold_factor{{rule="{ids["disk_warning"]}"}}))'
    )
    assert rules["DiskForecastToReachTheWarningWatermarkWithin24H"]["expr"].startswith(
        "predict_linear(lcs_disk_used_ratio[6h], 86400) >= (lcs_disk_warning_ratio"
    )
    assert rules["BacklogOverItsByteQuota"]["expr"] == (
        "sum by (namespace, subscription) (lcs_subscription_backlog_bytes) > on(namespace) group_left"
        f' max by (namespace) (lcs_alert_rule_threshold{{rule="{ids["backlog_bytes"]}",namespace!=""}})'
    )
    assert rules["OrdersShard0"]["expr"].startswith(
        '(sum by (namespace, shard) (lcs_shard_expired_records{namespace="orders",shard="0"}) /'
    )
    assert rules["OrdersShard0"]["for"] == "90s" and rules["OrdersShard0"]["labels"]["rule"] == str(shard.pk)
    # The node's own rules, whatever the console says.
    assert rules["LcsNodeDown"]["expr"] == 'up{job="lcs-node"} == 0'
    assert rules["LcsDiskFull"]["expr"] == "lcs_disk_full == 1"
    assert rules["LcsShardFailed"]["expr"] == "lcs_shard_failed == 1"
    assert by_name(export(tmp_path, "--node-job", "storage"))["LcsNodeDown"]["expr"] == 'up{job="storage"} == 0'
    # No annotation renders a Go map of labels.
    assert not [r for r in rules.values() if "$labels }}" in str(r["annotations"])]


@needs_promtool
def test_promtool_checks_the_export(console, tmp_path):
    AlertRule.objects.create(
        name="Scan of orders",
        metric="scan_duration_seconds",
        scope_type="namespace",
        scope="orders",
        comparator=">",
        threshold=60,
        for_s=0,
    )
    export(tmp_path, "--all")
    assert "SUCCESS" in check_rules(tmp_path / "rules.yml")


@needs_promtool
def test_promtool_unit_tests_the_exported_rules(console, tmp_path):
    """Input series as a node and the console publish them; the rules fire, hold for ``for`` and resolve."""
    ids = {r.default_key: r.pk for r in AlertRule.objects.exclude(default_key=None)}
    exported = by_name(export(tmp_path))
    node = 'instance="n1:7070",job="lcs-node",node="n1"'
    web = 'instance="web:8000",job="lcs-web"'
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    # 0-4 min fine, then 30 % of orders expired (two shards) until 25 min
                    {
                        "series": f'lcs_shard_expired_records{{{node},namespace="orders",shard="0"}}',
                        "values": "0x4 30x20 0x5",
                    },
                    {"series": f'lcs_shard_expired_records{{{node},namespace="orders",shard="1"}}', "values": "0x30"},
                    {"series": f'lcs_shard_stored_records{{{node},namespace="orders",shard="0"}}', "values": "50x30"},
                    {"series": f'lcs_shard_stored_records{{{node},namespace="orders",shard="1"}}', "values": "50x30"},
                    {
                        "series": f'lcs_alert_rule_threshold{{{web},rule="{ids["expired_ratio"]}",namespace=""}}',
                        "values": "0.2x30",
                    },
                    # disk above 95 % of a 0.9 watermark from 2 min: appends refused
                    {"series": f"lcs_disk_used_ratio{{{node}}}", "values": "0.5 0.5 0.97x28"},
                    {"series": f"lcs_disk_warning_ratio{{{node}}}", "values": "0.9x30"},
                    {"series": f"lcs_disk_full{{{node}}}", "values": "0 0 1x28"},
                    {
                        "series": f'lcs_alert_rule_threshold_factor{{{web},rule="{ids["disk_warning"]}",'
                        'policy="disk_warning_ratio"}',
                        "values": "1x30",
                    },
                    # a node-wide sweep running for 11 min from 3 min (the console's task runs)
                    {
                        "series": f'lcs_task_run_duration_seconds{{{web},kind="expiry_scan",namespace="",node="n1"}}',
                        "values": "0x3 60+60x26",
                    },
                    {
                        "series": f'lcs_alert_rule_threshold{{{web},rule="{ids["scan_duration"]}",node=""}}',
                        "values": "600x30",
                    },
                    {"series": f"up{{{node}}}", "values": "1x5 0x25"},
                    {"series": f'lcs_shard_failed{{{node},namespace="orders",shard="1"}}', "values": "0x30"},
                ],
                "alert_rule_test": [
                    {"eval_time": "4m", "alertname": "ExpiredRatioAbove20", "exp_alerts": []},
                    {"eval_time": "19m", "alertname": "ExpiredRatioAbove20", "exp_alerts": []},  # pending: for 15m
                    {
                        "eval_time": "20m",
                        "alertname": "ExpiredRatioAbove20",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "warning",
                                    "rule": str(ids["expired_ratio"]),
                                    "namespace": "orders",
                                },
                                "exp_annotations": {
                                    "summary": "Expired ratio above 20 %: expired_ratio 30% (namespace orders)",
                                    "description": AlertRule.objects.get(pk=ids["expired_ratio"]).description,
                                },
                            }
                        ],
                    },
                    {"eval_time": "27m", "alertname": "ExpiredRatioAbove20", "exp_alerts": []},  # resolved
                    {
                        "eval_time": "2m",
                        "alertname": "LcsDiskFull",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "critical",
                                    "instance": "n1:7070",
                                    "job": "lcs-node",
                                    "node": "n1",
                                },
                                "exp_annotations": {
                                    "summary": "Disk full on node n1: appends are refused",
                                    "description": exported["LcsDiskFull"]["annotations"]["description"],
                                },
                            }
                        ],
                    },
                    {
                        "eval_time": "2m",
                        "alertname": "DiskAboveTheWarningWatermark",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "critical",
                                    "rule": str(ids["disk_warning"]),
                                    "instance": "n1:7070",
                                    "job": "lcs-node",
                                    "node": "n1",
                                },
                                "exp_annotations": {
                                    "summary": "Disk above the warning watermark: disk_used_ratio 97% (node n1)",
                                    "description": AlertRule.objects.get(pk=ids["disk_warning"]).description,
                                },
                            }
                        ],
                    },
                    {"eval_time": "13m", "alertname": "TTLScanLongerThan10Minutes", "exp_alerts": []},
                    {
                        "eval_time": "14m",
                        "alertname": "TTLScanLongerThan10Minutes",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "warning",
                                    "rule": str(ids["scan_duration"]),
                                    "instance": "web:8000",
                                    "job": "lcs-web",
                                    "kind": "expiry_scan",
                                    "node": "n1",
                                },
                                "exp_annotations": {
                                    "summary": "TTL scan longer than 10 minutes: "
                                    "scan_duration_seconds 11m 0s (node n1)",
                                    "description": AlertRule.objects.get(pk=ids["scan_duration"]).description,
                                },
                            }
                        ],
                    },
                    {
                        "eval_time": "12m",
                        "alertname": "LcsNodeDown",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "critical",
                                    "instance": "n1:7070",
                                    "job": "lcs-node",
                                    "node": "n1",
                                },
                                "exp_annotations": {
                                    "summary": "Storage node n1 is down",
                                    "description": exported["LcsNodeDown"]["annotations"]["description"],
                                },
                            }
                        ],
                    },
                    {"eval_time": "6m", "alertname": "LcsNodeDown", "exp_alerts": []},  # pending: for 1m
                    {"eval_time": "10m", "alertname": "LcsShardFailed", "exp_alerts": []},
                ],
            }
        ],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    run_rule_tests(tmp_path / "tests.yml")


def test_the_export_reads_only_series_the_node_publishes(node):
    """Every node series an exported rule names, for every metric a rule may watch at every scope, is on a real
    node's /metrics (the console's own are on the web's)."""
    with NodeClient(node.url, node.token) as client:
        client.create_namespace("orders", 2)
        client.append("orders", 0, [NewRecord(value=b"x")])
    text = httpx.get(f"{node.url}/metrics", headers={"Authorization": f"Bearer {node.token}"}).text
    published = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    published |= {re.split(r"[{ ]", line)[0] for line in text.splitlines() if line and not line.startswith("#")}
    rules = [
        AlertRule(pk=i, name=r.name, metric=r.metric, comparator=">", threshold=1, threshold_policy=r.threshold_policy)
        for i, r in enumerate(DEFAULT_RULES)
    ]
    for metric in METRICS:
        for scope_type, scope in (("all", ""), ("namespace", "orders"), ("shard", "orders/1"), ("node", "n1")):
            if not scope_errors(metric, scope_type, scope):
                rules.append(
                    AlertRule(
                        pk=len(rules),
                        name=f"r{len(rules)}",
                        metric=metric,
                        scope_type=scope_type,
                        scope=scope,
                        comparator=">",
                        threshold=1,
                    )
                )
    document = export_rules(rules)
    exprs = " ".join(rule["expr"] for group in document["groups"] for rule in group["rules"])
    named = set(re.findall(r"\b(lcs_[a-z_]+)\b", exprs))
    console = {
        "lcs_alert_rule_threshold",
        "lcs_alert_rule_threshold_factor",
        "lcs_task_run_duration_seconds",
        "lcs_celery_queue_messages",
    }
    assert named - console and not (named - console - published), sorted(named - console - published)
