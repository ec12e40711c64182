"""Deadline-driven sweeps (issue 15): a node's sweep of a kind is scheduled for the node's next due time
(``GET /v1/node/next-due``), at most one pending per node and kind, and each finished sweep schedules
the next; the beat schedule stays as a safety net at a longer interval."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from backend.apps.lifecycle import schedules, services, tasks
from backend.apps.lifecycle.models import DueSweep, Schedule
from backend.apps.namespaces.models import Namespace
from backend.apps.runs.models import TaskRun
from storage_engine.api import NewRecord
from storage_engine.node_api.client import NodeClient


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The due sweeps handed to Celery (their args and eta), instead of a broker."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(tasks.due_sweep, "apply_async", lambda args, **kw: calls.append({"args": args, **kw}))
    return calls


@pytest.fixture
def ttl_ns(api_as, registered_node) -> Namespace:
    response = api_as("admin").post(
        "/api/namespaces/",
        {"name": "short", "shards": 2, "policy": {"ttl_ms": 600_000, "scan_interval_ms": 5_000}},
        format="json",
    )
    assert response.status_code == 201
    return Namespace.objects.select_related("node").get(name="short")


def test_the_beat_schedule_becomes_a_safety_net_beside_a_due_time_poll(ttl_ns, settings):
    node = ttl_ns.node

    def every(kind: str) -> int:
        return Schedule.objects.get(node=node, kind=kind).interval_s

    assert every("expiry_scan") == 60
    assert every("reclaim") == 300  # longer already
    poll = Schedule.objects.get(node=node, kind=schedules.DUE_POLL)
    assert schedules.task_of(poll) == (schedules.DUE_POLL_TASK, {"node_id": node.pk})
    assert poll.interval_s == schedules.DUE_POLL_S
    settings.LIFECYCLE_DEADLINES = False  # off: the policies' intervals, no poll
    schedules.derive_schedules(node=node)
    assert every("expiry_scan") == 5
    assert not Schedule.objects.filter(node=node, kind=schedules.DUE_POLL).exists()


def test_a_sweep_is_scheduled_at_the_nodes_next_due_time_and_coalesced(
    ttl_ns, node, sent, django_capture_on_commit_callbacks
):
    node_model = ttl_ns.node
    now = int(time.time() * 1000)
    with NodeClient(node.url, node.token) as client:
        client.append("short", 0, [NewRecord(value=b"x", expire_at=now + 30_000)] * 2)
        client.append("short", 1, [NewRecord(value=b"y", expire_at=now + 45_000)])
        due = client.next_due()
    assert due["due"]["expire-scan"] == now + 30_000 and due["due"]["reclaim"] == now + 30_000
    before = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        scheduled = services.schedule_due_sweeps(node_model)
    after = timezone.now()
    # The expiry scan and reclamation at the first deadline (node clock), plus the grace; retention much later.
    for kind in ("expiry_scan", "reclaim"):
        wait = timedelta(milliseconds=now + 30_000 - due["now"] + services.DUE_GRACE_MS)
        assert before + wait - timedelta(seconds=2) <= scheduled[kind] <= after + wait + timedelta(seconds=2)
    assert scheduled["retention"] is not None and scheduled["retention"] > after + timedelta(days=6)
    by_kind = {call["args"][0]: call for call in sent}
    assert set(by_kind) == {"expiry_scan", "reclaim", "retention"}
    assert by_kind["reclaim"]["eta"] == scheduled["reclaim"] and by_kind["reclaim"]["queue"].endswith(".node-1")
    rows = {row.kind: row for row in DueSweep.objects.all()}
    assert rows["reclaim"].due_ms == now + 30_000 and rows["reclaim"].token == by_kind["reclaim"]["args"][2]

    # Coalesced: asking again (a poll, another sweep finishing) leaves the pending sweeps alone.
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert set(services.schedule_due_sweeps(node_model).values()) == {None}
    assert sent == [] and DueSweep.objects.count() == 3

    # An earlier deadline supersedes the pending sweep; the superseded task then does nothing.
    old_token = rows["expiry_scan"].token
    with NodeClient(node.url, node.token) as client:
        client.append("short", 1, [NewRecord(value=b"z", expire_at=now + 10_000)])
    with django_capture_on_commit_callbacks(execute=True):
        again = services.schedule_due_sweeps(node_model)
    assert again["expiry_scan"] is not None and again["expiry_scan"] < scheduled["expiry_scan"]
    # Reclamation moves to that deadline too: the active segment's expired-share roll
    # (segment_expired_roll_ratio) is due no later than its first deadline (a lower bound,
    # figures.expired_by, asked again then), and a pending sweep is superseded by an earlier one.
    assert {call["args"][0] for call in sent} == {"expiry_scan", "reclaim"}
    assert abs(again["reclaim"] - again["expiry_scan"]) < timedelta(seconds=1) and again["retention"] is None
    assert services.run_due_sweep("expiry_scan", node_model.pk, old_token) is None  # superseded
    assert not TaskRun.objects.exists()


def test_a_due_sweep_runs_and_schedules_the_next(ttl_ns, node, sent, django_capture_on_commit_callbacks):
    node_model = ttl_ns.node
    now = int(time.time() * 1000)
    with NodeClient(node.url, node.token) as client:
        client.append("short", 0, [NewRecord(value=b"gone", expire_at=now - 1_000)] * 3)  # due already
        client.append("short", 1, [NewRecord(value=b"later", expire_at=now + 50_000)])
    with django_capture_on_commit_callbacks(execute=True):
        services.schedule_due_sweeps(node_model)
    first = next(call for call in sent if call["args"][0] == "expiry_scan")
    assert first["eta"] <= timezone.now() + timedelta(milliseconds=services.DUE_GRACE_MS)  # due now: no wait
    sent.clear()
    with django_capture_on_commit_callbacks(execute=False):
        run_id = services.run_due_sweep(*first["args"])
    assert run_id is not None
    assert services.run_due_sweep(*first["args"]) is None  # a task delivered twice starts one run
    run = TaskRun.objects.get(pk=run_id)
    assert (run.kind, run.node_id, run.namespace_id) == ("expiry_scan", node_model.pk, None)
    assert run.schedule == "lifecycle: expiry_scan of node node-1 (due)"
    assert run.params == {"due": True}  # its steps sweep the shards due now only (POST /v1/node/due/...)
    with django_capture_on_commit_callbacks(execute=True):
        while services.run_step(run_id) is services.StepOutcome.MORE:
            pass
    run.refresh_from_db()
    assert run.state == "succeeded" and run.counts["expired_records"] == 3
    # Finished: the next scan is pending at the next TTL deadline.
    nxt = next(call for call in sent if call["args"][0] == "expiry_scan")
    row = DueSweep.objects.get(kind="expiry_scan")
    assert row.due_ms == now + 50_000 and not row.fired and row.token == nxt["args"][2]


def test_a_due_time_a_sweep_did_not_clear_is_left_to_the_beat_schedule(
    ttl_ns, sent, django_capture_on_commit_callbacks
):
    node_model = ttl_ns.node
    now_ms = int(time.time() * 1000)
    stuck = {"now": now_ms, "due": {"expire-scan": now_ms - 5_000, "reclaim": None, "retention": None}}
    with django_capture_on_commit_callbacks(execute=True):
        services.schedule_due_sweeps(node_model, stuck)
    token = sent[-1]["args"][2]
    with django_capture_on_commit_callbacks(execute=False):
        assert services.run_due_sweep("expiry_scan", node_model.pk, token) is not None
    TaskRun.objects.update(state="succeeded")
    sent.clear()
    # The node still says "due 5 s ago" after a sweep that ran after that moment (say, off-peak hours):
    # no sweep again at once, and no loop; a later due time is scheduled as usual.
    with django_capture_on_commit_callbacks(execute=True):
        assert services.schedule_due_sweeps(node_model, stuck)["expiry_scan"] is None
        later = {"now": now_ms, "due": {"expire-scan": now_ms + 1_000, "reclaim": None, "retention": None}}
        assert services.schedule_due_sweeps(node_model, later)["expiry_scan"] is not None
    assert [call["args"][0] for call in sent] == ["expiry_scan"]


def test_a_due_sweep_while_a_run_is_going_waits_for_that_run(ttl_ns, sent, django_capture_on_commit_callbacks):
    node_model = ttl_ns.node
    now_ms = int(time.time() * 1000)
    answer = {"now": now_ms, "due": {"expire-scan": now_ms, "reclaim": None, "retention": None}}
    with django_capture_on_commit_callbacks(execute=False):
        assert services.schedule_run("expiry_scan", node=node_model) is not None  # e.g. the beat's
    with django_capture_on_commit_callbacks(execute=True):
        services.schedule_due_sweeps(node_model, answer)
    with django_capture_on_commit_callbacks(execute=False):
        assert services.run_due_sweep("expiry_scan", node_model.pk, sent[-1]["args"][2]) is None
    row = DueSweep.objects.get(kind="expiry_scan")
    assert (row.fired, row.token) == (False, "")  # the running one asks again when it finishes
    assert TaskRun.objects.count() == 1


def test_the_poll_task_schedules_from_the_node(ttl_ns, node, sent, django_capture_on_commit_callbacks):
    with NodeClient(node.url, node.token) as client:
        client.append("short", 0, [NewRecord(value=b"x")])  # the namespace TTL: reclaim due in 10 min
    with django_capture_on_commit_callbacks(execute=True):
        tasks.poll_due_sweeps(ttl_ns.node_id)
    assert {call["args"][0] for call in sent} == {"reclaim", "retention"}


def test_due_sweeps_of_a_kind_keep_a_minimum_gap(ttl_ns, sent, django_capture_on_commit_callbacks):
    """Deadlines come as often as batches do: after a due sweep ran, the next one of its kind waits at
    least DUE_MIN_GAP_MS after it, even for a due time already passed."""
    node_model = ttl_ns.node
    now_ms = int(time.time() * 1000)
    first = {"now": now_ms, "due": {"expire-scan": None, "reclaim": now_ms, "retention": None}}
    with django_capture_on_commit_callbacks(execute=True):
        services.schedule_due_sweeps(node_model, first)
    fired_eta = sent[-1]["eta"]
    with django_capture_on_commit_callbacks(execute=False):
        assert services.run_due_sweep("reclaim", node_model.pk, sent[-1]["args"][2]) is not None
    TaskRun.objects.update(state="succeeded")
    soon = {"now": now_ms, "due": {"expire-scan": None, "reclaim": now_ms + 1, "retention": None}}
    with django_capture_on_commit_callbacks(execute=True):
        eta = services.schedule_due_sweeps(node_model, soon)["reclaim"]
    assert eta == fired_eta + timedelta(milliseconds=services.DUE_MIN_GAP_MS["reclaim"])
