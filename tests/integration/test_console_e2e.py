"""The console in headless Chromium against the real system (node, web, worker, beat):
log in, create a namespace, see a policy refused then saved with its diff, find the
audit entry, run an expiry scan from the UI and watch its run succeed; a screenshot
of every page lands in docs/screenshots/."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from storage_engine.api import NewRecord
from storage_engine.client import NodeClient
from tests.support import browser
from tests.support.system import ADMIN_PASSWORD, System, launch

pytestmark = [pytest.mark.slow, pytest.mark.browser]
PAGES = ["overview", "alerts", "namespaces", "segments", "tasks", "messages", "policies", "nodes", "audit"]


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    try:
        running = launch(tmp_path_factory.mktemp("console"))
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield running
    running.proc.kill_group()


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


def test_run_an_expiry_scan_from_the_console(page: Page, system: System):
    with NodeClient(system.node_url, system.node_token) as client:
        client.append("e2e-events", 0, [NewRecord(value=b"short-lived", expire_at=1)] * 300)
        client.append("e2e-events", 0, [NewRecord(value=b"kept")] * 10)
    page.goto(f"{system.url}namespaces/e2e-events?tab=actions")
    page.get_by_test_id("action-expiry_scan").click()
    expect(page.get_by_test_id("action-result")).to_be_visible(timeout=15_000)
    page.get_by_test_id("nav-tasks").click()
    row = page.locator("[data-testid^='run-state-']").first
    expect(row).to_have_text(re.compile("succeeded"), timeout=60_000)
    shot(page, "tasks")
    with NodeClient(system.node_url, system.node_token) as client:
        assert [r.value for r in client.read("e2e-events", 0, 0).records] == [b"kept"] * 10


def test_every_page_renders_and_is_captured(page: Page, system: System):
    for name in PAGES:
        page.get_by_test_id(f"nav-{name}").click()
        page.wait_for_load_state("networkidle")
        expect(page.locator("main")).not_to_contain_text("Something went wrong")
        shot(page, name)
    page.goto(f"{system.url}namespaces/e2e-events")
    expect(page.get_by_test_id("namespace-title")).to_contain_text("e2e-events")
    shot(page, "namespace-detail")
