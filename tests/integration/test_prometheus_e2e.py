"""Issue 18 end to end: a real Prometheus scrapes a real storage node and the console's /metrics (a live
server), evaluates the rules ``export_alert_rules`` wrote, and an alert fires, then resolves when the rule's
threshold changes in the console (no new export); a real Alertmanager receives the console's own alert
through an Alertmanager channel, and sees it resolve. Scrape and evaluation every second."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from django.core.management import call_command
from rest_framework.authtoken.models import Token

from backend.apps.alerts import delivery, evaluation
from backend.apps.alerts.models import AlertRule, Channel, Notification
from backend.apps.metrics.services import write_points
from storage_engine.api import NewRecord
from storage_engine.node_api.client import NodeClient
from tests.backend.conftest import make_user
from tests.support import promtool
from tests.support.processes import BIN, NodeProc, Proc, free_port, http_ok, spawn, wait_until

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
ALERTMANAGER = shutil.which("prometheus-alertmanager") or "/usr/bin/prometheus-alertmanager"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not (Path(PROMETHEUS).exists() and Path(ALERTMANAGER).exists()),
        reason="prometheus and prometheus-alertmanager missing: make prometheus",
    ),
]


def start(argv: list[str], log: Path, ready: str, env: dict[str, str] | None = None) -> Proc:
    proc = spawn(argv, log, env=env)
    try:
        wait_until(lambda: proc.popen.poll() is None and http_ok(ready), 60, f"{argv[0]} at {ready}")
    except TimeoutError:
        proc.kill()
        raise AssertionError(proc.log()) from None
    return proc


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    config = tmp_path / "alertmanager.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "route": {"receiver": "none", "group_wait": "0s", "group_interval": "1s", "repeat_interval": "1h"},
                "receivers": [{"name": "none"}],
            }
        )
    )
    url = f"http://127.0.0.1:{port}"
    argv = [ALERTMANAGER, f"--config.file={config}", f"--storage.path={tmp_path / 'am-data'}"]
    argv += [f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="]
    proc = start(argv, tmp_path / "alertmanager.log", f"{url}/-/ready")
    yield url
    proc.stop()


@pytest.fixture
def prometheus(tmp_path: Path, node: NodeProc, live_server: Any, alertmanager: str) -> Iterator[Any]:
    """Starts Prometheus on the rules exported now, scraping the node (job lcs-node, its target labelled
    node="node-1") and the console (job lcs-web, with a viewer's token), alerting the Alertmanager."""
    procs: list[Proc] = []

    def run() -> str:
        token = Token.objects.create(user=make_user("prometheus", "viewer")).key
        call_command("export_alert_rules", "-o", str(tmp_path / "rules.yml"))
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(tmp_path / "rules.yml")],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager.removeprefix("http://")]}]}]},
            "scrape_configs": [
                {
                    "job_name": "lcs-node",
                    "authorization": {"credentials": node.token},
                    "static_configs": [{"targets": [node.url.removeprefix("http://")], "labels": {"node": "node-1"}}],
                },
                {
                    "job_name": "lcs-web",
                    "authorization": {"type": "Token", "credentials": token},
                    "static_configs": [{"targets": [live_server.url.removeprefix("http://")]}],
                },
            ],
        }
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        url = f"http://127.0.0.1:{free_port()}"
        argv = [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}"]
        argv += [f"--web.listen-address={url.removeprefix('http://')}"]
        procs.append(start(argv, tmp_path / "prometheus.log", f"{url}/-/ready"))
        return url

    yield run
    for proc in procs:
        proc.stop()


def prometheus_alerts(url: str, name: str) -> list[dict[str, Any]]:
    alerts = httpx.get(f"{url}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
    return [a for a in alerts if a["labels"]["alertname"] == name]


def alertmanager_alerts(url: str, name: str) -> list[dict[str, Any]]:
    alerts = httpx.get(f"{url}/api/v2/alerts", params={"filter": f'alertname="{name}"'}, timeout=5).json()
    return [a for a in alerts if a["status"]["state"] == "active"]


def test_prometheus_fires_the_exported_rule_and_resolves_it(prometheus: Any, node: NodeProc, alertmanager: str):
    AlertRule.objects.update(enabled=False)
    rule = AlertRule.objects.create(
        name="Orders hold many records",
        metric="stored_records",
        scope_type="namespace",
        scope="orders",
        comparator=">",
        threshold=5,
        for_s=1,
        severity="critical",
    )
    url = prometheus()
    with NodeClient(node.url, node.token) as client:
        client.create_namespace("orders", 2)
        client.append("orders", 0, [NewRecord(value=b"x")] * 6)
        client.append("orders", 1, [NewRecord(value=b"y")] * 4)

    def firing() -> list[dict[str, Any]]:
        return [a for a in prometheus_alerts(url, "OrdersHoldManyRecords") if a["state"] == "firing"]

    wait_until(lambda: bool(firing()), 60, "the exported rule to fire in Prometheus")
    (alert,) = firing()
    assert alert["labels"] == {
        "alertname": "OrdersHoldManyRecords",
        "namespace": "orders",
        "rule": str(rule.pk),
        "severity": "critical",
    }
    assert alert["annotations"]["summary"] == "Orders hold many records: stored_records 10 (namespace orders)"
    assert float(alert["value"]) == 10
    # Prometheus hands it to Alertmanager.
    wait_until(lambda: bool(alertmanager_alerts(alertmanager, "OrdersHoldManyRecords")), 30, "Alertmanager")
    # The threshold changes in the console: the web publishes it, Prometheus resolves the alert.
    AlertRule.objects.filter(pk=rule.pk).update(threshold=100)
    wait_until(lambda: not prometheus_alerts(url, "OrdersHoldManyRecords"), 30, "the alert to resolve")


def test_the_console_alerts_a_real_alertmanager(alertmanager: str, settings, live_server: Any):
    settings.CONTROL_PLANE_URL = live_server.url
    settings.OUTGOING_URL_ALLOW = "*, 127.0.0.1"  # a channel reaches the loopback Alertmanager only when named
    AlertRule.objects.update(enabled=False)
    rule = AlertRule.objects.create(
        name="Expired ratio high", metric="expired_ratio", comparator=">", threshold=0.2, for_s=0, severity="warning"
    )
    channel = Channel.objects.create(name="am", kind="alertmanager", target=alertmanager)
    rule.channels.add(channel)

    def evaluate_and_deliver(value: float) -> None:
        now = datetime.now(UTC)
        write_points(int(now.timestamp() * 1000), {("expired_ratio", "", "orders", None, ""): value})
        evaluation.evaluate(now=now)
        for pk in Notification.objects.filter(status="pending").values_list("pk", flat=True):
            delivery.deliver(pk, now=now)

    evaluate_and_deliver(0.5)
    wait_until(lambda: bool(alertmanager_alerts(alertmanager, "ExpiredRatioHigh")), 30, "the console's alert")
    (alert,) = alertmanager_alerts(alertmanager, "ExpiredRatioHigh")
    assert alert["labels"] == {
        "alertname": "ExpiredRatioHigh",
        "namespace": "orders",
        "rule": str(rule.pk),
        "severity": "warning",
    }
    assert alert["annotations"]["summary"].startswith("Expired ratio high: expired_ratio 50.0% > 20.0%")
    assert alert["generatorURL"] == f"{live_server.url}/alerts?state=firing"
    assert delivery.resend_to_alertmanager(channel.pk) == 1  # each evaluation keeps it active there
    evaluate_and_deliver(0.0)
    wait_until(lambda: not alertmanager_alerts(alertmanager, "ExpiredRatioHigh"), 30, "the alert to resolve")
    # A test message shows as an alert of its own.
    assert delivery.send_channel_test(channel=channel, actor=None) == {"delivered": True, "error": ""}
    (test,) = alertmanager_alerts(alertmanager, "TestNotification")
    assert test["labels"]["channel"] == "am"


def _database_url(settings: Any) -> str:
    db = settings.DATABASES["default"]
    if "sqlite" in db["ENGINE"]:
        return f"sqlite:///{db['NAME']}"
    return f"postgresql://{db['USER']}:{db.get('PASSWORD') or ''}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def test_the_web_adds_up_every_gunicorn_worker(tmp_path: Path, settings: Any):
    """Behind gunicorn (gunicorn.conf.py: prometheus_client's multiprocess mode) a scrape counts the requests of
    every worker, whichever answers it: the counters only grow from scrape to scrape."""
    token = Token.objects.create(user=make_user("scraper", "viewer")).key
    port = free_port()
    # Its own VAR_DIR: its control socket and metrics files are not the repository's var/run.
    env = {"APP_ENV": "test", "DATABASE_URL": _database_url(settings), "VAR_DIR": str(tmp_path / "var")}
    argv = [str(BIN / "gunicorn"), "backend.config.wsgi:application", "--workers", "2", "--threads", "2"]
    argv += ["--bind", f"127.0.0.1:{port}"]
    web = start(argv, tmp_path / "gunicorn.log", f"http://127.0.0.1:{port}/livez", env)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(20):
            assert httpx.get(f"{url}/livez", timeout=5).status_code == 200
        seen = []
        for _ in range(8):
            text = httpx.get(f"{url}/metrics", headers={"Authorization": f"Token {token}"}, timeout=10).text
            (line,) = [
                x for x in text.splitlines() if x.startswith('django_http_requests_total_by_method_total{method="GET"}')
            ]
            seen.append(float(line.split()[-1]))
            assert "# TYPE lcs_task_runs gauge" in text
        assert seen == sorted(seen) and seen[0] >= 20, seen
        if promtool.available():
            complaints = promtool.check_metrics(text)
            assert not complaints.strip(), complaints
    finally:
        web.stop()
