from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone

from backend.apps.audit.models import AuditEntry
from backend.apps.namespaces.models import Namespace
from backend.apps.nodes.models import StorageNode
from backend.apps.runs import selectors, services
from backend.apps.runs.models import RunChange, State, TaskRun


def test_runs_list_filters_and_progress(api_as, db):
    scan = services.create_run(kind="expiry_scan", shard=0)
    services.mark_running(scan)
    services.record_step(scan, {"entries_scanned": 1000, "records_expired": 900}, bytes_reclaimed=4096, progress=0.5)
    services.record_step(scan, {"entries_scanned": 10, "records_expired": 10}, bytes_reclaimed=10)
    services.create_run(kind="compaction")
    viewer = api_as("viewer")
    runs = viewer.get("/api/runs/?kind=expiry_scan").json()["results"]
    assert len(runs) == 1
    assert runs[0]["counts"] == {"entries_scanned": 1010, "records_expired": 910}
    assert (runs[0]["steps"], runs[0]["bytes_reclaimed"], runs[0]["progress"], runs[0]["state"]) == (
        2,
        4106,
        0.5,
        "running",
    )
    assert [r["kind"] for r in viewer.get("/api/runs/?active=true").json()["results"]] == ["compaction", "expiry_scan"]


def test_cancel_a_queued_run_and_refuse_a_finished_one(api_as, db):
    queued = services.create_run(kind="retention")
    operator = api_as("operator")
    response = operator.post(f"/api/runs/{queued.pk}/cancel")
    assert response.status_code == 200 and response.json()["state"] == "cancelled"
    assert AuditEntry.objects.get(action="run.cancel").target == str(queued.pk)
    response = operator.post(f"/api/runs/{queued.pk}/cancel")
    assert response.status_code == 400 and "only queued or running" in response.json()["errors"]["state"][0]


def test_cancel_a_running_run_sets_the_flag_for_the_worker(api_as, db):
    run = services.mark_running(services.create_run(kind="compaction"))
    api_as("operator").post(f"/api/runs/{run.pk}/cancel")
    assert services.cancel_requested(run)
    assert TaskRun.objects.get(pk=run.pk).state == State.RUNNING  # the worker stops it between steps
    services.finish(run, State.CANCELLED)
    services.finish(run, State.SUCCEEDED)  # a finished run never changes again
    assert TaskRun.objects.get(pk=run.pk).state == State.CANCELLED


def test_cancel_needs_operator(api_as, db):
    run = services.create_run(kind="retention")
    assert api_as("viewer").post(f"/api/runs/{run.pk}/cancel").status_code == 403
    assert api_as(None).post(f"/api/runs/{run.pk}/cancel").status_code == 401


def test_datetime_filters_take_any_valid_offset_and_refuse_unrepresentable_ones(api_as, db):
    services.create_run(kind="retention")
    viewer = api_as("viewer")
    # Valid ISO 8601 but beyond PostgreSQL's ±15:59 offsets: compared in UTC, not a 500.
    assert viewer.get("/api/runs/?since=3626-11-16T12:03:50-19:22").json()["results"] == []
    assert len(viewer.get("/api/runs/?since=2000-01-01T00:00:00-19:22").json()["results"]) == 1
    response = viewer.get("/api/runs/?since=0001-01-01T00:00:00%2B05:00")
    assert response.status_code == 400 and "since" in response.json()["errors"]
    assert viewer.get("/api/audit/?until=3626-11-16T12:03:50-19:22").status_code == 200


def _finished(
    kind: str,
    *,
    schedule: str = "",
    state: str = State.SUCCEEDED,
    at: datetime | None = None,
    changed: tuple[str, ...] = (),
    params: dict[str, Any] | None = None,
    dry_run: bool = False,
    node: StorageNode | None = None,
    **counts: int,
) -> TaskRun:
    """A run through its whole life on the injected clock: created and started at ``at``, one step, finished a
    second later."""
    at = at or timezone.now()
    run = services.create_run(kind=kind, schedule=schedule, now=at, params=params or {}, dry_run=dry_run, node=node)
    services.mark_running(run, now=at)
    services.record_step(run, {"scanned": 0, "expired_records": 0, **counts}, changed=changed, now=at)
    services.finish(run, state, "boom" if state == State.FAILED else "", now=at + timedelta(seconds=1))
    return run


def test_manual_runs_are_found_among_scheduled_ones(api_as, db):
    manual = services.create_run(kind="retention", actor=None)
    _finished("expiry_scan", schedule="sweep", expired_records=5)
    failed = _finished("reclaim", schedule="sweep", state=State.FAILED)
    viewer = api_as("viewer")
    listed = viewer.get("/api/runs/?origin=manual").json()["results"]
    assert [r["id"] for r in listed] == [manual.pk] and listed[0]["origin"] == "manual"
    scheduled = viewer.get("/api/runs/?origin=scheduled").json()["results"]
    assert {r["kind"] for r in scheduled} == {"expiry_scan", "reclaim"}
    assert {r["origin"] for r in scheduled} == {"scheduled"}
    assert [r["id"] for r in viewer.get("/api/runs/?state=failed").json()["results"]] == [failed.pk]
    assert [r["id"] for r in viewer.get("/api/runs/?origin=scheduled&state=failed").json()["results"]] == [failed.pk]
    assert viewer.get("/api/runs/?origin=sometimes").status_code == 400
    assert viewer.get(f"/api/runs/{manual.pk}/").json()["id"] == manual.pk  # a run links to itself


T0 = datetime(2026, 5, 1, 10, 0, 5, tzinfo=UTC)


def test_scheduled_sweeps_fold_into_one_row_per_kind_target_and_window(api_as, db, settings):
    settings.RUN_FOLD_WINDOW_S = 3600
    viewer = api_as("viewer")
    first = _finished("expiry_scan", schedule="sweep", at=T0)  # did nothing: the window's row, idle
    assert TaskRun.objects.get(pk=first.pk).idle
    assert viewer.get("/api/runs/").json()["results"] == []  # a sweep that did nothing is no row of its own
    second = _finished("expiry_scan", schedule="sweep", at=T0 + timedelta(seconds=1))
    assert not TaskRun.objects.filter(pk=second.pk).exists()  # folded into the window's row
    _finished("expiry_scan", schedule="sweep", at=T0 + timedelta(minutes=30), expired_records=7, scanned=9)
    _finished("expiry_scan", schedule="sweep", at=T0 + timedelta(minutes=40), expired_records=5)
    row = TaskRun.objects.get(pk=first.pk)
    assert (row.sweeps, row.steps, row.idle) == (4, 4, False)
    assert row.counts == {"scanned": 9, "expired_records": 12}
    assert (row.started_at, row.finished_at) == (T0, T0 + timedelta(minutes=40, seconds=1))
    # The row spans 40 minutes; the duration gauges take its latest sweep's own second.
    assert row.last_sweep_s == 1.0
    assert selectors.run_durations(T0 + timedelta(minutes=50), ["expiry_scan"]) == {("expiry_scan", "", ""): 1.0}
    # Never folded: a failure, a manual action (started by hand, or asked for by a schedule's caller), a dry run.
    failed = _finished("expiry_scan", schedule="sweep", state=State.FAILED, at=T0 + timedelta(minutes=41))
    manual = _finished("expiry_scan", at=T0 + timedelta(minutes=42))
    asked = _finished("expiry_scan", schedule="sweep", params={"manual": True}, at=T0 + timedelta(minutes=43))
    dry = _finished("expiry_scan", schedule="sweep", dry_run=True, at=T0 + timedelta(minutes=44), expired_records=3)
    other_kind = _finished("retention", schedule="sweep", at=T0 + timedelta(minutes=45), segments_deleted=1)
    next_hour = _finished("expiry_scan", schedule="sweep", at=T0 + timedelta(hours=1), expired_records=1)
    kept = {first.pk, failed.pk, manual.pk, asked.pk, dry.pk, other_kind.pk, next_hour.pk}
    assert set(TaskRun.objects.values_list("pk", flat=True)) == kept
    assert TaskRun.objects.get(pk=next_hour.pk).window_start == datetime(2026, 5, 1, 11, tzinfo=UTC)
    listed = viewer.get("/api/runs/?origin=scheduled&kind=expiry_scan").json()["results"]
    assert [r["id"] for r in listed] == [next_hour.pk, dry.pk, asked.pk, failed.pk, first.pk]
    shown = listed[-1]
    assert (shown["sweeps"], shown["window_start"], shown["window_end"]) == (
        4,
        "2026-05-01T10:00:00Z",
        "2026-05-01T11:00:00Z",
    )
    assert shown["summary"]["records"] == 12 and shown["idle"] is False
    assert [r["sweeps"] for r in listed[:-1]] == [1, 1, 1, 1]
    assert listed[1]["window_start"] is None  # the dry run is a run of its own


def test_idle_windows_are_listed_when_asked_for(api_as, db, settings):
    settings.RUN_FOLD_WINDOW_S = 60
    for second in range(0, 180, 10):  # three one-minute windows of sweeps that did nothing
        _finished("reclaim", schedule="sweep", at=T0 + timedelta(seconds=second))
    viewer = api_as("viewer")
    assert viewer.get("/api/runs/").json()["results"] == []
    idle = viewer.get("/api/runs/?idle=true").json()["results"]
    assert [r["sweeps"] for r in idle] == [6, 6, 6]  # 10:00:05–10:00:55, 10:01:05–…, 10:02:05–…
    assert [r["window_start"][11:19] for r in idle] == ["10:02:00", "10:01:00", "10:00:00"]
    assert {r["idle"] for r in idle} == {True}
    assert viewer.get("/api/runs/?idle=false").json()["results"] == []
    assert viewer.get("/api/runs/?idle=maybe").status_code == 400
    assert viewer.get(f"/api/runs/{idle[0]['id']}/").json()["idle"] is True  # an idle row still opens by its id


def test_the_namespace_filter_lists_node_wide_sweeps_that_changed_it(api_as, db):
    node = StorageNode.objects.create(name="n1", url="http://127.0.0.1:9", token="t")
    orders = Namespace.objects.create(name="orders", node=node)
    Namespace.objects.create(name="audit", node=node)
    on_orders = _finished("compaction", at=T0, changed=("orders",), records_removed=3)  # as the node names it
    TaskRun.objects.filter(pk=on_orders.pk).update(namespace=orders)
    sweep = _finished("expiry_scan", schedule="s", node=node, at=T0, changed=("orders", "gone"), expired_records=4)
    n2 = StorageNode.objects.create(name="n2", url="http://127.0.0.1:9", token="t")
    elsewhere = _finished("expiry_scan", schedule="s", node=n2, at=T0, changed=("audit",), expired_records=1)
    viewer = api_as("viewer")
    listed = viewer.get("/api/runs/?namespace=orders").json()["results"]
    assert {r["id"] for r in listed} == {on_orders.pk, sweep.pk}
    by_id = {r["id"]: r for r in listed}
    assert by_id[sweep.pk]["namespaces_changed"] == ["orders"]  # a name the control plane does not know is left
    assert by_id[on_orders.pk]["namespaces_changed"] == ["orders"]
    assert viewer.get("/api/runs/?namespace=audit").json()["results"][0]["id"] == elsewhere.pk
    dry = _finished("expiry_scan", at=T0, dry_run=True, changed=("orders",), expired_records=4)
    assert not RunChange.objects.filter(run_id=dry.pk).exists()  # a dry run changed nothing


def test_limit_and_page_size_are_honoured_and_checked(api_as, db):
    for _ in range(3):
        services.create_run(kind="retention")
    viewer = api_as("viewer")
    page = viewer.get("/api/runs/?limit=2").json()
    assert len(page["results"]) == 2 and "limit=2" in page["next"]
    assert len(viewer.get(page["next"]).json()["results"]) == 1
    assert len(viewer.get("/api/runs/?page_size=1").json()["results"]) == 1
    assert len(viewer.get("/api/runs/?limit=1000").json()["results"]) == 3
    for bad in ("0", "-1", "1001", "abc", "2.5", ""):
        response = viewer.get(f"/api/runs/?limit={bad}")
        assert response.status_code == 400, bad
        assert response.json()["errors"] == {"limit": ["must be an integer from 1 to 1000"]}
    response = viewer.get("/api/runs/?page_size=0")
    assert response.status_code == 400 and response.json()["errors"] == {
        "page_size": ["must be an integer from 1 to 1000"]
    }
    response = viewer.get("/api/runs/?limit=2&page_size=2")
    assert response.status_code == 400 and "not both" in response.json()["errors"]["limit"][0]
    assert viewer.get("/api/audit/?limit=0").status_code == 400  # every list reads it the same way


def test_a_dry_runs_summary_is_computed_by_the_server_from_its_counts(api_as, db):
    """The figures a dry run reports (records, segments, bytes) are the server's, one definition: records
    expired plus removed, segments deleted plus rewritten, bytes reclaimed; summed over the run's steps."""
    run = services.mark_running(services.create_run(kind="retention", dry_run=True))
    services.record_step(
        run,
        {"scanned": 9, "expired_records": 5, "records_removed": 1200, "segments_deleted": 3, "segments_rewritten": 0},
        bytes_reclaimed=4096,
    )
    services.record_step(run, {"expired_records": 2, "segments_rewritten": 1}, bytes_reclaimed=1024)
    services.finish(run, State.SUCCEEDED)
    viewer = api_as("viewer")
    shown = viewer.get(f"/api/runs/{run.pk}/").json()
    assert shown["dry_run"] is True
    assert shown["summary"] == {"records": 1207, "segments": 4, "bytes": 5120, "pending_bytes": 0}
    listed = viewer.get("/api/runs/?kind=retention").json()["results"]
    assert listed[0]["summary"] == shown["summary"]  # the list says the same


def test_a_recall_runs_summary_is_what_it_would_bring_back(api_as, db):
    """A recall frees nothing: its summary is the segments and bytes recalled (would be, for a dry run) and no
    records, whatever else its counts hold."""
    run = services.mark_running(services.create_run(kind="recall", dry_run=True))
    services.record_step(
        run, {"scanned": 6, "expired_records": 0, "segments_recalled": 4, "bytes_recalled": 2 * 1024**2}
    )
    services.record_step(run, {"segments_recalled": 1, "bytes_recalled": 1024})
    services.finish(run, State.SUCCEEDED)
    summary = api_as("viewer").get(f"/api/runs/{run.pk}/").json()["summary"]
    assert summary == {"records": 0, "segments": 5, "bytes": 2 * 1024**2 + 1024, "pending_bytes": 0}


def test_a_run_with_no_counts_yet_sums_to_zero(api_as, db):
    for kind in ("compaction", "recall"):
        run = services.create_run(kind=kind)
        assert api_as("viewer").get(f"/api/runs/{run.pk}/").json()["summary"] == {
            "records": 0,
            "segments": 0,
            "bytes": 0,
            "pending_bytes": 0,
        }
