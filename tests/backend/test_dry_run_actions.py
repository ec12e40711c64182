"""Dry runs of every data-changing action from the API (issue 26, DESIGN §3 "Dry runs"): message TTL,
backlog quota, offload and recall, on a namespace and node-wide, against a real node with a ``file://``
tier. Each dry run finishes in one step per node, changes nothing on the node, and its counts are what
the real run of the same action then reports; ``GET /api/actions`` offers them. A node that answers
``more`` to a dry run (an older node) does not make the control plane repeat the step."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.apps.lifecycle import services
from backend.apps.lifecycle.actions import ACTIONS
from backend.apps.nodes.models import StorageNode
from backend.apps.runs.models import TaskRun
from storage_engine.api import NewRecord, SegmentTier
from storage_engine.node_api.client import NodeClient
from tests.support.processes import NodeProc, start_node
from tests.support.receiver import Request, receiving

NEW_DRY_RUNS = ("subscription_ttl", "backlog_quota", "offload", "recall")
# The counts each kind's dry run predicts (what the real run then records).
PREDICTED = {
    "subscription_ttl": ("cursors_moved", "messages_acknowledged", "expired_records"),
    "backlog_quota": ("cursors_moved", "messages_acknowledged", "expired_records"),
    "offload": ("segments_offloaded", "bytes_offloaded", "local_copies_dropped", "local_bytes_dropped", "rolled"),
    "recall": ("segments_recalled", "bytes_recalled"),
}


@pytest.fixture
def node(tmp_path: Path) -> Iterator[NodeProc]:
    """The node of ``registered_node``, with an object-store tier in a directory."""
    proc = start_node(tmp_path / "node-data", extra=["--tier-uri", (tmp_path / "tier").as_uri()])
    yield proc
    proc.stop()


@pytest.fixture
def client(node: NodeProc) -> Iterator[NodeClient]:
    with NodeClient(node.url, node.token) as c:
        yield c


def create(api_as: Any, name: str, policy: dict[str, Any]) -> None:
    response = api_as("admin").post("/api/namespaces/", {"name": name, "shards": 2, "policy": policy}, format="json")
    assert response.status_code == 201, response.content


def node_state(client: NodeClient) -> Any:
    """What a dry run must leave as it was on the node: every shard's figures, segments (with their tiers)
    and records, and every subscription's cursors."""
    out: list[Any] = []
    for info in client.list_namespaces():
        for shard in range(info.shards):
            records = [(r.offset, r.value) for r in client.read(info.name, shard, 0, max_records=10_000).records]
            segments = client.list_segments(info.name, shard)
            out.append((info.name, shard, client.shard_stats(info.name, shard), segments, records))
        out.append([(s["name"], s["cursors"]) for s in client.list_subscriptions(info.name)])
    return out


def start(api_as: Any, target: str, action: str, dry_run: bool) -> TaskRun:
    body: dict[str, Any] = {"action": action, "dry_run": dry_run}
    name = target.split("/")[-1]
    if not dry_run and ACTIONS[action].destructive:
        body["confirm"] = name
    response = api_as("operator").post(f"/api/{target}/actions", body, format="json")
    assert response.status_code == 202, response.json()
    assert response.json()["dry_run"] is dry_run
    return TaskRun.objects.get(pk=response.json()["id"])


def run_to_end(run: TaskRun) -> tuple[TaskRun, int]:
    """Drive the run as its Celery task does; how many steps it took."""
    steps = 1
    while services.run_step(run.pk) is services.StepOutcome.MORE:
        steps += 1
        assert steps < 200
    run.refresh_from_db()
    assert run.state == "succeeded", run.error
    return run, steps


def dry_then_real(api_as: Any, client: NodeClient, target: str, action: str) -> tuple[TaskRun, TaskRun]:
    before = node_state(client)
    dry, steps = run_to_end(start(api_as, target, action, dry_run=True))
    assert steps == 1, f"a dry run of {action} took {steps} steps"
    assert node_state(client) == before, f"a dry run of {action} changed the node"
    real, _ = run_to_end(start(api_as, target, action, dry_run=False))
    for name in PREDICTED[action]:
        assert dry.counts.get(name, 0) == real.counts.get(name, 0), (action, name, dry.counts, real.counts)
    summary = api_as("viewer").get(f"/api/runs/{dry.pk}/").json()["summary"]
    assert summary == api_as("viewer").get(f"/api/runs/{real.pk}/").json()["summary"]
    return dry, real


def test_the_actions_table_offers_a_dry_run_for_every_action_that_changes_data(api_as, registered_node):
    served = {a["kind"]: a for a in api_as("viewer").get("/api/actions").json()}
    assert {kind for kind, a in served.items() if not a["dry_run"]} == {"disk_check"}  # a measurement
    for kind in NEW_DRY_RUNS:
        assert served[kind]["dry_run"], kind
    fixture = Path(__file__).resolve().parents[2] / "frontend" / "src" / "test" / "actions.json"
    assert json.loads(fixture.read_text()) == list(served.values())  # the console's copy follows
    refused = api_as("operator").post("/api/nodes/node-1/actions", {"action": "disk_check", "dry_run": True})
    assert refused.status_code == 400 and "not disk_check" in refused.json()["errors"]["dry_run"][0]
    assert not TaskRun.objects.exists()


@pytest.mark.parametrize("scope", ["namespace", "node"])
def test_message_ttl_and_backlog_quota_dry_runs(api_as, registered_node, client, scope):
    create(api_as, "subs", {})
    client.create_subscription("subs", "late")
    for shard in (0, 1):
        client.append("subs", shard, [NewRecord(value=b"old", expire_at=1)] * (4 + shard))
        client.append("subs", shard, [NewRecord(value=b"live" * 50)] * 20)
    target = "namespaces/subs" if scope == "namespace" else "nodes/node-1"
    dry, _ = dry_then_real(api_as, client, target, "subscription_ttl")
    assert (dry.counts["cursors_moved"], dry.counts["messages_acknowledged"]) == (2, 9)
    assert dry.counts["expired_records"] == 0  # cursors move past messages: nothing is marked dead
    summary = api_as("viewer").get(f"/api/runs/{dry.pk}/").json()["summary"]
    assert (summary["records"], summary["segments"], summary["bytes"]) == (9, 0, 0)  # messages, not records removed
    assert [s["cursors"] for s in client.list_subscriptions("subs")] == [[3, 4]]  # the real run moved them

    # Backlog quota is a namespace action: eviction to 90 % of a quota of a third of the backlog.
    backlog = sum(b["bytes"] for b in client.backlog("subs", "late"))
    response = api_as("admin").patch(
        "/api/namespaces/subs/policy",
        {"set": {"backlog_quota_bytes": backlog // 3, "backlog_quota_policy": "consumer_backlog_eviction"}},
        format="json",
    )
    assert response.status_code == 200, response.content
    dry, _ = dry_then_real(api_as, client, "namespaces/subs", "backlog_quota")
    assert dry.counts["cursors_moved"] > 0 and dry.counts["messages_acknowledged"] > 0
    assert sum(b["bytes"] for b in client.backlog("subs", "late")) <= 0.9 * (backlog // 3)


@pytest.mark.parametrize("scope", ["namespace", "node"])
def test_offload_and_recall_dry_runs(api_as, registered_node, client, scope):
    """More segments than one recall step takes (16), so a budgeted dry run would have answered ``more``."""
    create(api_as, "cold", {"segment_bytes": 1024, "remote_storage_enabled": True, "local_retention_bytes": 3_000})
    for i in range(160):
        client.append("cold", i % 2, [NewRecord(value=b"%d:" % i + b"v" * 200)])
    target = "namespaces/cold" if scope == "namespace" else "nodes/node-1"
    dry, _ = dry_then_real(api_as, client, target, "offload")
    assert dry.counts["segments_offloaded"] > 16 and dry.counts["local_copies_dropped"] > 16
    remote = [s for shard in (0, 1) for s in client.list_segments("cold", shard) if s.tier is SegmentTier.REMOTE]
    assert len(remote) == dry.counts["local_copies_dropped"]

    response = api_as("admin").patch(
        "/api/namespaces/cold/policy", {"set": {"remote_storage_enabled": False}}, format="json"
    )
    assert response.status_code == 200, response.content
    dry, _ = dry_then_real(api_as, client, target, "recall")
    assert dry.counts["segments_recalled"] == len(remote) > 16  # each once: the looping dry run counted 1,651 of 19
    assert dry.counts["bytes_recalled"] == sum(s.size_bytes for s in remote)


def test_a_dry_run_is_never_repeated_on_the_same_target(api_as, db):
    """A node that answers ``more`` to a dry run (one from before dry runs had no budget) would have the
    run count the same segments at every repetition: the control plane takes the one answer and stops."""

    def answer(request: Request) -> tuple[int, str, bytes]:
        body = {"operation": "recall", "segments_recalled": 16, "bytes_recalled": 16_384, "more": True}
        return 200, "application/json", json.dumps(body).encode()

    with receiving() as stand_in:
        stand_in.answer = answer
        node = StorageNode.objects.create(name="old-node", url=stand_in.url, token="t0ken")
        dry = services.create_run(kind="recall", node=node, dry_run=True, params={"manual": True})
        assert services.run_step(dry.pk) is services.StepOutcome.DONE
        dry.refresh_from_db()
        assert dry.state == "succeeded" and dry.counts["segments_recalled"] == 16
        assert [r.path.split("?")[0] for r in stand_in.received] == ["/v1/node/lifecycle/recall"]
        assert "dry_run=true" in stand_in.received[0].path
        real = services.create_run(kind="recall", node=node, params={"manual": True})
        assert services.run_step(real.pk) is services.StepOutcome.MORE  # a real run follows ``more``
