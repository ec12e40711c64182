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


def _finished(kind: str, *, schedule: str = "", state: str = State.SUCCEEDED, **counts: int) -> TaskRun:
    run = services.mark_running(services.create_run(kind=kind, schedule=schedule))
    services.record_step(run, {"scanned": 0, "expired_records": 0, **counts})
    services.finish(run, state, "boom" if state == State.FAILED else "")
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


def test_scheduled_runs_that_did_nothing_keep_only_the_latest(api_as, db):
    first = _finished("expiry_scan", schedule="sweep")
    second = _finished("expiry_scan", schedule="sweep")
    assert not TaskRun.objects.filter(pk=first.pk).exists()  # folded into the latest
    third = _finished("expiry_scan", schedule="sweep")
    kept = TaskRun.objects.get(kind="expiry_scan", schedule="sweep", params__noop=True)
    assert kept.pk == third.pk and kept.params["noop_runs"] == 3
    assert kept.params["noop_since"] == TaskRun._meta.get_field("created_at").value_from_object(first).isoformat()
    assert not TaskRun.objects.filter(pk=second.pk).exists()
    worked = _finished("expiry_scan", schedule="sweep", expired_records=7)
    failed = _finished("expiry_scan", schedule="sweep", state=State.FAILED)
    manual = _finished("expiry_scan")  # did nothing, but someone asked for it
    other_kind = _finished("retention", schedule="sweep")
    after = _finished("expiry_scan", schedule="sweep")
    left = set(TaskRun.objects.values_list("pk", flat=True))
    assert left == {worked.pk, failed.pk, manual.pk, other_kind.pk, after.pk}
    assert TaskRun.objects.get(pk=after.pk).params["noop_runs"] == 4  # the no-op runs since the first
    listed = api_as("viewer").get("/api/runs/?origin=scheduled&kind=expiry_scan").json()["results"]
    assert [r["id"] for r in listed] == [after.pk, failed.pk, worked.pk]


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
    assert shown["summary"] == {"records": 1207, "segments": 4, "bytes": 5120}
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
    assert summary == {"records": 0, "segments": 5, "bytes": 2 * 1024**2 + 1024}


def test_a_run_with_no_counts_yet_sums_to_zero(api_as, db):
    for kind in ("compaction", "recall"):
        run = services.create_run(kind=kind)
        assert api_as("viewer").get(f"/api/runs/{run.pk}/").json()["summary"] == {
            "records": 0,
            "segments": 0,
            "bytes": 0,
        }
