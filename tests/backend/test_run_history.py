"""The run history stays readable (issue 26): scheduled sweeps fold into one row per kind, target and window
(``runs.services.fold_sweep``), with their counts summed, and each run names the namespaces it changed, which
is what a namespace's "last scan" and "last compaction" read.

A day of one-second sweeps is driven on an injected clock with the answers a node gives (``LifecycleResult``s
made here, as the node makes them), through the same services the lifecycle step calls; one case runs real
sweeps against a real node."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db.models import Sum

from backend.apps.lifecycle import services as lifecycle
from backend.apps.lifecycle.schedules import schedule_name
from backend.apps.namespaces.models import Namespace
from backend.apps.nodes.models import StorageNode
from backend.apps.runs import services as runs
from backend.apps.runs.models import RunChange, State, TaskRun
from backend.apps.runs.selectors import last_run_at, run_durations
from storage_engine.api import LifecycleResult, NewRecord
from storage_engine.node_api.client import NodeClient

DAY_S = 24 * 3600
START = datetime(2026, 5, 1, 0, 0, 0, tzinfo=UTC)
STEP_TIME = timedelta(milliseconds=200)  # how long a sweep takes on the injected clock


def node_answer(rng: random.Random, namespaces: list[str]) -> LifecycleResult:
    """What a node-wide expiry-scan sweep answers in one second: mostly nothing; now and then a few records of one
    or two namespaces expire (their names in ``namespaces_changed``, as the node reports them); sometimes it only
    looked at entries not yet due (counted, nothing changed)."""
    roll = rng.random()
    if roll < 0.02:
        changed = rng.sample(namespaces, rng.choice((1, 2)))
        expired = rng.randint(1, 40)
        return LifecycleResult(
            operation="expire_scan",
            scanned=expired + rng.randint(0, 5),
            expired_records=expired,
            index_entries_deleted=3 * expired,
            namespaces_changed=tuple(changed),
        )
    if roll < 0.05:
        return LifecycleResult(operation="expire_scan", scanned=rng.randint(1, 5))
    return LifecycleResult(operation="expire_scan")


def counts_of(kind: str, result: LifecycleResult) -> dict[str, int]:
    """The counts a step records for ``kind``: the lifecycle step's own lists (``lifecycle.services.COUNTED``)."""
    return {k: getattr(result, k) for k in (*lifecycle.COUNTED, *lifecycle.COUNTED_BY_KIND.get(kind, ()))}


def run_sweep(kind: str, node: StorageNode, result: LifecycleResult, at: datetime) -> None:
    """A scheduled sweep's whole life on the injected clock, as ``lifecycle.services.run_step`` drives it: created,
    started, its one step recorded, finished (and so folded)."""
    run = runs.create_run(kind=kind, node=node, schedule=schedule_name(kind, node=node), now=at)
    runs.mark_running(run, now=at)
    runs.record_step(
        run, counts_of(kind, result), result.bytes_reclaimed, changed=result.namespaces_changed, now=at + STEP_TIME
    )
    runs.finish(run, State.SUCCEEDED, now=at + STEP_TIME)


def fold_answer(kind: str, node: StorageNode, result: LifecycleResult, at: datetime, ids: dict[str, int]) -> None:
    """The same sweep folded without its run row of its own: what ``runs.finish`` folds, given as figures."""
    sweep = TaskRun(
        kind=kind,
        node=node,
        schedule=schedule_name(kind, node=node),
        state=State.SUCCEEDED,
        created_at=at,
        started_at=at,
        finished_at=at + STEP_TIME,
        steps=1,
        progress=1.0,
        counts=counts_of(kind, result),
        bytes_reclaimed=result.bytes_reclaimed,
    )
    runs.fold_sweep(sweep, {ids[name]: at + STEP_TIME for name in result.namespaces_changed})


# One statement per sweep, 86,400 of them: about 30 s on SQLite, 60-100 s on PostgreSQL (each UPDATE of a window's
# row writes every index of the table again: finished_at is indexed). Each sweep commits, as a sweep does in
# production (transactional_db): inside one test-long transaction PostgreSQL keeps every version of a window's row
# alive, so each of its 3,600 updates walks a longer chain (322 s then). docs/testing.md lists it among the tests
# allowed over 60 s.
@pytest.mark.slow  # a day of sweeps, 86,400 statements: `make test` runs it, `make check` does not
@pytest.mark.timeout(900)
def test_a_day_of_one_second_sweeps_stays_bounded_and_truthful(transactional_db, settings):
    settings.RUN_FOLD_WINDOW_S = 3600
    node = StorageNode.objects.create(name="n1", url="http://127.0.0.1:9", token="t")
    names = ["audit", "clicks", "orders"]
    ids = {name: Namespace.objects.create(name=name, node=node).pk for name in names}
    quiet = Namespace.objects.create(name="quiet", node=node)  # hosted, swept every second, never changed
    rng = random.Random(26)
    expected: Counter[str] = Counter()
    last_change: dict[str, datetime] = {}
    sweeps_with_work = 0
    for second in range(DAY_S):
        at = START + timedelta(seconds=second)
        result = node_answer(rng, names)
        expected.update(counts_of("expiry_scan", result))
        for name in result.namespaces_changed:
            last_change[name] = at + STEP_TIME
        sweeps_with_work += bool(result.namespaces_changed)
        if second < 300 or second % 3600 == 1800:
            run_sweep("expiry_scan", node, result, at)  # the whole way a sweep goes, now and then
        else:
            fold_answer("expiry_scan", node, result, at, ids)
    # A manual scan and a failed sweep in between stay rows of their own.
    manual = runs.create_run(kind="expiry_scan", node=node, now=START + timedelta(hours=5))
    runs.finish(manual, State.SUCCEEDED, now=START + timedelta(hours=5, seconds=1))
    failed = runs.create_run(kind="expiry_scan", node=node, schedule="sweep", now=START + timedelta(hours=7))
    runs.finish(failed, State.FAILED, "node unavailable", now=START + timedelta(hours=7, seconds=1))

    folded = TaskRun.objects.filter(window_start__isnull=False)
    kinds, targets, windows = 1, 1, DAY_S // settings.RUN_FOLD_WINDOW_S
    assert folded.count() == kinds * targets * windows  # one row per hour, bounded whatever the rate
    assert TaskRun.objects.count() == folded.count() + 2  # and the two that are not sweeps' folds
    # Truthful: every sweep is counted once, and the summed counts are the sums of every answer.
    assert folded.aggregate(total=Sum("sweeps"))["total"] == DAY_S
    assert folded.aggregate(total=Sum("steps"))["total"] == DAY_S
    summed: Counter[str] = Counter()
    for row in folded:
        summed.update(row.counts)
        assert row.started_at >= row.window_start and row.finished_at < row.window_start + timedelta(hours=1, seconds=1)
        assert row.sweeps == 3600
    assert +summed == +expected and expected["expired_records"] > 0
    # How long a sweep takes (the scan-duration gauge) is a sweep's, not its window's hour.
    durations = run_durations(START + timedelta(days=1), ["expiry_scan"])
    assert durations[("expiry_scan", "", "n1")] == STEP_TIME.total_seconds()
    assert sweeps_with_work > 1000
    # Each namespace's last scan is when the last sweep that expired some of its records did so, and the run
    # it names is the window's row holding that sweep; the namespace no sweep changed has none.
    for name in names:
        namespace = Namespace.objects.get(name=name)
        assert last_run_at(namespace, "expiry_scan") == last_change[name]
        change = RunChange.objects.filter(namespace=namespace).order_by("-changed_at").first()
        assert change is not None and change.run.window_start == runs.window_of(last_change[name] - STEP_TIME)
    assert last_run_at(quiet, "expiry_scan") is None
    assert not RunChange.objects.filter(namespace=quiet).exists()
    # The namespace's Tasks tab: the windows whose sweeps changed it, no other.
    worked_on_orders = {c.run_id for c in RunChange.objects.filter(namespace_id=ids["orders"])}
    assert 0 < len(worked_on_orders) <= windows


def test_the_fold_window_is_a_setting(db, settings):
    settings.RUN_FOLD_WINDOW_S = 600
    node = StorageNode.objects.create(name="n1", url="http://127.0.0.1:9", token="t")
    for minute in range(60):
        run_sweep(
            "reclaim", node, LifecycleResult(operation="reclaim", segments_deleted=1), START + timedelta(minutes=minute)
        )
    rows = TaskRun.objects.order_by("window_start")
    assert [row.sweeps for row in rows] == [10] * 6
    assert [row.window_start.minute for row in rows] == [0, 10, 20, 30, 40, 50]
    assert [row.counts["segments_deleted"] for row in rows] == [10] * 6


# -- one end to end: real sweeps on a real node ----------------------------------------------------------------


def sweep_now(kind: str, *, node: StorageNode | None = None, namespace: Namespace | None = None) -> TaskRun:
    """A scheduled run of ``kind`` driven to its end on the real node, as the worker drives it."""
    target = node if node is not None else namespace
    assert target is not None
    name = schedule_name(kind, node=node, namespace=namespace)
    run = lifecycle.schedule_run(kind, node=node, namespace=namespace, schedule=name)
    assert run is not None
    while lifecycle.run_step(run.pk) is lifecycle.StepOutcome.MORE:
        pass
    return run


def test_a_node_wide_sweep_is_the_last_scan_of_the_namespaces_it_changed(
    api_as, registered_node, node, django_capture_on_commit_callbacks
):
    admin = api_as("admin")
    for name, policy in (("hot", {}), ("cold", {}), ("keys", {"cleanup_policy": "compact", "segment_bytes": 4096})):
        response = admin.post("/api/namespaces/", {"name": name, "shards": 1, "policy": policy}, format="json")
        assert response.status_code == 201, response.json()
    with NodeClient(node.url, node.token) as client:
        client.append("hot", 0, [NewRecord(value=b"gone", expire_at=1)] * 3)  # expired already
        client.append("cold", 0, [NewRecord(value=b"kept")] * 2)
        for i in range(120):  # 4 keys: a compaction has superseded records to remove
            client.append("keys", 0, [NewRecord(value=b"v" * 40, key=f"k{i % 4}".encode())])
    hot, _cold, keys = (Namespace.objects.get(name=n) for n in ("hot", "cold", "keys"))
    with django_capture_on_commit_callbacks(execute=False):  # the worker is this test
        worked = sweep_now("expiry_scan", node=registered_node)
        idle = sweep_now("expiry_scan", node=registered_node)  # finds nothing: folded, not the last scan
        compacted = sweep_now("compaction", namespace=keys)
        nothing_left = sweep_now("compaction", namespace=keys)
    row = TaskRun.objects.get(pk=worked.pk)
    assert not TaskRun.objects.filter(pk=idle.pk).exists() and row.sweeps == 2  # one row for the window
    assert row.counts["expired_records"] == 3 and row.namespace is None
    change = RunChange.objects.get(run=row)
    assert change.namespace == hot  # the node said whom its sweep changed
    viewer = api_as("viewer")
    summary = viewer.get("/api/namespaces/hot/summary").json()
    assert _at(summary["last_scan_at"]) == change.changed_at < row.finished_at  # the sweep that did the work
    assert summary["last_scan_run"] == row.pk and summary["last_compaction_run"] is None
    assert viewer.get("/api/namespaces/cold/summary").json()["last_scan_at"] is None  # covered, not changed
    listed = {r["name"]: r for r in viewer.get("/api/namespaces/").json()["results"]}
    assert _at(listed["hot"]["last_scan_at"]) == change.changed_at and listed["cold"]["last_scan_at"] is None
    tab = viewer.get("/api/runs/?namespace=hot").json()["results"]
    assert [(r["id"], r["namespaces_changed"], r["sweeps"]) for r in tab] == [(row.pk, ["hot"], 2)]
    assert viewer.get("/api/runs/?namespace=cold").json()["results"] == []
    # The compaction that removed records is the last compaction, not the later one that found nothing.
    kept = TaskRun.objects.get(pk=compacted.pk)
    assert kept.counts["records_removed"] > 0 and kept.sweeps == 2
    assert not TaskRun.objects.filter(pk=nothing_left.pk).exists()
    compaction_change = RunChange.objects.get(run=kept, namespace=keys)
    at = _at(viewer.get("/api/namespaces/keys/summary").json()["last_compaction_at"])
    assert at == compaction_change.changed_at < kept.finished_at
    assert viewer.get("/api/namespaces/keys/summary").json()["last_compaction_run"] == kept.pk


def _at(text: Any) -> datetime:
    return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
