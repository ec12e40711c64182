"""Lifecycle orchestration: leases, schedules from policies, manual actions."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from backend.apps.audit.models import AuditEntry
from backend.apps.lifecycle import leases, schedules, services
from backend.apps.lifecycle.models import Lease, Schedule
from backend.apps.namespaces.models import Namespace
from backend.apps.runs.models import TaskRun
from storage_engine.api import NewRecord
from storage_engine.errors import InvalidArgumentError, NodeUnavailableError
from storage_engine.node_api.client import NodeClient


def test_a_lease_is_exclusive_until_it_expires(db):
    now = timezone.now()
    assert leases.acquire("shard:1:0", "run:1", 60, now)
    assert not leases.acquire("shard:1:0", "run:2", 60, now + timedelta(seconds=59))
    assert leases.acquire("shard:1:0", "run:1", 60, now + timedelta(seconds=30))  # the holder extends it
    assert leases.acquire("shard:1:0", "run:2", 60, now + timedelta(seconds=91))  # expired: taken over
    assert Lease.objects.get(key="shard:1:0").holder == "run:2"


def test_acquire_all_is_all_or_nothing(db):
    assert leases.acquire("shard:1:1", "run:9", 60)
    assert not leases.acquire_all(["shard:1:0", "shard:1:1", "shard:1:2"], "run:1", 60)
    assert list(Lease.objects.values_list("key", flat=True)) == ["shard:1:1"]
    leases.release_all(["shard:1:1"], "run:9")
    assert leases.acquire_all(["shard:1:0", "shard:1:1", "shard:1:2"], "run:1", 60)
    assert Lease.objects.count() == 3


@pytest.fixture
def orders(api_as, registered_node):
    admin = api_as("admin")
    response = admin.post(
        "/api/namespaces/", {"name": "orders", "shards": 2, "policy": {"scan_interval_ms": 30_000}}, format="json"
    )
    assert response.status_code == 201
    return Namespace.objects.select_related("node").get(name="orders")


def schedule(kind: str, name: str = "orders") -> Schedule:
    return Schedule.objects.get(namespace__name=name, kind=kind)


def sweep(kind: str, node: str = "node-1") -> Schedule:
    return Schedule.objects.get(node__name=node, kind=kind)


def test_sweeps_follow_the_policies_at_once(api_as, orders):
    """Scans, retention, reclamation and message TTL sweep the node at the shortest interval any of its
    namespaces asks for; a policy change moves it at once, deleting the namespace stops it. Scans, retention
    and reclamation also run at the node's due times (test_due_sweeps): their beat schedule is a safety net
    of at least DUE_SAFETY_NET_S (60 s)."""
    assert sweep("expiry_scan").interval_s == 60  # asked for 30 s
    assert sweep("retention").enabled and sweep("subscription_ttl").interval_s == 300
    assert not Schedule.objects.filter(namespace=orders).exists()  # nothing per namespace
    assert schedules.task_of(sweep("expiry_scan")) == (
        "backend.apps.lifecycle.tasks.scheduled_run",
        {"kind": "expiry_scan", "node_id": orders.node_id},
    )
    api_as("admin").patch("/api/namespaces/orders/policy", {"set": {"scan_interval_ms": 120_000}}, format="json")
    assert sweep("expiry_scan").interval_s == 120
    response = api_as("admin").post(
        "/api/namespaces/", {"name": "fast", "shards": 1, "policy": {"scan_interval_ms": 90_000}}, format="json"
    )
    assert response.status_code == 201
    assert sweep("expiry_scan").interval_s == 90  # the shortest wins
    api_as("admin").delete("/api/namespaces/fast/", {"confirm": "fast"}, format="json")
    assert sweep("expiry_scan").interval_s == 120
    api_as("admin").patch("/api/policies/cluster", {"set": {"compaction_check_interval_ms": 600_000}}, format="json")
    assert sweep("reclaim").interval_s == 600
    api_as("admin").delete("/api/namespaces/orders/", {"confirm": "orders"}, format="json")
    assert not Schedule.objects.filter(node__name="node-1", kind="expiry_scan").exists()


def test_a_sweep_run_covers_every_namespace_of_the_node(api_as, orders, node, django_capture_on_commit_callbacks):
    from storage_engine.api import NewRecord
    from storage_engine.node_api.client import NodeClient

    api_as("admin").post("/api/namespaces/", {"name": "other", "shards": 1}, format="json")
    with NodeClient(node.url, node.token) as client:
        client.append("orders", 1, [NewRecord(value=b"x", expire_at=1)] * 3)
        client.append("other", 0, [NewRecord(value=b"x", expire_at=1)] * 4)
    with django_capture_on_commit_callbacks(execute=False):
        run = services.schedule_run("expiry_scan", node=orders.node, schedule="sweep")
        assert services.schedule_run("expiry_scan", node=orders.node) is None  # one sweep at a time
    assert run is not None and run.namespace is None
    assert services.queue_for_run(run).endswith(".node-1")
    # One sweep of a kind per node at a time; another kind's lease does not stand in its way.
    assert leases.acquire_all(leases.node_keys(orders.node, "expiry_scan"), "run:other", 60)
    assert services.run_step(run.pk) is services.StepOutcome.BUSY
    leases.release_all(leases.node_keys(orders.node, "expiry_scan"), "run:other")
    assert leases.acquire_all(leases.node_keys(orders.node, "reclaim"), "run:other", 60)
    while services.run_step(run.pk) is services.StepOutcome.MORE:
        pass
    run.refresh_from_db()
    assert run.state == "succeeded", run.error
    assert run.counts["expired_records"] == 7
    with pytest.raises(InvalidArgumentError):
        services.create_run(kind="compaction", node=orders.node)  # not a sweep: needs a namespace


def test_node_schedules_follow_the_node_policy(api_as, db):
    from backend.apps.nodes.services import ensure_default_node

    ensure_default_node()
    kinds = set(Schedule.objects.filter(node__name="node-1").values_list("kind", flat=True))
    assert kinds == {"file_clean", "disk_check"}  # no sweeps yet
    api_as("admin").patch("/api/nodes/node-1/policy", {"set": {"clean_interval_ms": 60_000}}, format="json")
    assert sweep("file_clean").interval_s == 60


def test_bootstrap_resyncs_every_schedule(orders):
    Schedule.objects.all().delete()
    # sweeps: scan, retention, reclaim, message TTL; clean, disk; the due-time poll
    assert schedules.derive_schedules() == 4 + 2 + 1
    assert sweep("expiry_scan").interval_s == 60


def test_manual_action_creates_an_audited_run(api_as, orders, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = api_as("operator").post(
            "/api/namespaces/orders/actions", {"action": "expiry_scan", "shard": 1}, format="json"
        )
    assert response.status_code == 202
    run = TaskRun.objects.get(pk=response.json()["id"])
    assert (run.kind, run.shard, run.state, run.started_by.username) == ("expiry_scan", 1, "queued", "user-operator")
    assert AuditEntry.objects.get(action="action.expiry_scan").target == "orders"
    assert len(queued) == 1  # the first step is queued once the transaction commits


@pytest.mark.parametrize(
    ("body", "field", "rule"),
    [
        ({"action": "retention"}, "confirm", "must repeat the namespace name"),
        ({"action": "retention", "confirm": "order"}, "confirm", "must repeat the namespace name"),
        ({"action": "explode"}, "action", "is not a valid choice"),
        ({"action": "expiry_scan", "shard": 5}, "shard", "from 0 to 1"),
        ({"action": "subscription_ttl", "dry_run": "maybe"}, "dry_run", "Must be a valid boolean"),
        ({"action": "expiry_scan", "dryrun": True}, "dryrun", "unknown field"),
    ],
)
def test_bad_actions_name_the_field(api_as, orders, body, field, rule):
    response = api_as("operator").post("/api/namespaces/orders/actions", body, format="json")
    assert response.status_code == 400
    assert rule in response.json()["errors"][field][0]
    assert not TaskRun.objects.exists()


def test_a_dry_run_reports_what_would_happen_and_changes_nothing(api_as, orders, node):
    """Every action offered as a dry run runs as one step on the node: its counts say what the
    action would do, nothing changes, it needs no confirmation and never counts as a last run."""
    now = int(timezone.now().timestamp() * 1000)
    with NodeClient(node.url, node.token) as client:
        client.append("orders", 0, [NewRecord(value=b"gone", expire_at=now - 1_000)] * 3)
        client.append("orders", 1, [NewRecord(value=b"kept", expire_at=now + 3_600_000)] * 2)
        before = [client.shard_stats("orders", shard) for shard in (0, 1)]
        operator = api_as("operator")
        for action, body in (
            ("expiry_scan", {}),
            ("retention", {}),  # destructive, but a dry run needs no confirmation
            ("reclaim", {}),
            ("compaction", {}),
        ):
            response = operator.post(
                "/api/namespaces/orders/actions", {"action": action, "dry_run": True, **body}, format="json"
            )
            assert response.status_code == 202, response.json()
            run = TaskRun.objects.get(pk=response.json()["id"])
            assert run.dry_run and response.json()["dry_run"]
            while services.run_step(run.pk) is services.StepOutcome.MORE:
                pass
            run.refresh_from_db()
            assert run.state == "succeeded", run.error
            if action == "expiry_scan":
                assert run.counts["expired_records"] == 3  # the three records past their own deadline
            # What the UI reports is the server's summary of the run's counts (one definition).
            summary = operator.get(f"/api/runs/{run.pk}/").json()["summary"]
            assert summary == {
                "records": run.counts.get("expired_records", 0) + run.counts.get("records_removed", 0),
                "segments": run.counts.get("segments_deleted", 0) + run.counts.get("segments_rewritten", 0),
                "bytes": run.bytes_reclaimed,
                "pending_bytes": sum((run.params.get("pending_delete_bytes") or {}).values()),
            }
            if action == "expiry_scan":
                assert summary["records"] == 3
        node_run = operator.post(
            "/api/nodes/node-1/actions", {"action": "force_delete", "dry_run": True}, format="json"
        )
        assert node_run.status_code == 202, node_run.json()
        services.run_step(node_run.json()["id"])
        assert TaskRun.objects.get(pk=node_run.json()["id"]).state == "succeeded"
        assert [client.shard_stats("orders", shard) for shard in (0, 1)] == before
        assert len(client.read("orders", 0, 0).records) == 0  # hidden at read time, still stored
        assert client.shard_stats("orders", 0)["record_count"] == 3
    entry = AuditEntry.objects.filter(action="action.retention").get()
    assert entry.after["dry_run"] is True
    listed = api_as("viewer").get("/api/namespaces/").json()
    row = next(r for r in (listed["results"] if isinstance(listed, dict) else listed) if r["name"] == "orders")
    assert row["last_scan_at"] is None  # a dry run is not the namespace's last scan


def test_actions_need_the_operator_role(api_as, orders):
    assert (
        api_as("viewer").post("/api/namespaces/orders/actions", {"action": "expiry_scan"}, format="json").status_code
        == 403
    )
    assert (
        api_as("viewer").post("/api/nodes/node-1/actions", {"action": "file_clean"}, format="json").status_code == 403
    )


def test_force_delete_on_a_node_needs_its_name(api_as, orders):
    operator = api_as("operator")
    assert operator.post("/api/nodes/node-1/actions", {"action": "force_delete"}, format="json").status_code == 400
    response = operator.post(
        "/api/nodes/node-1/actions", {"action": "force_delete", "confirm": "node-1"}, format="json"
    )
    assert response.status_code == 202 and response.json()["kind"] == "force_delete"


def test_a_step_waits_while_another_run_holds_the_shard(orders):
    first = services.create_run(kind="expiry_scan", namespace=orders)
    second = services.create_run(kind="retention", namespace=orders, shard=1)
    assert leases.acquire_all(leases.shard_keys(orders, None), f"run:{first.pk}", 60)
    assert services.run_step(second.pk) is services.StepOutcome.BUSY
    assert TaskRun.objects.get(pk=second.pk).state == "queued"


def test_a_node_outage_releases_the_leases_for_the_retry(orders, node):
    run = services.create_run(kind="expiry_scan", namespace=orders)
    node.stop()
    with pytest.raises(NodeUnavailableError):
        services.run_step(run.pk)
    assert not Lease.objects.exists()
    services.fail_run(run.pk, "node unavailable after retries")
    assert TaskRun.objects.get(pk=run.pk).state == "failed"


def test_cancel_between_steps(orders):
    run = services.create_run(kind="expiry_scan", namespace=orders)
    TaskRun.objects.filter(pk=run.pk).update(cancel_requested=True)
    assert services.run_step(run.pk) is services.StepOutcome.DONE
    assert TaskRun.objects.get(pk=run.pk).state == "cancelled"


def test_scheduled_runs_do_not_pile_up(orders, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        assert services.schedule_run("expiry_scan", namespace=orders) is not None
        assert services.schedule_run("expiry_scan", namespace=orders) is None
    assert TaskRun.objects.filter(kind="expiry_scan").count() == 1


def test_a_run_whose_worker_died_is_resumed_then_failed(orders, django_capture_on_commit_callbacks):
    run = services.create_run(kind="expiry_scan", namespace=orders)
    holder = f"run:{run.pk}"
    assert leases.acquire_all(leases.shard_keys(orders, None), holder, 60)
    services.runs.mark_running(run)
    now = timezone.now()
    assert services.reap_stale_runs(now=now) == {"resumed": 0, "failed": 0}  # its leases are alive
    later = now + timedelta(seconds=61)  # the worker died: nobody extended the leases
    with django_capture_on_commit_callbacks(execute=False) as queued:
        assert services.reap_stale_runs(now=later) == {"resumed": 1, "failed": 0}
    assert len(queued) == 1
    TaskRun.objects.filter(pk=run.pk).update(params={"resumes": services.MAX_RESUMES})
    assert services.reap_stale_runs(now=later) == {"resumed": 0, "failed": 1}
    assert TaskRun.objects.get(pk=run.pk).state == "failed"
    assert leases.acquire_all(leases.shard_keys(orders, None), "run:other", 60, later)  # the shard is free


def test_compaction_and_quota_schedules_follow_the_cleanup_policy(api_as, orders):
    admin = api_as("admin")
    assert not Schedule.objects.filter(namespace=orders, kind="compaction").exists()
    admin.patch("/api/namespaces/orders/policy", {"set": {"cleanup_policy": "compact"}}, format="json")
    assert schedule("compaction").enabled
    assert not Schedule.objects.filter(node__name="node-1", kind="retention").exists()  # nothing deletes
    admin.patch("/api/namespaces/orders/policy", {"set": {"backlog_quota_bytes": 10_000_000}}, format="json")
    assert schedule("backlog_quota").interval_s == 300


def test_compaction_action_and_estimate(api_as, orders, node, django_capture_on_commit_callbacks):
    from storage_engine.api import NewRecord
    from storage_engine.node_api.client import NodeClient

    admin = api_as("admin")
    admin.patch(
        "/api/namespaces/orders/policy", {"set": {"cleanup_policy": "compact", "segment_bytes": 4096}}, format="json"
    )
    with NodeClient(node.url, node.token) as client:
        for i in range(120):
            client.append("orders", 0, [NewRecord(value=b"v" * 40, key=f"k{i % 4}".encode())])
    estimate = api_as("operator").get("/api/namespaces/orders/compaction-estimate").json()
    assert estimate["records_removable"] > 0 and estimate["reclaimable_bytes"] > 0
    response = api_as("operator").post("/api/namespaces/orders/actions", {"action": "compaction"}, format="json")
    assert response.status_code == 400 and "confirm" in response.json()["errors"]
    with django_capture_on_commit_callbacks(execute=False):
        response = api_as("operator").post(
            "/api/namespaces/orders/actions", {"action": "compaction", "confirm": "orders"}, format="json"
        )
    assert response.status_code == 202
    run = TaskRun.objects.get(pk=response.json()["id"])
    while services.run_step(run.pk) is services.StepOutcome.MORE:
        pass
    run.refresh_from_db()
    assert run.state == "succeeded", run.error
    # What compaction does now: the estimate less the part that waits for the active segment to roll.
    assert estimate["active_records_removable"] >= 0
    assert run.counts["records_removed"] == estimate["records_removable"] - estimate["active_records_removable"]


def test_a_200_character_namespace_name_gets_its_schedules(api_as, registered_node):
    name = "n" * 200
    response = api_as("admin").post("/api/namespaces/", {"name": name, "shards": 1}, format="json")
    assert response.status_code == 201, response.content
    namespace = Namespace.objects.get(name=name)
    assert not Schedule.objects.filter(namespace=namespace).exists()  # its scans are in the node's sweeps
    api_as("admin").patch(
        f"/api/namespaces/{name}/policy", {"set": {"cleanup_policy": "compact,delete"}}, format="json"
    )
    rows = list(Schedule.objects.filter(namespace=namespace))
    assert [row.kind for row in rows] == ["compaction"]
    label = schedules.schedule_name("compaction", namespace=namespace)  # what its runs carry (TaskRun.schedule)
    assert len(label) <= 200 and label != schedules.schedule_name("compaction", namespace=Namespace(name="n" * 199))
    api_as("admin").delete(f"/api/namespaces/{name}/", {"confirm": name}, format="json")
    assert not Schedule.objects.filter(pk__in=[row.pk for row in rows]).exists()


def test_the_action_table_is_served_and_the_console_fixture_matches_it(api_as, db):
    """The UI draws its action buttons from GET /api/actions; its tests use a copy of that table
    (frontend/src/test/actions.json), which must not drift from what the API serves."""
    import json
    from pathlib import Path

    served = api_as("viewer").get("/api/actions").json()
    by_kind = {a["kind"]: a for a in served}
    assert by_kind["retention"]["destructive"] and by_kind["retention"]["dry_run"]
    assert by_kind["force_delete"]["destructive"] and not by_kind["file_clean"]["destructive"]
    assert not by_kind["disk_check"]["dry_run"] and by_kind["expiry_scan"]["sweeps"]
    fixture = Path(__file__).resolve().parents[2] / "frontend" / "src" / "test" / "actions.json"
    assert json.loads(fixture.read_text()) == served


def test_a_whole_namespace_action_refuses_a_shard(api_as, orders):
    response = api_as("operator").post(
        "/api/namespaces/orders/actions", {"action": "backlog_quota", "shard": 1}, format="json"
    )
    assert response.status_code == 400 and "whole namespace" in response.json()["errors"]["shard"][0]
