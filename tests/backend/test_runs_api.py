from __future__ import annotations

from backend.apps.audit.models import AuditEntry
from backend.apps.runs import services
from backend.apps.runs.models import State, TaskRun


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
    assert response.status_code == 400 and "only queued or running" in response.json()["state"][0]


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
    assert response.status_code == 400 and "since" in response.json()
    assert viewer.get("/api/audit/?until=3626-11-16T12:03:50-19:22").status_code == 200
