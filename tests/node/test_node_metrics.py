"""The node's ``/metrics`` (issue 18): a Prometheus exposition that ``promtool`` accepts without a
warning, every engine counter from 0, histograms that move, and a metrics token that scrapes but
cannot do anything else. ``docs/metrics.md`` lists exactly what a node publishes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from storage_engine import open_engine
from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.config import Durability, EngineConfig
from storage_engine.node.app import build_app
from storage_engine.node.metric_catalog import ENGINE_COUNTERS, metric_name
from storage_engine.node.server import parse_args
from storage_engine.node_api.client import NodeClient
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.version import package_version
from tests.support.processes import start_node
from tests.support.promtool import check_metrics, require_promtool

ROOT = Path(__file__).resolve().parents[2]
METRICS_TOKEN = "scrape-only-token"


def families(text: str) -> dict[str, object]:
    """Family name → family, as a scraper parses the text format."""
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(text: str, sample: str, **labels: str) -> float:
    """The value of one sample (``name``, ``name_bucket``…) with exactly these labels."""
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == sample and s.labels == labels:
                return float(s.value)
    raise AssertionError(f"no sample {sample}{labels}")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[StorageAdapter]:
    config = EngineConfig(data_dir=tmp_path / "data", durability=Durability.NONE, lifecycle_worker=False)
    eng = open_engine(config, clock=ManualClock())
    yield eng
    eng.close()


@pytest.fixture
def http(engine: StorageAdapter) -> Iterator[TestClient]:
    with TestClient(build_app(engine, token=None, clock=ManualClock())) as client:
        yield client


def test_promtool_has_nothing_to_say_about_a_real_node(tmp_path: Path) -> None:
    """The exposition of a node that has served appends, reads and a subscription, scraped with the
    metrics token, passes ``promtool check metrics`` without a single warning."""
    require_promtool()
    node = start_node(tmp_path / "node", adapter="segment", extra=["--metrics-token", METRICS_TOKEN])
    try:
        with NodeClient(node.url, node.token) as client:
            client.create_namespace("orders", 2, NamespacePolicy(retention_ms=None))
            client.append("orders", 0, [NewRecord(b"v", key=b"k")])
            client.read("orders", 0, 0)
            client.read_key("orders", 0, "k")
            client.create_subscription("orders", "billing")
        scrape = httpx.get(f"{node.url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    finally:
        node.stop()
    assert scrape.status_code == 200 and scrape.headers["content-type"].startswith("text/plain; version=0.0.4")
    complaints = check_metrics(scrape.text)
    assert complaints == "", complaints
    found = families(scrape.text)
    assert (
        value(scrape.text, "lcs_subscription_backlog_messages", namespace="orders", subscription="billing", shard="0")
        == 1
    )
    assert value(scrape.text, "lcs_node_build_info", version=package_version(), adapter="segment") == 1
    assert not any(name.endswith("_created") for name in found)  # the node turns created series off
    assert "process_cpu_seconds" in found and "process_resident_memory_bytes" in found


def test_a_fresh_node_publishes_every_counter_at_zero(http: TestClient) -> None:
    text = http.get("/metrics").text
    found = families(text)
    for key in ENGINE_COUNTERS:
        family = found.get(metric_name(key).removesuffix("_total"))
        assert family is not None and family.type == "counter", key
        assert value(text, metric_name(key)) == 0, key
    for name in ("lcs_disk_warning_ratio", "lcs_disk_max_used_ratio", "lcs_disk_clean_forcibly_ratio"):
        assert found[name].type == "gauge"
    assert value(text, "lcs_disk_warning_ratio") == 0.9 and value(text, "lcs_disk_full") == 0
    assert value(text, "lcs_namespaces") == 0
    assert "lcs_ttl_scan_last_delete_rate_per_second" not in text  # a rate is Prometheus's to compute


def test_histograms_move_after_appends_and_reads(http: TestClient) -> None:
    http.post("/v1/namespaces", json={"name": "m", "shards": 1})
    before = http.get("/metrics").text
    assert value(before, "lcs_append_duration_seconds_count") == 0
    assert value(before, "lcs_read_duration_seconds_count", operation="fetch") == 0
    for i in range(3):
        assert http.post("/v1/namespaces/m/shards/0/records", json={"records": [{"value_text": f"v{i}"}]}).is_success
    assert http.get("/v1/namespaces/m/shards/0/records").is_success
    assert http.get("/v1/namespaces/m/shards/0/tags/t").is_success
    after = http.get("/metrics").text
    assert value(after, "lcs_append_duration_seconds_count") == 3
    assert value(after, "lcs_append_duration_seconds_bucket", le="+Inf") == 3
    assert value(after, "lcs_read_duration_seconds_count", operation="fetch") == 1
    assert value(after, "lcs_read_duration_seconds_count", operation="tag") == 1
    assert value(after, "lcs_appended_records_total") == 3
    route = "/v1/namespaces/{ns}/shards/{shard}/records"  # the template, never the raw path
    assert value(after, "lcs_node_http_requests_total", route=route, method="POST", status="200") == 3
    assert value(after, "lcs_node_http_request_duration_seconds_count", route=route, method="GET", status="200") == 1
    assert "/v1/namespaces/m/" not in after
    http.get("/no/such/route")
    assert (
        value(http.get("/metrics").text, "lcs_node_http_requests_total", route="unmatched", method="GET", status="404")
        == 1
    )
    assert http.get("/v1/stats").json()["http"]["produce_shard"]["requests"] == 3  # the control plane's view


def test_the_metrics_token_scrapes_but_cannot_do_anything_else(tmp_path: Path) -> None:
    node = start_node(tmp_path / "node", adapter="segment", extra=["--metrics-token", METRICS_TOKEN])
    try:
        scraper = {"Authorization": f"Bearer {METRICS_TOKEN}"}
        assert httpx.get(f"{node.url}/metrics", headers=scraper).status_code == 200
        assert httpx.get(f"{node.url}/metrics", headers={"Authorization": f"Bearer {node.token}"}).status_code == 200
        for method, path in [
            ("POST", "/v1/namespaces"),
            ("GET", "/v1/namespaces"),
            ("GET", "/v1/stats"),
            ("PUT", "/v1/node/policy"),
            ("DELETE", "/v1/namespaces/orders"),
            ("POST", "/metrics"),
        ]:
            refused = httpx.request(method, f"{node.url}{path}", headers=scraper, json={"name": "x", "shards": 1})
            assert refused.status_code == 403, (method, path, refused.text)
            assert refused.headers["content-type"] == "application/problem+json"
            assert refused.json()["code"] == "forbidden" and refused.json()["status"] == 403
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": METRICS_TOKEN}):
            refused = httpx.get(f"{node.url}/metrics", headers=headers)
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
            assert refused.json()["code"] == "unauthorized"
        with NodeClient(node.url, node.token) as client:
            assert client.list_namespaces() == []  # the scraper created nothing
    finally:
        node.stop()


def test_the_metrics_token_reads_its_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_METRICS_TOKEN", "from-env")
    assert parse_args([]).metrics_token == "from-env"
    assert parse_args(["--metrics-token", "flag"]).metrics_token == "flag"  # the flag wins


def test_docs_list_every_metric_the_node_publishes(http: TestClient, engine: StorageAdapter) -> None:
    """``docs/metrics.md`` (its node section) names every family a node publishes, and no other."""
    http.post("/v1/namespaces", json={"name": "m", "shards": 1})
    http.post("/v1/namespaces/m/subscriptions", json={"name": "s"})
    engine.expire_scan(None, manual=True)  # the last scan's gauges exist once a scan ran
    text = http.get("/metrics").text
    published = {
        f.name + ("_total" if f.type == "counter" else "")
        for f in text_string_to_metric_families(text)
        if f.name.startswith("lcs_") and not f.name.endswith("_created")
    }
    docs = (ROOT / "docs" / "metrics.md").read_text()
    node_section = docs.split("## Node", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`(lcs_[a-z0-9_]+)`", node_section))
    assert published - documented == set(), "published but not documented"
    listed = {name for name in documented if re.search(rf"^\| `{name}`", node_section, re.M)}
    assert listed - published == set(), "documented in the table but not published"
