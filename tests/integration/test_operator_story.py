"""An operator's day, end to end (issue 16): headless Chromium against the real node, web, worker
and beat, a scripted producer and consumer, and a ground truth the test counts itself.

The day: create three namespaces (``story-ttl`` with a short namespace TTL, ``story-compacted``
compacted, ``story-events`` with the subscription ``billing``); a bulk load fills the node's disk
quota and the disk alert fires; the operator sets the bulk namespace's retention to 0, the node's
retention sweep frees the disk and the alert resolves; the producer writes a known mix (keys, tags,
explicit TTLs, old timestamps, tombstones) and goes idle; the explicit TTLs pass; the operator runs a
scan and a reclaim; the idle TTL namespace empties itself with no one asking (deadline-driven sweeps,
``LIFECYCLE_DEADLINES=1``); the operator compacts; a consumer acknowledges; a viewer looks around and
cannot change anything; the operator dry-runs a reclaim; at the end of the day the operator deletes a
namespace.

After each step every page that shows a figure (Overview cards, Namespaces table, each namespace's
summary and shard table, Segments, Subscriptions, Tasks) is read and compared with
:class:`tests.support.story.Cluster`, which knows every record the story wrote and applies DESIGN §3
by hand; sizes, which the story does not predict to the byte, must agree from page to page. A
screenshot of each step lands in docs/screenshots/story-<NN>-<step>.png.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from storage_engine.api import NewRecord
from storage_engine.errors import DiskFullError
from storage_engine.node_api.client import NodeClient
from tests.support import browser
from tests.support.story import (
    Cluster,
    NamespaceModel,
    api,
    manage,
    now_ms,
    read_namespace_summary,
    read_namespaces,
    read_overview,
    read_run_counts,
    read_segments,
    read_subscription,
    settle,
    shot,
    sizes_add_up,
)
from tests.support.system import ADMIN_PASSWORD, System, running

pytestmark = [pytest.mark.slow, pytest.mark.browser]

DISK_CAPACITY = 8 << 20  # the node's disk quota: a bulk load fills it in a second
ENV = {
    "METRICS_INTERVAL_S": "2",  # figures follow the node every 2 s
    "ALERTS_EVAL_INTERVAL_S": "2",
    "NODE_DISK_CAPACITY": str(DISK_CAPACITY),
    "DEMO_PRODUCER": "0",  # the story's producer is the only one
    "LIFECYCLE_DEADLINES": "1",  # sweeps at the node's due times: whole expired segments leave on their own
}
MINUTE = 60_000
EXP_S = 25  # explicit TTL (expire_at) of story-events' short-lived orders
TTL_S = 75  # story-ttl's namespace TTL; story-events' refunds carry expire_at at the same moment
SEGMENT_MS = 10 * MINUTE  # story-events and story-compacted roll after 10 minutes of record time
OLD_MS = 20 * MINUTE  # "old" producer timestamps: backfilled data, a segment of its own
SUB = "billing"
OVERVIEW = "?range=1h&refresh=5"  # the Overview on the 1 h range, refreshing every 5 s
PAGES = ["overview", "alerts", "namespaces", "segments", "tasks", "messages", "policies", "nodes", "audit"]
NS_TABS = ["overview", "policy", "segments", "subscriptions", "produce", "runs", "report", "actions"]
VIEWER, VIEWER_PASSWORD = "story-viewer", "viewer-pw-4821"
# Controls that change something; a viewer must find none of them enabled.
WRITE_CONTROLS = [
    r"^action-",
    r"^add-node-",
    r"^alert-(ack|silence|unsilence)-",
    r"^channel-(save|delete|edit)",
    r"^confirm-submit$",
    r"^create-namespace-",
    r"^cursor-",
    r"^namespace-(delete|sync)$",
    r"^policy-(save|discard)$",
    r"^policy-field-",
    r"^produce-",
    r"^report-run$",
    r"^rule-(new|save|edit|delete)",
    r"^run-(detail-)?cancel",
    r"^spark-job-submit$",
    r"^start-target",
    r"^subscription-(create|cursor|delete)",
]


@dataclass
class Day:
    """The story's state: the ground truth and the times it hinges on."""

    model: Cluster
    produced_at: int = 0  # T: the producer's burst
    runs: dict[str, str] = field(default_factory=dict)

    @property
    def orders_expire(self) -> int:
        return self.produced_at + EXP_S * 1000

    @property
    def ttl_expires(self) -> int:
        return self.produced_at + TTL_S * 1000


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    yield from running(tmp_path_factory.mktemp("story"), **ENV)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with sync_playwright() as pw:
        launched = browser.launch(pw)
        yield launched
        launched.close()


def log_in(chromium: Browser, system: System, username: str, password: str) -> Page:
    tab = chromium.new_context(viewport={"width": 1280, "height": 900}).new_page()
    tab.goto(system.url)
    tab.get_by_test_id("login-username").fill(username)
    tab.get_by_test_id("login-password").fill(password)
    tab.get_by_test_id("login-submit").click()
    expect(tab.get_by_test_id("current-user")).to_contain_text(username, timeout=15_000)
    return tab


@pytest.fixture(scope="module")
def page(chromium: Browser, system: System) -> Page:
    return log_in(chromium, system, "admin", ADMIN_PASSWORD)


@pytest.fixture(scope="module")
def day() -> Day:
    return Day(
        Cluster(
            NamespaceModel("story-ttl", 2, ttl_ms=TTL_S * 1000),
            NamespaceModel("story-events", 2, segment_ms=SEGMENT_MS),
            NamespaceModel("story-compacted", 1, segment_ms=SEGMENT_MS, compacted=True),
        )
    )


# -- the figures on every page, against the ground truth --------------------------------------------------------
SHARD_KEYS = ("log_start", "end", "records", "live", "expired", "expired_pct", "segments", "backlog")
SEGMENT_KEYS = ("shard", "base", "state", "records", "live", "expired_pct")


def namespace_truth(model: NamespaceModel, t: int) -> dict[str, Any]:
    f = model.figures(t)
    out = {k: f[k] for k in ("records", "live", "expired", "expired_pct", "segments", "backlog", "backlog_live")}
    out["shards"] = [{k: s[k] for k in SHARD_KEYS} for s in f["shards"]]
    return out


def check_every_page(
    page: Page, system: System, day: Day, what: str, after_ms: int | None = None, overview: bool = True
) -> None:
    """Read every figure the console shows for the story and compare it with the ground truth (from
    ``after_ms`` on, when given: the moment the step is about); sizes must agree from page to page.
    ``overview``: the Overview cards too (test_14 checks them alone)."""
    url = system.url
    wait = max(30.0, ((after_ms or 0) - now_ms()) / 1000 + 30)  # the first page may wait for the moment
    names = list(day.model.namespaces)

    def at(t: int) -> Cluster:
        return day.model.at(t)

    def rows_truth(t: int) -> dict[str, Any]:
        truth = at(t)
        return {n: {k: truth[n].figures(t)[k] for k in ("records", "expired_pct", "segments")} for n in names}

    def check(url: str, read: Any, truth: Any, where: str, timeout: float = 30) -> Any:
        return settle(page, url, read, truth, f"{what}: {where}", timeout, after_ms)

    rows = check(f"{url}namespaces", read_namespaces, rows_truth, "Namespaces table", wait)
    if overview:
        cards = check(f"{url}{OVERVIEW}", read_overview, lambda t: at(t).figures(t), "Overview cards")
        assert sizes_add_up(cards["stored_bytes"], [r["size"] for r in rows.values()]), (
            f"{what}: Overview stored {cards['stored_bytes']} is not the namespaces' sizes "
            f"{ {n: r['size'] for n, r in rows.items()} }"
        )

    summaries = {}
    for name in names:
        summary = check(
            f"{url}namespaces/{name}",
            read_namespace_summary,
            lambda t, name=name: namespace_truth(at(t)[name], t),
            f"{name} page",
        )
        assert summary["stored_bytes"] == rows[name]["size"], (
            f"{what}: {name} stores {summary['stored_bytes']} on its page, {rows[name]['size']} on Namespaces"
        )
        assert sizes_add_up(summary["stored_bytes"], [s["size"] for s in summary["shards"]]), (
            f"{what}: {name}'s shards {[s['size'] for s in summary['shards']]} "
            f"do not add up to {summary['stored_bytes']}"
        )
        summaries[name] = summary

    def segments_truth(t: int) -> dict[str, Any]:
        truth = at(t)
        return {n: [{k: r[k] for k in SEGMENT_KEYS} for r in truth[n].segment_rows(t)] for n in names}

    segments = check(f"{url}segments?page_size=200", read_segments, segments_truth, "Segments")
    for name in names:
        assert sizes_add_up(summaries[name]["stored_bytes"], [s["size"] for s in segments[name]]), (
            f"{what}: {name}'s segments {[s['size'] for s in segments[name]]} "
            f"do not add up to {summaries[name]['stored_bytes']}"
        )

    if "story-events" in names:
        check(
            f"{url}namespaces/story-events?tab=subscriptions",
            lambda p: read_subscription(p, SUB),
            lambda t: at(t)["story-events"].subscription_figures(SUB, t),
            "story-events subscriptions",
        )


def started_run(page: Page, label: str) -> str:
    result = page.get_by_test_id("action-result")
    expect(result).to_contain_text(label, timeout=15_000)
    found = re.search(r"#(\d+)", result.inner_text())
    assert found, result.inner_text()
    return found.group(1)


def finished_run(page: Page, system: System, run: str) -> dict[str, int]:
    """Open the run on Tasks, wait for it to succeed, and return its counts as the table shows them."""
    page.goto(f"{system.url}tasks?run={run}")
    expect(page.get_by_test_id("run-detail-state")).to_have_text("succeeded", timeout=60_000)
    page.reload()
    expect(page.get_by_test_id(f"run-state-{run}")).to_have_text("succeeded", timeout=15_000)
    return read_run_counts(page, run)


def runs_listed(page: Page, system: System, query: str) -> list[str]:
    page.goto(f"{system.url}tasks?{query}")
    table = page.get_by_test_id("runs-table").or_(page.get_by_text("No runs match"))
    expect(table.first).to_be_visible(timeout=15_000)
    return [
        (row.get_attribute("data-testid") or "")[len("run-row-") :]
        for row in page.locator('[data-testid^="run-row-"]').all()
    ]


def summed_counts(page: Page, system: System, query: str, key: str) -> int:
    return sum(read_run_counts(page, run).get(key, 0) for run in runs_listed(page, system, query))


def start_namespace_action(page: Page, system: System, name: str, action: str, *, dry_run: bool = False) -> str:
    page.goto(f"{system.url}namespaces/{name}?tab=actions")
    if dry_run:
        page.get_by_test_id("action-dry-run").check()
    page.get_by_test_id(f"action-{action}").click()
    return started_run(page, "dry run" if dry_run else "")


# -- the day ----------------------------------------------------------------------------------------------------
def test_01_the_operator_creates_three_namespaces(page: Page, system: System, day: Day):
    # Reclamation runs at the node's due times; the interval safety net and compaction are set to an hour
    # so that the partly expired segments this story reclaims by hand wait for the operator.
    answer = api(
        page,
        system.url,
        "PATCH",
        "/api/policies/cluster",
        {"set": {"compaction_check_interval_ms": 3_600_000}, "reset": []},
    )
    assert answer.status == 200, answer.text()

    page.get_by_test_id("nav-namespaces").click()
    page.get_by_test_id("create-namespace-name").fill("story-ttl")
    page.get_by_test_id("create-namespace-shards").fill("2")
    page.get_by_test_id("create-namespace-ttl").fill(f"{TTL_S}s")
    page.get_by_test_id("create-namespace-submit").click()
    expect(page.get_by_test_id("namespace-row-story-ttl")).to_be_visible(timeout=15_000)

    for name, shards, policy in (
        ("story-events", 2, {"segment_ms": SEGMENT_MS}),
        ("story-compacted", 1, {"segment_ms": SEGMENT_MS, "cleanup_policy": "compact"}),
    ):
        answer = api(page, system.url, "POST", "/api/namespaces/", {"name": name, "shards": shards, "policy": policy})
        assert answer.status == 201, answer.text()
        assert answer.json()["sync_state"] == "synced", answer.json()

    page.goto(f"{system.url}namespaces/story-events?tab=subscriptions")
    page.get_by_test_id("subscription-create-name").fill(SUB)
    page.get_by_test_id("subscription-create-initial").select_option("earliest")
    page.get_by_test_id("subscription-create-submit").click()
    expect(page.get_by_test_id(f"subscription-row-{SUB}")).to_be_visible(timeout=15_000)
    day.model["story-events"].subscribe(SUB)

    check_every_page(page, system, day, "created")
    page.goto(f"{system.url}namespaces")
    shot(page, 1, "namespaces-created", "namespaces-table")


def test_02_a_bulk_load_fills_the_disk_and_the_alert_fires(page: Page, system: System, day: Day):
    answer = api(page, system.url, "POST", "/api/namespaces/", {"name": "story-bulk", "shards": 1})
    assert answer.status == 201, answer.text()
    bulk = NamespaceModel("story-bulk", 1)
    day.model.add(bulk)
    t = now_ms()
    batch: list[dict[str, Any]] = [{"key": None, "value": os.urandom(64 * 1024), "timestamp": t}] * 8  # 512 KiB
    with NodeClient(system.node_url, system.node_token) as client:
        for _ in range(DISK_CAPACITY // (512 * 1024) + 4):
            try:
                client.append("story-bulk", 0, [NewRecord(**r) for r in batch])
            except DiskFullError:
                break
            bulk.append(0, batch)
        else:
            pytest.fail("the node never refused a write although its quota is full")

    page.goto(f"{system.url}{OVERVIEW}")
    expect(page.get_by_test_id("overview-alerts")).to_contain_text("Disk above the warning watermark", timeout=60_000)
    expect(page.get_by_test_id("health-status")).to_contain_text("alerting", timeout=30_000)
    expect(page.get_by_test_id("disk-node-1")).to_have_attribute("data-level", "warning", timeout=30_000)
    shot(page, 2, "disk-alert-firing", "overview-alerts")

    page.goto(f"{system.url}alerts?state=firing")
    row = page.get_by_test_id("alerts-table").locator("tr", has_text="Disk above the warning watermark")
    expect(row).to_contain_text("critical", timeout=15_000)
    page.goto(f"{system.url}nodes")
    expect(page.get_by_test_id("disk-node-1")).to_have_attribute("data-level", "warning", timeout=30_000)
    # Nothing acknowledged was lost: every accepted record is counted on every page.
    check_every_page(page, system, day, "disk full")


def test_03_retention_frees_the_disk_and_the_alert_resolves(page: Page, system: System, day: Day):
    # The operator drops the bulk load with a retention time of 0 (every segment is past it): the
    # node's retention sweep deletes it at once, keeping the end offset.
    page.goto(f"{system.url}namespaces/story-bulk?tab=policy")
    page.get_by_test_id("policy-field-retention_ms-override").check()
    infinite = page.get_by_test_id("policy-field-retention_ms-infinite")
    if infinite.count() and infinite.is_checked():
        infinite.uncheck()
    page.get_by_test_id("policy-field-retention_ms").fill("0")
    page.get_by_test_id("policy-save").click()
    expect(page.get_by_test_id("policy-saved")).to_be_visible(timeout=15_000)
    expect(page.get_by_test_id("policy-pending")).to_have_count(0, timeout=15_000)
    day.model["story-bulk"].retention_ms = 0

    # Then asks the node to measure its disk now rather than at the next cleaner run.
    page.goto(f"{system.url}nodes")
    page.get_by_test_id("node-open-node-1").click()
    page.get_by_test_id("tab-actions").click()
    page.get_by_test_id("action-disk_check").click()
    run = started_run(page, "Disk check")
    finished_run(page, system, run)

    page.goto(f"{system.url}{OVERVIEW}")
    expect(page.get_by_test_id("overview-alerts-none")).to_be_visible(timeout=60_000)
    expect(page.get_by_test_id("health-status")).to_contain_text("ok", timeout=30_000)
    expect(page.get_by_test_id("disk-node-1")).to_have_attribute("data-level", "ok", timeout=30_000)
    shot(page, 3, "disk-alert-resolved", "overview-alerts-none")
    page.goto(f"{system.url}alerts?state=resolved")
    expect(page.get_by_test_id("alerts-table")).to_contain_text("Disk above the warning watermark", timeout=15_000)
    page.goto(f"{system.url}nodes")
    expect(page.get_by_test_id("disk-node-1")).to_have_attribute("data-level", "ok", timeout=30_000)
    check_every_page(page, system, day, "disk freed")
    assert day.model.at(now_ms())["story-bulk"].figures(now_ms())["records"] == 0


def test_04_the_producer_writes_a_known_mix_and_goes_idle(page: Page, system: System, day: Day):
    t = now_ms()
    day.produced_at = t
    old, ancient = t - OLD_MS, t - 60 * MINUTE
    orders_end, refunds_end, long = t + EXP_S * 1000, t + TTL_S * 1000, t + 60 * MINUTE

    def rec(key: str, value: bytes | None, ts: int, expire_at: int | None = None, *tags: str) -> dict[str, Any]:
        return {"key": key.encode(), "value": value, "timestamp": ts, "expire_at": expire_at, "tags": tags}

    batches: list[tuple[str, int, list[dict[str, Any]]]] = [
        # A short namespace TTL: 10 backfilled readings are expired on arrival; 5 carry an explicit
        # expire_at an hour out, which the namespace TTL overrides (the earlier deadline wins).
        (
            "story-ttl",
            0,
            [rec(f"sensor-old-{i}", b"backfill", ancient, None, "backfill") for i in range(10)]
            + [rec(f"sensor-{i}", b"reading", t, None, "reading") for i in range(25)]
            + [rec(f"sensor-long-{i}", b"reading", t, long) for i in range(5)],
        ),
        ("story-ttl", 1, [rec(f"sensor-b-{i}", b"reading", t) for i in range(20)]),
        # Old orders (a segment of their own): 60 short-lived, 18 kept, 2 tombstones; then today's
        # orders, the last 5 short-lived too.
        (
            "story-events",
            0,
            [rec(f"order-{i}", b"order", old, orders_end, "eu") for i in range(60)]
            + [rec(f"order-{i}", b"order", old, None, "us") for i in range(60, 78)]
            + [rec(f"order-{i}", None, old) for i in range(2)],
        ),
        (
            "story-events",
            0,
            [rec(f"order-b-{i}", b"order", t) for i in range(15)]
            + [rec(f"order-b-{i}", b"order", t, orders_end) for i in range(15, 20)],
        ),
        # Old refunds, most of them expiring when story-ttl does; then today's.
        (
            "story-events",
            1,
            [rec(f"refund-{i}", b"refund", old, refunds_end, "refund") for i in range(24)]
            + [rec(f"refund-{i}", b"refund", old) for i in range(24, 30)],
        ),
        ("story-events", 1, [rec(f"refund-b-{i}", b"refund", t) for i in range(10)]),
        # Profiles: 5 versions of 10 keys and 2 tombstones (old), then 3 new keys.
        (
            "story-compacted",
            0,
            [rec(f"user-{k}", f"profile-{k}-v{v}".encode(), old) for v in range(1, 6) for k in range(10)]
            + [rec(f"user-{k}", None, old) for k in (8, 9)],
        ),
        ("story-compacted", 0, [rec(f"user-{k}", b"profile-new", t) for k in (10, 11, 12)]),
    ]
    with NodeClient(system.node_url, system.node_token) as client:
        for name, shard, batch in batches:
            expected = day.model[name].append(shard, batch)
            appended = client.append(name, shard, [NewRecord(**r) for r in batch])
            assert (appended.base_offset, appended.count) == (expected[0].offset, len(expected)), (name, shard)
    # The producer is idle from here on.
    check_every_page(page, system, day, "produced", after_ms=t)
    page.goto(f"{system.url}namespaces/story-events")
    shot(page, 4, "produced", "shards-table")


def test_05_the_short_lived_orders_expire(page: Page, system: System, day: Day):
    check_every_page(page, system, day, "orders expired", after_ms=day.orders_expire + 1)
    page.goto(f"{system.url}namespaces/story-events")
    shot(page, 5, "orders-expired", "shards-table")


def test_06_a_scan_cleans_the_ttl_index_and_changes_no_figure(page: Page, system: System, day: Day):
    run = start_namespace_action(page, system, "story-events", "expiry_scan")
    finished_run(page, system, run)
    # The 65 expired orders' TTL-index entries were cleaned by this scan, the deadline-driven one, or the
    # read path (a read that skips an expired record queues its clean-up; the metrics collection's backlog
    # reads do): each once, so the scans together found at most 65, and a dry-run scan now finds none.
    due = sum(
        1
        for name in day.model.namespaces
        for s in day.model[name].shards
        for r in s.records()
        if r.expire_at is not None and r.expire_at <= now_ms()
    )
    if now_ms() < day.ttl_expires:  # the 60 old and 5 new short-lived orders; the refunds not yet
        assert due == 65
    assert 0 <= summed_counts(page, system, "kind=expiry_scan", "expired_records") <= due
    shot(page, 6, "scanned", "runs-table")
    start_namespace_action(page, system, "story-events", "expiry_scan", dry_run=True)
    expect(page.get_by_test_id("dry-run-report")).to_be_visible(timeout=60_000)
    assert page.get_by_test_id("dry-run-records").inner_text() == "0"
    check_every_page(page, system, day, "scanned")


def test_07_a_reclaim_rewrites_the_mostly_expired_segment(page: Page, system: System, day: Day):
    page.goto(f"{system.url}tasks")
    page.get_by_test_id("start-target-namespace").click()
    page.get_by_test_id("start-target").select_option("story-events")
    page.get_by_test_id("action-reclaim").click()
    run = started_run(page, "Reclaim")
    counts = finished_run(page, system, run)
    t = now_ms()
    day.model.automatic(t)
    truth = day.model["story-events"].reclaim(t)
    if t < day.ttl_expires:  # the old orders' segment (80 records, 60 expired); the refunds not yet expired
        assert truth == {"segments_deleted": 0, "segments_rewritten": 1, "records_removed": 60}
    assert {k: counts.get(k, 0) for k in truth} == truth, counts
    check_every_page(page, system, day, "reclaimed")
    page.goto(f"{system.url}segments?namespace=story-events")
    shot(page, 7, "reclaimed", "segments-table")


def test_08_the_idle_ttl_namespace_empties_itself(page: Page, system: System, day: Day):
    at = day.ttl_expires + 1
    check_every_page(page, system, day, "story-ttl idle past its TTL", after_ms=at)
    assert day.model.at(at)["story-ttl"].figures(at)["records"] == 0
    # Nobody started anything on story-ttl: its whole segments left with the node's due sweeps.
    assert runs_listed(page, system, "namespace=story-ttl&origin=manual") == []
    assert summed_counts(page, system, "kind=reclaim&origin=scheduled", "segments_deleted") == 2
    page.goto(f"{system.url}namespaces/story-ttl")
    shot(page, 8, "idle-namespace-reclaimed", "shards-table")


def test_09_the_operator_compacts_the_profiles(page: Page, system: System, day: Day):
    page.goto(f"{system.url}namespaces/story-compacted?tab=actions")
    page.get_by_test_id("action-compaction").click()
    estimate = page.get_by_test_id("compaction-estimate")
    expect(estimate.locator("dl")).to_be_visible(timeout=15_000)
    shown = dict(
        zip(
            estimate.locator("dt").all_inner_texts(),
            estimate.locator("dd").all_inner_texts(),
            strict=True,
        )
    )
    day.model.automatic(now_ms())
    counts_truth = day.model["story-compacted"].compact(now_ms())
    assert counts_truth == {"segments_rewritten": 1, "records_removed": 42}
    assert int(shown["Records removable"].replace(",", "")) == counts_truth["records_removed"], shown
    page.get_by_test_id("confirm-input").fill("story-compacted")
    page.get_by_test_id("confirm-submit").click()
    run = started_run(page, "Compaction")
    counts = finished_run(page, system, run)
    assert {k: counts.get(k, 0) for k in counts_truth} == counts_truth, counts
    check_every_page(page, system, day, "compacted")
    page.goto(f"{system.url}segments?namespace=story-compacted")
    shot(page, 9, "compacted", "segments-table")


def test_10_a_consumer_acknowledges(page: Page, system: System, day: Day):
    at = now_ms()
    day.model.automatic(at)
    events = day.model["story-events"]
    with NodeClient(system.node_url, system.node_token) as client:
        for shard, take in ((0, 30), (1, 500)):
            got = client.read_subscription("story-events", SUB, shard, max_records=take).records
            visible = events.visible_after(SUB, shard, at)[:take]
            assert [r.offset for r in got] == [r.offset for r in visible], shard
            assert [r.value for r in got] == [r.value for r in visible], shard
            client.acknowledge("story-events", SUB, shard, got[-1].offset)
            events.ack(SUB, shard, got[-1].offset)
    assert events.subscription_figures(SUB, at)["messages"] == 10
    check_every_page(page, system, day, "acknowledged")
    page.goto(f"{system.url}namespaces/story-events?tab=subscriptions")
    page.get_by_test_id(f"subscription-expand-{SUB}").click()
    shot(page, 10, "acknowledged", f"subscription-shards-{SUB}")


def test_11_a_viewer_reads_everything_and_changes_nothing(chromium: Browser, page: Page, system: System, day: Day):
    manage(
        system.var_dir,
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model; "
        f"get_user_model().objects.create_user({VIEWER!r}, password={VIEWER_PASSWORD!r})",
    )
    viewer = log_in(chromium, system, VIEWER, VIEWER_PASSWORD)
    expect(viewer.get_by_test_id("current-user")).to_contain_text("viewer")

    def looks_fine(where: str) -> None:
        viewer.wait_for_load_state("networkidle")
        expect(viewer.locator("main")).not_to_contain_text("Something went wrong")
        alerts = viewer.get_by_role("alert").all_inner_texts()
        assert alerts == [], f"{where}: {alerts}"
        enabled = viewer.evaluate(
            """patterns => [...document.querySelectorAll('[data-testid]')]
                .filter(el => patterns.some(p => new RegExp(p).test(el.dataset.testid)))
                .filter(el => {
                    const sel = 'button,input,select,textarea';
                    const c = el.matches(sel) ? el : el.querySelector(sel);
                    return c !== null && !c.disabled && el.getClientRects().length > 0;
                })
                .map(el => el.dataset.testid)""",
            WRITE_CONTROLS,
        )
        assert enabled == [], f"{where}: a viewer can use {enabled}"

    viewer.goto(system.url)
    for name in PAGES:
        viewer.get_by_test_id(f"nav-{name}").click()
        looks_fine(name)
    for name in day.model.namespaces:
        for tab in NS_TABS if name == "story-events" else ["overview"]:
            viewer.goto(f"{system.url}namespaces/{name}?tab={tab}")
            expect(viewer.get_by_test_id("namespace-title")).to_contain_text(name)
            looks_fine(f"{name} {tab}")
    viewer.goto(f"{system.url}nodes")
    viewer.get_by_test_id("node-open-node-1").click()
    for tab in ("policy", "actions"):
        viewer.get_by_test_id(f"tab-{tab}").click()
        looks_fine(f"node-1 {tab}")
    viewer.goto(f"{system.url}namespaces/story-events?tab=policy")
    expect(viewer.get_by_test_id("policy-readonly")).to_be_visible()

    # The viewer sees the operator's figures.
    settle(viewer, f"{system.url}{OVERVIEW}", read_overview, lambda t: day.model.at(t).figures(t), "viewer: Overview")
    viewer.goto(f"{system.url}namespaces")
    shot(viewer, 11, "viewer", "namespaces-table")

    # Writes through the API with the viewer's session are refused.
    for method, path, body in (
        ("POST", "/api/namespaces/story-events/actions", {"action": "expiry_scan"}),
        ("PATCH", "/api/namespaces/story-events/policy", {"set": {"ttl_ms": 1000}, "reset": []}),
        ("DELETE", "/api/namespaces/story-events/", {"confirm": "story-events"}),
        ("POST", "/api/namespaces/", {"name": "viewer-made", "shards": 1}),
    ):
        answer = api(viewer, system.url, method, path, body)
        assert answer.status == 403, (method, path, answer.status, answer.text())
    viewer.context.close()
    answer = api(page, system.url, "GET", "/api/namespaces/story-events/")
    assert answer.status == 200
    assert all(r.get("started_by") != VIEWER for r in api(page, system.url, "GET", "/api/runs/").json()["results"])


def test_12_a_dry_run_reports_and_changes_nothing(page: Page, system: System, day: Day):
    at = now_ms()
    day.model.automatic(at)
    truth = day.model["story-events"].reclaim(at, dry_run=True)
    assert truth == {"segments_deleted": 0, "segments_rewritten": 1, "records_removed": 24}
    run = start_namespace_action(page, system, "story-events", "reclaim", dry_run=True)
    expect(page.get_by_test_id("dry-run-report")).to_be_visible(timeout=60_000)
    assert int(page.get_by_test_id("dry-run-records").inner_text()) == truth["records_removed"]
    assert int(page.get_by_test_id("dry-run-segments").inner_text()) == truth["segments_rewritten"]
    shot(page, 12, "dry-run", "dry-run-report")
    counts = finished_run(page, system, run)
    expect(page.get_by_test_id(f"run-row-{run}")).to_contain_text("dry run")
    assert {k: counts.get(k, 0) for k in truth} == truth, counts

    # Figures from a metrics collection after the dry run finished: the same as before it.
    page.goto(f"{system.url}{OVERVIEW}")
    before = page.get_by_test_id("metric-collected-at").inner_text()
    deadline = time.monotonic() + 30
    while page.get_by_test_id("metric-collected-at").inner_text() == before:
        assert time.monotonic() < deadline, "no metrics collection after the dry run"
        page.wait_for_timeout(1000)
        page.reload()
    check_every_page(page, system, day, "after the dry run")


def test_13_the_operator_deletes_a_namespace_and_its_pages_follow(page: Page, system: System, day: Day):
    # The trial profiles are no longer needed: the operator deletes story-compacted, data and all.
    page.goto(f"{system.url}namespaces/story-compacted")
    page.get_by_test_id("namespace-delete").click()
    page.get_by_test_id("confirm-input").fill("story-compacted")
    page.get_by_test_id("confirm-submit").click()
    expect(page.get_by_test_id("namespaces-table")).to_be_visible(timeout=15_000)
    expect(page.get_by_test_id("namespace-row-story-compacted")).to_have_count(0)
    day.model.remove("story-compacted")
    check_every_page(page, system, day, "story-compacted deleted", overview=False)
    page.goto(f"{system.url}namespaces")
    shot(page, 13, "namespace-deleted", "namespaces-table")


def test_14_the_overview_forgets_the_deleted_namespace(page: Page, system: System, day: Day):
    def truth(t: int) -> dict[str, Any]:
        return day.model.at(t).figures(t)

    settle(page, f"{system.url}{OVERVIEW}", read_overview, truth, "Overview after a deletion", 6)
    shot(page, 14, "overview-after-deletion", "metric-stored-records")
