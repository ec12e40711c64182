"""Lifecycle reports posted by Spark, read per namespace; Spark jobs started by hand and by beat."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.conf import settings
from django_celery_beat.models import PeriodicTask
from rest_framework.test import APIClient

from backend.apps.audit.models import AuditEntry
from backend.apps.core.services import ensure_platform_defaults
from backend.apps.namespaces.models import Namespace
from backend.apps.nodes.models import StorageNode
from backend.apps.reports import services, tasks
from backend.apps.reports.models import LifecycleReportRow
from backend.apps.runs.models import TaskRun

URL = "/api/reports/lifecycle"


def row(namespace: str = "orders", date: str = "2024-01-01", **changes: Any) -> dict[str, Any]:
    """One row as ``python -m spark_jobs lifecycle-report`` posts it."""
    base = {
        "namespace": namespace,
        "date": date,
        "records": 100,
        "bytes": 10_000,
        "expired_records": 25,
        "expired_bytes": 2_000,
        "expired_ratio": 0.25,
        "expired_bytes_ratio": 0.2,
        "unbounded_records": 10,
        "lifetime_p50_ms": 3_600_000,
        "lifetime_p90_ms": 18_000_000,
        "lifetime_p99_ms": 86_400_000,
        "lifetime_histogram": {"le_1m": 5, "le_1h": 40, "le_1d": 40, "le_7d": 5, "le_30d": 0, "gt_30d": 0},
        "overdue_p50_ms": 1_000,
        "overdue_p90_ms": 60_000,
        "overdue_p99_ms": 600_000,
        "overdue_max_ms": 700_000,
        "keyed_records": 80,
        "superseded_records": 20,
        "superseded_bytes": 1_500,
        "duplicate_key_ratio": 0.25,
        "now_ms": 1_704_153_600_000,
    }
    return {**base, **changes}


def report(*rows: dict[str, Any], generated_at: str = "2024-01-02T00:00:00Z") -> dict[str, Any]:
    return {"generated_at": generated_at, "rows": list(rows)}


@pytest.fixture
def namespaces(db):
    node = StorageNode.objects.create(name="node-1", url="http://127.0.0.1:9")
    return {name: Namespace.objects.create(name=name, node=node, shards=2) for name in ("orders", "audit")}


@pytest.fixture
def service_client(db) -> APIClient:
    """Authenticated as Spark jobs are: the service user's token, no session, no CSRF."""
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Token {services.ensure_service_token()}")
    return client


def test_a_posted_report_is_stored_per_namespace_and_day_and_read_newest_first(api_as, service_client, namespaces):
    body = report(
        row(date="2023-12-31", records=90),
        row(date="2024-01-01", records=100),
        row("audit", records=7, expired_records=0, unbounded_records=0, keyed_records=0, superseded_records=0),
    )
    response = service_client.post(URL, body, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == {
        "generated_at": "2024-01-02T00:00:00Z",
        "stored": 3,
        "stale": 0,
        "unknown_namespaces": [],
    }
    rows = api_as("viewer").get("/api/namespaces/orders/reports/lifecycle").json()
    assert [(r["day"], r["records"]) for r in rows] == [("2024-01-01", 100), ("2023-12-31", 90)]
    expected = {k: v for k, v in row().items() if k not in ("namespace", "date")}
    assert {k: rows[0][k] for k in expected} == expected
    assert rows[0]["namespace"] == "orders" and rows[0]["generated_at"] == "2024-01-02T00:00:00Z"
    limited = api_as("viewer").get("/api/namespaces/orders/reports/lifecycle?days=1").json()
    assert [r["day"] for r in limited] == ["2024-01-01"]


def test_a_repost_replaces_the_day_but_an_older_report_does_not(service_client, namespaces):
    service_client.post(URL, report(row(records=100)), format="json")
    response = service_client.post(URL, report(row(records=120), generated_at="2024-01-03T00:00:00Z"), format="json")
    assert response.json()["stored"] == 1
    stored = LifecycleReportRow.objects.get()
    assert stored.records == 120 and stored.generated_at.day == 3
    late = service_client.post(URL, report(row(records=90), generated_at="2024-01-02T12:00:00Z"), format="json")
    assert late.json()["stored"] == 0 and late.json()["stale"] == 1
    assert LifecycleReportRow.objects.get().records == 120


def test_rows_of_unknown_namespaces_are_skipped_and_named(service_client, namespaces):
    response = service_client.post(URL, report(row(), row("gone")), format="json")
    assert response.json()["stored"] == 1 and response.json()["unknown_namespaces"] == ["gone"]


def test_a_post_is_audited_as_a_write_by_the_service_user(service_client, namespaces):
    service_client.post(URL, report(row()), format="json")
    entry = AuditEntry.objects.get(action="report.lifecycle")
    assert entry.actor_name == services.SERVICE_USERNAME
    assert entry.after["stored"] == 1 and entry.after["namespaces"] == ["orders"]


def test_posting_needs_a_token_or_session_and_the_operator_role(api_as, namespaces):
    assert APIClient().post(URL, report(row()), format="json").status_code == 401
    assert api_as("viewer").post(URL, report(row()), format="json").status_code == 403
    assert api_as("operator").post(URL, report(row()), format="json").status_code == 200
    assert APIClient().get("/api/namespaces/orders/reports/lifecycle").status_code == 401


def _broken(field: str, value: Any) -> dict[str, Any]:
    body = report(row())
    target = body["rows"][0]
    if "." in field:
        outer, inner = field.split(".")
        target = target[outer]
        field = inner
    if value is KeyError:
        del target[field]
    else:
        target[field] = value
    return body


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("records", KeyError, "required"),
        ("records", -1, "greater than or equal to 0"),
        ("bytes", "lots", "valid integer"),
        ("expired_ratio", 1.5, "less than or equal to 1"),
        ("duplicate_key_ratio", -0.1, "greater than or equal to 0"),
        ("date", "2024-13-01", "Date has wrong format"),
        ("namespace", "", "may not be blank"),
        ("overdue_max_ms", -5, "greater than or equal to 0"),
        ("now_ms", None, "may not be null"),
        ("lifetime_histogram.le_1h", KeyError, "required"),
        ("lifetime_histogram", [1, 2], "Expected a dictionary"),
        ("expired_records", 101, "must not exceed records"),
        ("superseded_records", 81, "must not exceed keyed_records"),
        ("superseded_bytes", 10_001, "must not exceed bytes"),
    ],
)
def test_a_bad_row_is_refused_naming_the_field(service_client, namespaces, field, value, rule):
    response = service_client.post(URL, _broken(field, value), format="json")
    assert response.status_code == 400
    # nested errors have dotted names: the list's index of the bad item, then the field (and its member)
    assert rule in str(response.json()["errors"][f"rows.0.{field}"]), response.json()
    assert not LifecycleReportRow.objects.exists()


@pytest.mark.parametrize(
    ("body", "field", "rule"),
    [
        ({"rows": []}, "generated_at", "required"),
        (report(row(), generated_at="yesterday"), "generated_at", "Datetime has wrong format"),
        ({"generated_at": "2024-01-02T00:00:00Z"}, "rows", "required"),
        (report(row(), row()), "rows", "orders on 2024-01-01 appears twice"),
    ],
)
def test_a_bad_report_is_refused_naming_the_field(service_client, namespaces, body, field, rule):
    response = service_client.post(URL, copy.deepcopy(body), format="json")
    assert response.status_code == 400
    assert rule in str(response.json()["errors"][field])


@pytest.mark.parametrize(("query", "rule"), [("days=0", "greater than or equal to 1"), ("days=x", "valid integer")])
def test_bad_days_are_refused(api_as, namespaces, query, rule):
    response = api_as("viewer").get(f"/api/namespaces/orders/reports/lifecycle?{query}")
    assert response.status_code == 400 and rule in response.json()["errors"]["days"][0]


def test_an_unknown_namespace_has_no_report(api_as, namespaces):
    assert api_as("viewer").get("/api/namespaces/nope/reports/lifecycle").status_code == 404
    assert api_as("viewer").get("/api/namespaces/orders/reports/lifecycle").json() == []


# -- the report with its totals (issue 16: the report tab renders these, it adds nothing up) ------------

SUMMARY = "/api/namespaces/orders/reports/lifecycle/summary"


def test_the_summary_sends_the_rows_and_their_totals_weighted_by_records_not_days(api_as, service_client, namespaces):
    histogram = {"le_1m": 5, "le_1h": 0, "le_1d": 0, "le_7d": 5, "le_30d": 0, "gt_30d": 100}
    body = report(
        row(date="2024-01-03", records=300, bytes=30_000, expired_records=0, expired_bytes=0, superseded_records=0),
        row(date="2024-01-02", records=100, expired_records=100, expired_bytes=10_000, lifetime_histogram=histogram),
        row(date="2024-01-01", records=50, expired_records=10, keyed_records=50, superseded_records=50),
        row("audit", records=1_000, expired_records=1_000, keyed_records=0, superseded_records=0, unbounded_records=0),
    )
    assert service_client.post(URL, body, format="json").status_code == 200
    viewer = api_as("viewer")
    summary = viewer.get(SUMMARY).json()
    # The rows are the list endpoint's, unchanged (it stays as it was).
    assert summary["namespace"] == "orders"
    assert summary["rows"] == viewer.get("/api/namespaces/orders/reports/lifecycle").json()
    assert [r["day"] for r in summary["rows"]] == ["2024-01-03", "2024-01-02", "2024-01-01"]
    totals = summary["totals"]
    assert totals == {
        "days": 3,
        "first_day": "2024-01-01",
        "last_day": "2024-01-03",
        "records": 450,
        "bytes": 50_000,
        "expired_records": 110,
        "expired_bytes": 12_000,
        # Ratios of the sums: 110 of 450, not the mean of the days' 0, 1 and 0.2.
        "expired_ratio": pytest.approx(110 / 450),
        "expired_bytes_ratio": pytest.approx(12_000 / 50_000),
        "unbounded_records": 30,
        "keyed_records": 210,
        "superseded_records": 70,
        "superseded_bytes": 4_500,
        "duplicate_key_ratio": pytest.approx(70 / 210),
        "lifetime_histogram": {"le_1m": 15, "le_1h": 80, "le_1d": 80, "le_7d": 15, "le_30d": 0, "gt_30d": 100},
        "lifetime_shares": {
            "le_1m": pytest.approx(15 / 290),
            "le_1h": pytest.approx(80 / 290),
            "le_1d": pytest.approx(80 / 290),
            "le_7d": pytest.approx(15 / 290),
            "le_30d": 0.0,
            "gt_30d": pytest.approx(100 / 290),
        },
    }
    # The totals are those of the days sent: the most recent one only with days=1.
    one = viewer.get(f"{SUMMARY}?days=1").json()
    assert [r["day"] for r in one["rows"]] == ["2024-01-03"]
    assert (one["totals"]["days"], one["totals"]["records"], one["totals"]["expired_ratio"]) == (1, 300, 0.0)
    assert one["totals"]["first_day"] == one["totals"]["last_day"] == "2024-01-03"


def test_a_summary_without_rows_has_zero_sums_and_no_ratios(api_as, namespaces):
    totals = api_as("viewer").get(SUMMARY).json()
    assert totals["rows"] == []
    totals = totals["totals"]
    assert (totals["days"], totals["first_day"], totals["last_day"], totals["records"]) == (0, None, None, 0)
    assert totals["expired_ratio"] is None and totals["duplicate_key_ratio"] is None
    assert set(totals["lifetime_shares"].values()) == {None}


def test_the_summary_checks_its_namespace_days_and_reader(api_as, namespaces):
    assert api_as("viewer").get("/api/namespaces/nope/reports/lifecycle/summary").status_code == 404
    response = api_as("viewer").get(f"{SUMMARY}?days=0")
    assert response.status_code == 400 and "greater than or equal to 1" in response.json()["errors"]["days"][0]
    assert APIClient().get(SUMMARY).status_code == 401


# -- starting Spark jobs ---------------------------------------------------------------------


def test_an_operator_starts_a_spark_job_as_an_audited_run(api_as, namespaces, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = api_as("operator").post(
            "/api/spark-jobs", {"job": "lifecycle-report", "namespace": "orders"}, format="json"
        )
    assert response.status_code == 202, response.content
    run = TaskRun.objects.get(pk=response.json()["id"])
    assert (run.kind, run.state, run.namespace.name, run.started_by.username) == (
        "lifecycle_report",
        "queued",
        "orders",
        "user-operator",
    )
    assert run.params["job"] == "lifecycle-report"
    entry = AuditEntry.objects.get(action="spark_job.lifecycle-report")
    assert entry.after == {"run": run.pk, "namespace": "orders"}
    assert len(queued) == 1  # the task is queued once the transaction commits
    again = api_as("operator").post("/api/spark-jobs", {"job": "lifecycle-report"}, format="json")
    assert again.status_code == 400 and f"already queued (run {run.pk})" in again.json()["errors"]["job"][0]


@pytest.mark.parametrize(
    ("body", "field", "rule"),
    [
        ({"job": "explode"}, "job", "must be one of"),
        ({}, "job", "required"),
        ({"job": "lake-export", "namespace": "nope"}, "namespace", "no namespace is named 'nope'"),
        ({"job": "compaction-plan"}, "namespace", "is required for compaction-plan"),
        ({"job": "lake-export", "params": {"tag": "x"}}, "params", "takes no params"),
        ({"job": "ttl-backfill", "namespace": "orders", "params": {"ttl": "1h"}}, "params.tag", "exactly one rule"),
        (
            {"job": "ttl-backfill", "namespace": "orders", "params": {"tag": "a", "key_prefix": "b", "ttl": "1h"}},
            "params.tag",
            "exactly one rule",
        ),
        ({"job": "ttl-backfill", "namespace": "orders", "params": {"tag": "a", "ttl": "soon"}}, "params.ttl", "ttl"),
        ({"job": "ttl-backfill", "namespace": "orders", "params": {"tag": "a", "ttl": "1h", "x": "1"}}, "params", "x"),
    ],
)
def test_bad_spark_job_requests_name_the_field(api_as, namespaces, body, field, rule):
    response = api_as("operator").post("/api/spark-jobs", body, format="json")
    assert response.status_code == 400
    assert rule in response.json()["errors"][field][0]
    assert not TaskRun.objects.exists()


def test_a_ttl_backfill_run_carries_its_rule(api_as, namespaces, django_capture_on_commit_callbacks):
    body = {"job": "ttl-backfill", "namespace": "orders", "params": {"tag": "session", "ttl": "30m"}}
    with django_capture_on_commit_callbacks(execute=False):
        response = api_as("operator").post("/api/spark-jobs", body, format="json")
    assert response.status_code == 202, response.content
    run = TaskRun.objects.get(pk=response.json()["id"])
    assert (run.params["tag"], run.params["ttl"]) == ("session", "30m")


def test_starting_a_spark_job_needs_the_operator_role(api_as, namespaces):
    assert APIClient().post("/api/spark-jobs", {"job": "lake-export"}, format="json").status_code == 401
    assert api_as("viewer").post("/api/spark-jobs", {"job": "lake-export"}, format="json").status_code == 403


def test_any_registered_job_with_a_run_kind_is_offered():
    from backend.apps.reports import jobs

    offered = jobs.registered_jobs()
    assert {"lake-export", "lifecycle-report", "compaction-plan", "ttl-backfill"} <= set(offered)
    assert "demo-parquet" not in offered  # no task run kind: not something the control plane runs


def test_beat_starts_the_export_and_the_report_daily_unless_one_is_active(db, django_capture_on_commit_callbacks):
    ensure_platform_defaults()
    for job, cron in (
        ("lake-export", settings.SPARK_LAKE_EXPORT_CRON),
        ("lifecycle-report", settings.SPARK_LIFECYCLE_REPORT_CRON),
    ):
        task = PeriodicTask.objects.get(name=f"platform: spark {job}")
        assert task.interval is None and task.enabled and task.expire_seconds is None  # a daily run is never dropped
        when = task.crontab
        assert f"{when.minute} {when.hour} {when.day_of_month} {when.month_of_year} {when.day_of_week}" == cron
        assert str(when.timezone) == settings.CELERY_TIMEZONE == "UTC"
    assert settings.SPARK_LAKE_EXPORT_CRON == "30 2 * * *"  # off-peak, the report an hour after the export
    assert settings.SPARK_LIFECYCLE_REPORT_CRON == "30 3 * * *"
    with django_capture_on_commit_callbacks(execute=False) as queued:
        first = tasks.scheduled_lifecycle_report()
        second = tasks.scheduled_lifecycle_report()
    assert first is not None and second is None and len(queued) == 1
    run = TaskRun.objects.get(pk=first)
    assert (run.kind, run.schedule, run.started_by) == ("lifecycle_report", "platform: spark lifecycle-report", None)
