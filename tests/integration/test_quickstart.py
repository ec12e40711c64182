"""`make up` end to end: the launcher brings up node, web, worker and beat on
embedded defaults (SQLite, local data dir) with the Redis broker; /api/health
turns all green; the UI shows it in Chromium; Ctrl-C stops every process."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from backend.launcher import choose_broker, redis_answers
from tests.support import browser
from tests.support.processes import free_port, wait_until
from tests.support.services import port_open
from tests.support.system import ADMIN_PASSWORD, System, health, launch

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    try:
        running = launch(tmp_path_factory.mktemp("quickstart"))
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield running
    running.proc.kill_group()


def test_health_reports_every_component_green(system: System):
    body = health(system.url)
    assert body["status"] == "ok"
    assert {name for name, c in body["components"].items() if c["ok"]} == {
        "database",
        "broker",
        "node",
        "worker",
        "beat",
    }
    assert "redis" in body["components"]["broker"]["detail"]
    assert "LOGIN username=admin" in system.proc.log()


def test_the_node_takes_the_generated_metrics_token_for_metrics_only(system: System):
    """A Prometheus scraper of `make up`'s node uses var/node_metrics_token: /metrics only."""
    token = (system.var_dir / "node_metrics_token").read_text().strip()
    assert token and token != system.node_token
    assert f"scrape-only token in {system.var_dir / 'node_metrics_token'}" in system.proc.log()
    assert token not in system.proc.log()  # the path is printed, never the token
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=system.node_url, timeout=5) as node:
        metrics = node.get("/metrics", headers=auth)
        assert metrics.status_code == 200 and "lcs_" in metrics.text
        assert node.get("/v1/namespaces", headers=auth).status_code == 403
        assert node.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_demo_namespaces_reach_the_node(system: System):
    with httpx.Client(base_url=system.url, timeout=5) as client:
        csrf = client.get("api/auth/csrf").json()["csrftoken"]
        client.headers["X-CSRFToken"] = csrf
        assert client.post("api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}).status_code == 200

        rows: list[dict] = []

        def all_synced() -> bool:
            rows[:] = client.get("api/namespaces/").json()["results"]
            return bool(rows) and all(r["sync_state"] == "synced" for r in rows)

        try:
            wait_until(all_synced, 90, "demo namespaces pushed to the node")
        except TimeoutError:
            pytest.fail(
                f"not synced: {[(r['name'], r['sync_state'], r['sync_error']) for r in rows]}\n"
                f"{system.proc.log()[-4000:]}"
            )
        names = {r["name"] for r in client.get("api/namespaces/").json()["results"]}
        assert {"orders", "payments.events"} <= names

        # The demo producer fills them from the first minute, with a subscription that has a backlog.
        summary: dict = {}

        def demo_data() -> bool:
            summary.update(client.get("api/namespaces/orders/summary").json())
            return summary.get("stored_records", 0) > 0 and (summary.get("backlog_messages") or 0) > 0

        try:
            wait_until(demo_data, 90, "demo data in orders")
        except TimeoutError:
            pytest.fail(f"no demo data: {summary}\n{system.proc.log()[-4000:]}")
        subs = client.get("api/namespaces/orders/subscriptions").json()["results"]
        assert [s["name"] for s in subs] == ["billing"]


def test_ui_shows_health_and_namespaces_in_chromium(system: System):
    with sync_playwright() as pw:
        chromium = browser.launch(pw)
        page = chromium.new_page(viewport={"width": 1280, "height": 800})
        page.goto(system.url)
        page.get_by_test_id("login-username").fill("admin")
        page.get_by_test_id("login-password").fill(ADMIN_PASSWORD)
        page.get_by_test_id("login-submit").click()
        expect(page.get_by_test_id("health-status")).to_contain_text("ok", timeout=15_000)
        for component in ("database", "broker", "node", "worker", "beat"):
            expect(page.get_by_test_id(f"health-{component}")).to_have_attribute("data-ok", "true")
        browser.SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(browser.SCREENSHOTS / "overview-health.png"), full_page=True)
        page.goto(f"{system.url}namespaces")
        expect(page.get_by_test_id("namespace-row-orders")).to_be_visible(timeout=15_000)
        page.screenshot(path=str(browser.SCREENSHOTS / "namespaces.png"), full_page=True)
        chromium.close()


def test_ctrl_c_stops_every_process(system: System):
    assert system.proc.popen.poll() is None
    os.killpg(system.proc.popen.pid, signal.SIGINT)
    system.proc.popen.wait(60)
    wait_until(lambda: not port_open("127.0.0.1", system.node_port), 30, "the node port to close")
    log = system.proc.log()
    for name in ("node", "web", "worker", "beat"):
        assert f"{name}.1" in log, f"{name} never started"
    assert not httpx_alive(system.url)


def httpx_alive(url: str) -> bool:
    try:
        httpx.get(url, timeout=1)
        return True
    except httpx.HTTPError:
        return False


def test_broker_choice(tmp_path: Path):
    assert choose_broker({"CELERY_BROKER_URL": "redis://x:1/2", "REDIS_URL": "redis://y"}) == "redis://x:1/2"
    assert choose_broker({"REDIS_URL": "redis://y:6379/1"}) == "redis://y:6379/1"
    assert choose_broker({}, probe=lambda: True) == "redis://127.0.0.1:6379/0"
    assert choose_broker({}, probe=lambda: False) == "filesystem://"
    assert redis_answers("127.0.0.1", free_port()) is False
    assert redis_answers() is True  # the suite's real Redis
