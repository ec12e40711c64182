"""Tiered storage in the control plane (issue 19): the offload run kind (scheduled per node as a sweep when a
hosted namespace has remote storage, a manual action, leases and counts like the other kinds), the catalog's
segment tiers and local/remote bytes (equal to what the node reports), the tier filter, the node series and
the default alert rules on offload lag and repeated upload errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command

from backend.apps.alerts.models import AlertRule
from backend.apps.alerts.promql import rule_expr
from backend.apps.alerts.services import ensure_default_rules
from backend.apps.audit.models import AuditEntry
from backend.apps.catalog import services as catalog
from backend.apps.catalog.models import Segment, ShardStatus
from backend.apps.lifecycle import leases, services
from backend.apps.lifecycle.models import Schedule
from backend.apps.metrics import services as metrics
from backend.apps.metrics.models import MetricSeries
from backend.apps.namespaces.models import Namespace
from backend.apps.runs.models import TaskRun
from storage_engine.api import NewRecord
from storage_engine.node_api.client import NodeClient
from tests.support.processes import NodeProc, start_node
from tests.support.promtool import needs_promtool, run_rule_tests

RECORDS = 150


@pytest.fixture
def node(tmp_path: Path) -> Iterator[NodeProc]:
    """The node of ``registered_node``, with an object-store tier in a directory."""
    proc = start_node(tmp_path / "node-data", extra=["--tier-uri", (tmp_path / "tier").as_uri()])
    yield proc
    proc.stop()


@pytest.fixture
def cold(api_as: Any, registered_node: Any, node: NodeProc) -> Namespace:
    """A namespace with remote storage, small segments and a local retention of about two segments per shard,
    holding sealed segments on both shards."""
    response = api_as("admin").post(
        "/api/namespaces/",
        {
            "name": "cold",
            "shards": 2,
            "policy": {"segment_bytes": 4096, "remote_storage_enabled": True, "local_retention_bytes": 10_000},
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    with NodeClient(node.url, node.token) as client:
        for i in range(RECORDS):
            client.append("cold", i % 2, [NewRecord(value=b"%d:" % i + b"v" * 200, key=b"k%d" % (i % 7))])
    return Namespace.objects.select_related("node").get(name="cold")


def sweep(kind: str, node: str = "node-1") -> Schedule:
    return Schedule.objects.get(node__name=node, kind=kind)


def run_to_end(run_id: int) -> TaskRun:
    while services.run_step(run_id) is services.StepOutcome.MORE:
        pass
    return TaskRun.objects.get(pk=run_id)


def test_offload_is_swept_per_node_only_while_a_hosted_namespace_has_remote_storage(api_as, registered_node):
    admin = api_as("admin")
    assert admin.post("/api/namespaces/", {"name": "hot", "shards": 1}, format="json").status_code == 201
    assert not Schedule.objects.filter(kind="offload").exists()
    admin.patch("/api/namespaces/hot/policy", {"set": {"remote_storage_enabled": True}}, format="json")
    assert sweep("offload").interval_s == 60  # scan_interval_ms's default
    assert not Schedule.objects.filter(namespace__name="hot").exists()  # swept: nothing per namespace
    admin.patch("/api/namespaces/hot/policy", {"set": {"scan_interval_ms": 20_000}}, format="json")
    assert sweep("offload").interval_s == 20
    admin.patch("/api/namespaces/hot/policy", {"set": {"remote_storage_enabled": False}}, format="json")
    assert not Schedule.objects.filter(kind="offload").exists()


def test_the_offload_action_is_served_for_namespaces_and_nodes(api_as, db):
    served = {a["kind"]: a for a in api_as("viewer").get("/api/actions").json()}
    offload = served["offload"]
    assert offload["operation"] == "offload" and offload["scope"] == "namespace" and offload["sweeps"]
    assert not offload["destructive"] and offload["dry_run"]  # what it would upload and drop (issue 26)


def test_an_offload_run_moves_segments_and_the_catalog_shows_the_tiers_the_node_reports(
    api_as, cold, node, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        response = api_as("operator").post("/api/namespaces/cold/actions", {"action": "offload"}, format="json")
    assert response.status_code == 202, response.content
    run_id = response.json()["id"]
    # Leases as every kind: a run holding the namespace's shards makes the step wait.
    assert leases.acquire_all(leases.shard_keys(cold, None), "run:other", 60)
    assert services.run_step(run_id) is services.StepOutcome.BUSY
    leases.release_all(leases.shard_keys(cold, None), "run:other")
    catalog.sync_namespace(cold)  # the catalog before: every segment local
    assert set(Segment.objects.filter(namespace=cold).values_list("tier", flat=True)) == {"local"}
    synced_before = {row.shard: row.segments_synced_at for row in ShardStatus.objects.filter(namespace=cold)}
    run = run_to_end(run_id)
    assert run.state == "succeeded", run.error
    assert run.counts["segments_offloaded"] > 0 and run.counts["bytes_offloaded"] > 0
    assert run.counts["local_copies_dropped"] > 0 and run.counts["local_bytes_dropped"] > 0

    # The step marked the shards due for a sync (an offload changes no figure a collection sees).
    assert catalog.sync_stalest(limit=1).updated > 0
    for row in ShardStatus.objects.filter(namespace=cold):
        assert row.segments_synced_at > synced_before[row.shard]

    with NodeClient(node.url, node.token) as client:
        listed = {(s.shard, s.base_offset): s.tier.value for n in (0, 1) for s in client.list_segments("cold", n)}
        counters = client.stats()["counters"]
    rows = {(s.shard, s.base_offset): s.tier for s in Segment.objects.filter(namespace=cold)}
    assert rows == listed
    assert {"local", "remote"} <= set(rows.values())
    assert sum(tier != "local" for tier in rows.values()) == run.counts["segments_offloaded"]

    # The namespace's local and remote-only bytes are the node's (it hosts nothing else), and add up to stored.
    summary = api_as("viewer").get("/api/namespaces/cold/summary").json()
    assert summary["local_bytes"] == counters["tier_local_bytes"]
    assert summary["remote_only_bytes"] == counters["tier_remote_only_bytes"]
    assert summary["remote_only_bytes"] > 0 and summary["local_bytes"] > 0
    assert summary["stored_bytes"] == summary["local_bytes"] + summary["remote_only_bytes"]
    assert sum(s["local_bytes"] for s in summary["shards"]) == summary["local_bytes"]
    # The namespace list's row carries the same figures.
    (row,) = [n for n in api_as("viewer").get("/api/namespaces/").json()["results"] if n["name"] == "cold"]
    split = ("stored_bytes", "local_bytes", "remote_only_bytes")
    assert [row[k] for k in split] == [summary[k] for k in split]

    # The tier filter and column of the segment list.
    page = api_as("viewer").get("/api/segments/", {"namespace": "cold", "tier": "remote"}).json()
    assert page["results"] and {s["tier"] for s in page["results"]} == {"remote"}
    assert len(page["results"]) == sum(tier == "remote" for tier in rows.values())
    refused = api_as("viewer").get("/api/segments/", {"tier": "cloud"})
    assert refused.status_code == 400 and "tier" in refused.json()["errors"]

    # A metrics collection stores the node's tier gauges and every shard's split; Overview's totals and the node's
    # are that collection's.
    metrics.collect()
    series = {s.name: s.last_value for s in MetricSeries.objects.filter(node="node-1", name__startswith="tier_")}
    assert series["tier_local_bytes"] == counters["tier_local_bytes"]
    assert series["tier_remote_bytes"] == counters["tier_remote_bytes"]
    assert series["tier_offload_lag_seconds"] == 0 and series["tier_offload_pending_segments"] == 0
    overview = api_as("viewer").get("/api/metrics/summary").json()
    assert [overview[k] for k in split] == [summary[k] for k in split]
    (node_row,) = overview["nodes"]
    assert (node_row["local_bytes"], node_row["remote_only_bytes"]) == (
        summary["local_bytes"],
        summary["remote_only_bytes"],
    )


def test_the_recall_action_is_served_with_a_dry_run_and_deletes_nothing(api_as, db):
    served = {a["kind"]: a for a in api_as("viewer").get("/api/actions").json()}
    recall = served["recall"]
    assert recall["operation"] == "recall" and recall["scope"] == "namespace" and recall["sweeps"]
    assert not recall["destructive"] and recall["dry_run"]
    assert recall["label"] == "Recall from the object store" and "disk_max_used_ratio" in recall["help"]


def start(api_as: Any, action: str, capture: Any, **extra: Any) -> int:
    with capture(execute=False):
        response = api_as("operator").post("/api/namespaces/cold/actions", {"action": action, **extra}, format="json")
    assert response.status_code == 202, response.content
    return int(response.json()["id"])


def test_a_recall_run_brings_segments_back_counts_them_and_syncs_the_catalog(
    api_as, cold, node, django_capture_on_commit_callbacks
):
    offload = run_to_end(start(api_as, "offload", django_capture_on_commit_callbacks))
    assert offload.state == "succeeded" and offload.counts["local_copies_dropped"] > 0
    dropped = offload.counts["local_copies_dropped"]
    # Local retention still says remote: nothing comes back, and the run says so by its counts.
    kept = run_to_end(start(api_as, "recall", django_capture_on_commit_callbacks))
    assert kept.state == "succeeded" and kept.counts["segments_recalled"] == 0
    # The run says why it did nothing, in the operator's words (the node answered skipped="policy").
    assert kept.params["skipped"] == "policy" and "raise local_retention_ms" in kept.params["skipped_reason"]
    # Raise local retention: the policy keeps everything local, so a recall brings every copy back.
    patched = api_as("admin").patch(
        "/api/namespaces/cold/policy", {"set": {"local_retention_bytes": 1_000_000_000}}, format="json"
    )
    assert patched.status_code == 200, patched.content
    dry = run_to_end(start(api_as, "recall", django_capture_on_commit_callbacks, dry_run=True))
    assert dry.state == "succeeded" and dry.dry_run and dry.counts["segments_recalled"] == dropped
    assert api_as("viewer").get(f"/api/runs/{dry.pk}/").json()["summary"] == {
        "records": 0,  # a recall removes nothing: it would bring back this many segments and bytes
        "segments": dropped,
        "bytes": dry.counts["bytes_recalled"],
        "pending_bytes": 0,
    }
    with NodeClient(node.url, node.token) as client:
        assert "remote" in {s.tier.value for n in (0, 1) for s in client.list_segments("cold", n)}
    catalog.sync_namespace(cold)
    synced_before = {row.shard: row.segments_synced_at for row in ShardStatus.objects.filter(namespace=cold)}
    run = run_to_end(start(api_as, "recall", django_capture_on_commit_callbacks))
    assert run.state == "succeeded", run.error
    assert run.counts["segments_recalled"] == dropped and run.counts["bytes_recalled"] > 0
    assert "segments_offloaded" not in run.counts  # a recall records its own counts, not an offload's
    assert "skipped" not in run.params
    assert AuditEntry.objects.filter(action="action.recall", target="cold").count() == 3
    # The step marked the shards due for a sync: the catalog shows every segment local again.
    assert catalog.sync_stalest(limit=1).updated > 0
    for row in ShardStatus.objects.filter(namespace=cold):
        assert row.segments_synced_at > synced_before[row.shard]
    rows = set(Segment.objects.filter(namespace=cold).values_list("tier", flat=True))
    assert "remote" not in rows and "both" in rows
    with NodeClient(node.url, node.token) as client:
        counters = client.stats()["counters"]
    assert (
        counters["tier_remote_only_bytes"] == 0
        and counters["tier_bytes_recalled_total"] == run.counts["bytes_recalled"]
    )
    summary = api_as("viewer").get("/api/namespaces/cold/summary").json()
    assert summary["local_bytes"] == counters["tier_local_bytes"]


def test_a_recall_the_disk_has_no_room_for_fails_the_run_naming_the_watermark(
    api_as, cold, node, django_capture_on_commit_callbacks
):
    assert run_to_end(start(api_as, "offload", django_capture_on_commit_callbacks)).state == "succeeded"
    api_as("admin").patch("/api/namespaces/cold/policy", {"set": {"remote_storage_enabled": False}}, format="json")
    with NodeClient(node.url, node.token) as client:
        policy = client.node_policy()
        client.set_node_policy(
            {**policy, "disk_max_used_ratio": 0.0, "disk_clean_forcibly_ratio": 0.0, "disk_warning_ratio": 0.0}
        )
    run = run_to_end(start(api_as, "recall", django_capture_on_commit_callbacks))
    assert run.state == "failed" and "disk_warning_ratio" in run.error and "recall refused" in run.error
    assert run.counts.get("segments_recalled", 0) == 0


def test_a_node_sweep_offloads_every_tiered_namespace_it_hosts(api_as, cold, node, django_capture_on_commit_callbacks):
    api_as("admin").post("/api/namespaces/", {"name": "plain", "shards": 1}, format="json")
    with django_capture_on_commit_callbacks(execute=False):
        run = services.schedule_run("offload", node=cold.node, schedule="sweep")
        assert services.schedule_run("offload", node=cold.node) is None  # one sweep at a time
    assert run is not None and run.namespace is None
    run = run_to_end(run.pk)
    assert run.state == "succeeded", run.error
    with NodeClient(node.url, node.token) as client:
        pending = client.stats()["counters"]["tier_offload_pending_segments"]
        assert all(s.tier.value == "local" for s in client.list_segments("plain", 0))
    assert run.counts["segments_offloaded"] > 0 and pending == 0


def test_default_rules_watch_offload_lag_and_repeated_upload_errors(db):
    ensure_default_rules()
    lag = AlertRule.objects.get(default_key="offload_lag")
    errors = AlertRule.objects.get(default_key="offload_errors")
    assert (lag.metric, lag.comparator, lag.threshold) == ("tier_offload_lag_seconds", ">", 3600)
    assert (errors.metric, errors.comparator, errors.threshold) == ("tier_offload_failure_rate", ">", 0)
    assert errors.for_s == 900  # repeated: failing for 15 minutes, not one failure the offloader retries
    assert rule_expr(lag).startswith("lcs_tier_offload_lag_seconds ")
    assert rule_expr(errors).startswith("rate(lcs_tier_offload_failures_total[5m]) ")


def test_the_upload_failure_rate_spans_five_minutes(db, registered_node):
    """A failure every few minutes (the offloader backing off) keeps the rate above 0 between collections."""
    from backend.apps.metrics.services import write_points

    labels = ("tier_offload_failures_total", "node-1", "", None, "")
    write_points(1_000_000, {labels: 3.0})
    write_points(1_060_000, {labels: 4.0})
    points = {labels: 4.0, ("up", "node-1", "", None, ""): 1.0}
    metrics._derived_points(1_120_000, points, {})
    assert points[("tier_offload_failure_rate", "node-1", "", None, "")] == pytest.approx(1 / 120)
    points = {labels: 4.0, ("up", "node-1", "", None, ""): 1.0}
    metrics._derived_points(1_000_000 + 301_000, points, {})  # the sample of 1,000,000 is out of the window
    assert points[("tier_offload_failure_rate", "node-1", "", None, "")] == 0


def test_segments_moved_by_the_node_itself_are_synced_after_the_next_collection(cold, node):
    """The node's file cleaner offloads under disk pressure without a run: the tier gauges a collection reads
    change, and the catalog syncs the node's namespaces."""
    catalog.sync_namespace(cold)
    metrics.collect()
    assert not catalog._unsynced(cold, 0).exists()
    with NodeClient(node.url, node.token) as client:
        while client.lifecycle_step(None, "offload").more:
            pass
    metrics.collect()
    assert catalog._unsynced(cold, 0).exists() and catalog._unsynced(cold, 1).exists()
    catalog.sync_stalest()
    assert Segment.objects.filter(namespace=cold).exclude(tier="local").exists()
    assert not catalog._unsynced(cold, 0).exists()
    metrics.collect()  # unchanged gauges: nothing marked
    assert not catalog._unsynced(cold, 0).exists()


@needs_promtool
def test_promtool_fires_and_resolves_the_offload_rules(db, tmp_path):
    """The exported rules on input series as a node and the console publish them: a lag over an hour fires
    after 10 minutes; upload failures every minute fire after 15 and resolve once they stop."""
    ensure_default_rules()
    lag = AlertRule.objects.get(default_key="offload_lag")
    errors = AlertRule.objects.get(default_key="offload_errors")
    call_command("export_alert_rules", "-o", str(tmp_path / "rules.yml"))
    node = 'instance="n1:7070",job="lcs-node",node="n1"'
    web = 'instance="web:8000",job="lcs-web"'
    labels = {"instance": "n1:7070", "job": "lcs-node", "node": "n1", "severity": "warning"}

    def fired(rule: AlertRule, summary: str) -> list[dict[str, Any]]:
        return [
            {
                "exp_labels": {**labels, "rule": str(rule.pk)},
                "exp_annotations": {"summary": summary, "description": rule.description},
            }
        ]

    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f"lcs_tier_offload_lag_seconds{{{node}}}", "values": "0x4 4000x40"},
                    {"series": f'lcs_alert_rule_threshold{{{web},rule="{lag.pk}"}}', "values": "3600x45"},
                    # 60 failures a minute from 5 to 30 min, then none
                    {"series": f"lcs_tier_offload_failures_total{{{node}}}", "values": "0x4 60+60x25 1560x15"},
                    {"series": f'lcs_alert_rule_threshold{{{web},rule="{errors.pk}"}}', "values": "0x45"},
                ],
                "alert_rule_test": [
                    {"eval_time": "14m", "alertname": "OffloadLagAbove1Hour", "exp_alerts": []},  # for 10m
                    {
                        "eval_time": "15m",
                        "alertname": "OffloadLagAbove1Hour",
                        "exp_alerts": fired(
                            lag, "Offload lag above 1 hour: tier_offload_lag_seconds 1h 6m 40s (node n1)"
                        ),
                    },
                    {"eval_time": "19m", "alertname": "RepeatedUploadErrorsToTheObjectStore", "exp_alerts": []},
                    {
                        "eval_time": "25m",
                        "alertname": "RepeatedUploadErrorsToTheObjectStore",
                        "exp_alerts": fired(
                            errors, "Repeated upload errors to the object store: tier_offload_failure_rate 1 (node n1)"
                        ),
                    },
                    {"eval_time": "40m", "alertname": "RepeatedUploadErrorsToTheObjectStore", "exp_alerts": []},
                ],
            }
        ],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    run_rule_tests(tmp_path / "tests.yml")


def test_a_compacted_namespace_with_remote_storage_is_offloaded_then_compacted(
    api_as, registered_node, node, django_capture_on_commit_callbacks
):
    """Remote storage goes with cleanup_policy compact (no longer refused): the node compacts its offloaded
    segments by rewriting them under a new generation (storage_engine/tier/rewrite.py), and the catalog shows
    the rewritten segments with a local copy again (both) and every key's latest record kept."""
    policy = {
        "segment_bytes": 4096,
        "cleanup_policy": "compact",
        "remote_storage_enabled": True,
        "local_retention_ms": 0,
        "min_compaction_lag_ms": 0,
    }
    response = api_as("admin").post("/api/namespaces/", {"name": "keyed", "shards": 1, "policy": policy}, format="json")
    assert response.status_code == 201, response.content
    changed = api_as("admin").patch(
        "/api/namespaces/keyed/policy", {"set": {"cleanup_policy": "compact,delete"}}, format="json"
    )
    assert changed.status_code == 200, changed.content
    with NodeClient(node.url, node.token) as client:
        for i in range(RECORDS):
            client.append("keyed", 0, [NewRecord(value=b"%d:" % i + b"v" * 200, key=b"k%d" % (i % 7))])

    def run(action: dict[str, str]) -> TaskRun:
        with django_capture_on_commit_callbacks(execute=False):
            response = api_as("operator").post("/api/namespaces/keyed/actions", action, format="json")
        assert response.status_code == 202, response.content
        done = run_to_end(response.json()["id"])
        assert done.state == "succeeded", done.error
        return done

    offloaded = run({"action": "offload"})
    assert offloaded.counts["segments_offloaded"] > 0 and offloaded.counts["local_copies_dropped"] > 0
    compacted = run({"action": "compaction", "confirm": "keyed"})
    assert compacted.counts["records_removed"] > 0 and compacted.counts["segments_rewritten"] > 0
    namespace = Namespace.objects.get(name="keyed")
    catalog.sync_namespace(namespace)
    with NodeClient(node.url, node.token) as client:
        listed = {s.base_offset: s.tier.value for s in client.list_segments("keyed", 0)}
        latest = {k: client.read_key("keyed", 0, f"k{k}") for k in range(7)}
        report = client.verify("keyed")
    assert report["ok"], report
    assert {s.base_offset: s.tier for s in Segment.objects.filter(namespace=namespace)} == listed
    assert "both" in listed.values()
    for k, found in latest.items():
        assert found is not None and found.offset == max(i for i in range(RECORDS) if i % 7 == k)
