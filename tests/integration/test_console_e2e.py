"""The console in headless Chromium against the real system (node, web, worker, beat):
log in, create a namespace, see a policy refused then saved with its diff, find the
audit entry; produce short-TTL records, watch the expired ratio rise on the Overview
chart, run a scan and a reclaim from the Tasks page and watch the ratio fall to 0;
fill the node's disk quota and see the disk alert fire on the Overview and the Alerts
page. A screenshot of every page lands in docs/screenshots/."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from storage_engine.api import NewRecord
from storage_engine.errors import DiskFullError
from storage_engine.node_api.client import NodeClient
from tests.support import browser
from tests.support.system import ADMIN_PASSWORD, System, running

pytestmark = [pytest.mark.slow, pytest.mark.browser]
PAGES = ["overview", "alerts", "namespaces", "segments", "tasks", "messages", "policies", "nodes", "audit"]
DISK_CAPACITY = 8 << 20  # the node's disk quota: small enough to fill in a second
# Metrics every 2 s and alert evaluation every 2 s, so the charts and alerts follow within seconds.
FAST = {"METRICS_INTERVAL_S": "2", "ALERTS_EVAL_INTERVAL_S": "2", "NODE_DISK_CAPACITY": str(DISK_CAPACITY)}
# The story computes its ground truth from what it produces itself: no demo trickle beside it.
FAST["DEMO_PRODUCER"] = "0"
# Sweeps on the policies' intervals only: due-time sweeps would remove the story's already expired records
# before the chart shows them; here the operator's own scan and reclaim from Tasks do it.
FAST["LIFECYCLE_DEADLINES"] = "0"
# The Overview on the 1 h range (12 s chart steps at a 2 s interval), refreshing every 5 s.
OVERVIEW = "?range=1h&refresh=5"


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    yield from running(tmp_path_factory.mktemp("console"), **FAST)


@pytest.fixture(scope="module")
def page(system: System) -> Iterator[Page]:
    with sync_playwright() as pw:
        chromium = browser.launch(pw)
        tab = chromium.new_page(viewport={"width": 1280, "height": 860})
        tab.goto(system.url)
        tab.get_by_test_id("login-username").fill("admin")
        tab.get_by_test_id("login-password").fill(ADMIN_PASSWORD)
        tab.get_by_test_id("login-submit").click()
        expect(tab.get_by_test_id("current-user")).to_contain_text("admin", timeout=15_000)
        yield tab
        chromium.close()


def shot(page: Page, name: str) -> None:
    browser.SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(browser.SCREENSHOTS / f"{name}.png"), full_page=True)


def test_create_a_namespace_from_the_form(page: Page, system: System):
    page.get_by_test_id("nav-namespaces").click()
    page.get_by_test_id("create-namespace-name").fill("e2e-events")
    page.get_by_test_id("create-namespace-shards").fill("2")
    page.get_by_test_id("create-namespace-submit").click()
    expect(page.get_by_test_id("namespace-row-e2e-events")).to_be_visible(timeout=15_000)
    with NodeClient(system.node_url, system.node_token) as client:
        assert "e2e-events" in [n.name for n in client.list_namespaces()]


def test_policy_error_then_saved_diff_then_audit(page: Page, system: System):
    page.goto(f"{system.url}namespaces/e2e-events?tab=policy")
    for field, value in (("min_compaction_lag_ms", "2h"), ("max_compaction_lag_ms", "1h")):
        page.get_by_test_id(f"policy-field-{field}-override").check()
        infinite = page.get_by_test_id(f"policy-field-{field}-infinite")
        if infinite.count() and infinite.is_checked():
            infinite.uncheck()  # max_compaction_lag_ms is infinite by default
        page.get_by_test_id(f"policy-field-{field}").fill(value)
    expect(page.get_by_test_id("policy-diff")).to_be_visible()
    page.get_by_test_id("policy-save").click()
    expect(page.get_by_test_id("policy-error-min_compaction_lag_ms")).to_contain_text("max_compaction_lag_ms")
    shot(page, "policy-editor-error")

    page.get_by_test_id("policy-field-max_compaction_lag_ms").fill("3h")
    expect(page.get_by_test_id("policy-diff-max_compaction_lag_ms")).to_be_visible()
    shot(page, "policy-editor-diff")
    page.get_by_test_id("policy-save").click()
    expect(page.get_by_test_id("policy-saved")).to_be_visible(timeout=15_000)
    expect(page.get_by_test_id("policy-field-max_compaction_lag_ms-source")).to_contain_text("namespace")

    page.get_by_test_id("nav-audit").click()
    expect(page.get_by_text("policy.namespace.update").first).to_be_visible(timeout=15_000)


def started_run(page: Page, label: str) -> str:
    result = page.get_by_test_id("action-result")
    expect(result).to_contain_text(label, timeout=15_000)
    found = re.search(r"#(\d+)", result.inner_text())
    assert found, result.inner_text()
    return found.group(1)


def test_expired_ratio_rises_on_the_chart_then_falls_after_a_run_from_tasks(page: Page, system: System):
    # Segments roll after a minute of record time, so backfilled records seal a segment of their own.
    page.goto(f"{system.url}namespaces/e2e-events?tab=policy")
    page.get_by_test_id("policy-field-segment_ms-override").check()
    page.get_by_test_id("policy-field-segment_ms").fill("1m")
    page.get_by_test_id("policy-save").click()
    expect(page.get_by_test_id("policy-saved")).to_be_visible(timeout=15_000)
    expect(page.get_by_test_id("policy-pending")).to_have_count(0, timeout=15_000)
    with NodeClient(system.node_url, system.node_token) as client:
        [policy] = [n.policy for n in client.list_namespaces() if n.name == "e2e-events"]
        assert policy.segment_ms == 60_000
        produced = int(time.time() * 1000) - 120_000  # two minutes late, with a one-minute TTL
        short = NewRecord(value=b"short-lived", timestamp=produced, expire_at=produced + 60_000)
        client.append("e2e-events", 0, [short] * 300)
        client.append("e2e-events", 0, [NewRecord(value=b"kept")] * 10)

    page.goto(f"{system.url}{OVERVIEW}")
    latest = page.get_by_test_id("chart-latest-expired_ratio")
    expect(latest).to_have_text(re.compile(r"^latest (?!0%)\d"), timeout=60_000)
    expect(latest).to_contain_text("e2e-events")
    shot(page, "overview-expired-ratio")

    page.get_by_test_id("nav-tasks").click()
    page.get_by_test_id("start-target-namespace").click()
    page.get_by_test_id("start-target").select_option("e2e-events")
    page.get_by_test_id("action-expiry_scan").click()
    scan = started_run(page, "Expiry scan")
    expect(page.get_by_test_id(f"run-state-{scan}")).to_have_text(re.compile("succeeded"), timeout=60_000)
    # The scan cleans the TTL index; reclaim drops the sealed, wholly expired segment.
    page.get_by_test_id("action-reclaim").click()
    reclaim = started_run(page, "Reclaim")
    expect(page.get_by_test_id(f"run-state-{reclaim}")).to_have_text(re.compile("succeeded"), timeout=60_000)
    shot(page, "tasks")

    page.goto(f"{system.url}{OVERVIEW}")
    expect(latest).to_have_text(re.compile(r"^latest 0%"), timeout=60_000)
    with NodeClient(system.node_url, system.node_token) as client:
        [shard] = [s for s in client.stats()["shards"] if (s["namespace"], s["shard"]) == ("e2e-events", 0)]
        assert (shard["log_start_offset"], shard["record_count"], shard["expired_records"]) == (300, 10, 0)
        assert [r.value for r in client.read("e2e-events", 0, 300).records] == [b"kept"] * 10


def test_every_page_renders_and_is_captured(page: Page, system: System):
    for name in PAGES:
        page.get_by_test_id(f"nav-{name}").click()
        page.wait_for_load_state("networkidle")
        expect(page.locator("main")).not_to_contain_text("Something went wrong")
        shot(page, name)
    page.goto(f"{system.url}namespaces/e2e-events")
    expect(page.get_by_test_id("namespace-title")).to_contain_text("e2e-events")
    shot(page, "namespace-detail")


def test_a_disk_alert_fires_when_the_node_quota_fills(page: Page, system: System):
    chunk = [NewRecord(value=os.urandom(64 * 1024))] * 8  # 512 KiB a batch
    with NodeClient(system.node_url, system.node_token) as client:
        for _ in range(DISK_CAPACITY // (512 * 1024) + 4):
            try:
                client.append("e2e-events", 1, chunk)
            except DiskFullError:
                break
        else:
            pytest.fail("the node never refused a write although its quota is full")
        assert client.stats()["counters"]["disk_used_ratio"] > 0.9

    page.goto(f"{system.url}{OVERVIEW}")
    expect(page.get_by_test_id("overview-alerts")).to_contain_text("Disk above the warning watermark", timeout=60_000)
    expect(page.get_by_test_id("disk-node-1")).to_have_attribute("data-level", "warning", timeout=30_000)
    disk_chart = page.get_by_test_id("chart-latest-disk_used_ratio")
    expect(disk_chart).to_have_text(re.compile(r"^latest (9\d|100)"), timeout=30_000)
    shot(page, "overview-disk-alert")

    page.get_by_test_id("nav-alerts").click()
    row = page.get_by_test_id("alerts-table").locator("tr", has_text="Disk above the warning watermark")
    expect(row).to_contain_text("critical", timeout=15_000)
    shot(page, "alerts")  # now with the firing alert
