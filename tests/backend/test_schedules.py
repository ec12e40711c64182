"""Lifecycle schedules (issue 17): one table (target, kind, interval, next due) derived from the policies,
ticked by one static beat task that starts each due row exactly once and moves it one interval on. Time
comes from the ``now`` the services take; nothing here sleeps or needs a node."""

from __future__ import annotations

import importlib
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.apps import apps
from django.db import connection, transaction
from django_celery_beat.models import PeriodicTask

from backend.apps.lifecycle import schedules, tasks
from backend.apps.lifecycle.models import Schedule
from backend.apps.namespaces.models import Namespace, ShardPlacement
from backend.apps.nodes.models import StorageNode

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)


def make_node(name: str = "node-1") -> StorageNode:
    return StorageNode.objects.create(name=name, url="http://127.0.0.1:9", token="t")


def make_namespace(name: str, node: StorageNode, shards: int = 1, **policy: Any) -> Namespace:
    namespace = Namespace.objects.create(name=name, node=node, shards=shards, policy_overrides=policy)
    ShardPlacement.objects.bulk_create(ShardPlacement(namespace=namespace, shard=s, node=node) for s in range(shards))
    return namespace


def set_policy(target: Namespace | StorageNode, **policy: Any) -> None:
    target.policy_overrides = policy
    target.save(update_fields=["policy_overrides"])


def rows(**target: Any) -> dict[str, Schedule]:
    return {row.kind: row for row in Schedule.objects.filter(**target)}


def key(task: str, kwargs: dict[str, Any]) -> tuple[str, tuple[tuple[str, Any], ...]]:
    return task, tuple(sorted(kwargs.items()))


class Sent(list):
    """The tasks a tick started, as (task, sorted kwargs), instead of a broker (thread-safe)."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def __call__(self, task: str, kwargs: dict[str, Any]) -> None:
        with self.lock:
            self.append(key(task, kwargs))


def test_derived_rows_follow_a_policy_change(db, settings):
    settings.LIFECYCLE_DEADLINES = False  # the policies' intervals as they are, no due-time poll
    node = make_node()
    orders = make_namespace("orders", node, scan_interval_ms=30_000, cleanup_policy="compact,delete")
    # the namespace's own (compaction) and the node's: four sweeps, file cleaning, the disk check
    assert schedules.derive_schedules(namespace=orders, now=T0) == 1 + 6
    assert {k: r.interval_s for k, r in rows(namespace=orders).items()} == {"compaction": 300}
    assert {k: r.interval_s for k, r in rows(node=node).items()} == {
        "expiry_scan": 30,
        "retention": 30,
        "reclaim": 300,
        "subscription_ttl": 300,
        "file_clean": 10,
        "disk_check": 30,
    }
    assert all(r.next_due == T0 + r.interval_s * S and r.last_started is None for r in Schedule.objects.all())
    Schedule.objects.filter(node=node, kind="reclaim").update(enabled=False)  # paused by hand

    # Shorter: due no later than one new interval from now. Longer: the time already set stays.
    set_policy(orders, scan_interval_ms=5_000)
    schedules.derive_schedules(namespace=orders, now=T0 + 10 * S)
    scan = rows(node=node)["expiry_scan"]
    assert (scan.interval_s, scan.next_due) == (5, T0 + 15 * S)
    assert "compaction" not in rows(namespace=orders)  # the default policy deletes, does not compact
    set_policy(orders, scan_interval_ms=120_000)
    schedules.derive_schedules(node=node, now=T0 + 12 * S)
    scan = rows(node=node)["expiry_scan"]
    assert (scan.interval_s, scan.next_due) == (120, T0 + 15 * S)
    reclaim = rows(node=node)["reclaim"]
    assert (reclaim.interval_s, reclaim.next_due, reclaim.enabled) == (300, T0 + 300 * S, False)  # untouched

    # The node's own policy moves file cleaning; every target at once gives the same rows.
    set_policy(node, clean_interval_ms=60_000)
    assert schedules.derive_schedules(now=T0 + 20 * S) == 6
    assert rows(node=node)["file_clean"].interval_s == 60


def test_the_due_time_poll_comes_and_goes_with_the_swept_kinds(db, settings):
    settings.LIFECYCLE_DEADLINES = True
    node = make_node()
    schedules.derive_schedules(node=node, now=T0)
    assert set(rows(node=node)) == {"file_clean", "disk_check"}  # nothing hosted: nothing to sweep, no poll
    make_namespace("orders", node, scan_interval_ms=5_000)
    schedules.derive_schedules(node=node, now=T0)
    found = rows(node=node)
    assert found["expiry_scan"].interval_s == schedules.DUE_SAFETY_NET_S  # a safety net beside the due times
    assert found[schedules.DUE_POLL].interval_s == schedules.DUE_POLL_S
    assert schedules.task_of(found[schedules.DUE_POLL]) == (schedules.DUE_POLL_TASK, {"node_id": node.pk})


def test_deleting_a_namespace_or_a_node_removes_its_rows(db, settings):
    from backend.apps.nodes.services import delete_node

    settings.LIFECYCLE_DEADLINES = True
    node = make_node()
    orders = make_namespace("orders", node, cleanup_policy="compact", backlog_quota_bytes=1_000_000)
    schedules.derive_schedules(namespace=orders, now=T0)
    assert set(rows(namespace=orders)) == {"compaction", "backlog_quota"}
    orders.delete()
    assert not Schedule.objects.filter(namespace__isnull=False).exists()
    schedules.derive_schedules(node=node, now=T0)  # what deleting a namespace sends for its nodes
    assert set(rows(node=node)) == {"file_clean", "disk_check"}
    delete_node(actor=None, node=node)
    assert not Schedule.objects.exists()


def test_the_tick_starts_due_rows_once_and_moves_them_one_interval_from_now(
    db, settings, django_capture_on_commit_callbacks
):
    settings.LIFECYCLE_DEADLINES = True
    node = make_node()
    orders = make_namespace("orders", node, cleanup_policy="compact,delete")
    schedules.derive_schedules(namespace=orders, now=T0)
    sent = Sent()
    with django_capture_on_commit_callbacks(execute=True):
        assert schedules.tick_schedules(now=T0 + S, send=sent) == 0  # nothing due yet
    assert sent == []
    with django_capture_on_commit_callbacks(execute=True):
        assert schedules.tick_schedules(now=T0 + 2 * S, send=sent) == 1  # the 2 s due-time poll
    assert sent == [key(schedules.DUE_POLL_TASK, {"node_id": node.pk})]
    poll = rows(node=node)[schedules.DUE_POLL]
    assert (poll.next_due, poll.last_started) == (T0 + 4 * S, T0 + 2 * S)
    assert rows(node=node)["disk_check"].last_started is None  # not due: not started, not moved

    # Back after an hour down: every row once (no catch-up burst), each one interval from then.
    Schedule.objects.filter(node=node, kind="file_clean").update(enabled=False)
    sent.clear()
    later = T0 + 3600 * S
    with django_capture_on_commit_callbacks(execute=True):
        started = schedules.tick_schedules(now=later, send=sent)
    enabled = [row for row in Schedule.objects.all() if row.enabled]
    assert started == len(enabled) == 7  # compaction; four sweeps, disk check, poll (file cleaning paused)
    assert sorted(sent) == sorted(key(*schedules.task_of(row)) for row in enabled)
    assert key(schedules.SCHEDULED_TASK, {"kind": "compaction", "namespace_id": orders.pk}) in sent
    assert key(schedules.SCHEDULED_TASK, {"kind": "expiry_scan", "node_id": node.pk}) in sent
    assert all(row.next_due == later + row.interval_s * S and row.last_started == later for row in enabled)
    assert rows(node=node)["file_clean"].last_started is None
    with django_capture_on_commit_callbacks(execute=True):
        assert schedules.tick_schedules(now=later, send=sent) == 0
    assert len(sent) == 7


def test_the_tick_starts_the_registered_task_with_the_old_arguments(
    db, settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.LIFECYCLE_DEADLINES = False
    node = make_node()
    schedules.derive_schedules(node=node, now=T0)
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(tasks.scheduled_run, "apply_async", lambda **kw: calls.append(kw))
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.tick_schedules.run() == 2  # the task beat starts: now is the real clock, far past T0
    assert sorted(call["kwargs"]["kind"] for call in calls) == ["disk_check", "file_clean"]
    assert all(call["kwargs"]["node_id"] == node.pk for call in calls)


def test_one_static_beat_task_ticks_the_table(db, settings):
    tick = PeriodicTask.objects.get(name=schedules.TICK_SCHEDULE)
    assert tick.task == schedules.TICK_TASK and tick.interval.every == schedules.TICK_S < schedules.DUE_POLL_S
    assert tick.enabled and tick.expire_seconds == 30  # core.services.MIN_EXPIRE_S: a tick older than that is dropped
    settings.LIFECYCLE_DEADLINES = True
    node = make_node()
    schedules.derive_schedules(namespace=make_namespace("orders", node), now=T0)
    assert Schedule.objects.count() == 7
    assert not PeriodicTask.objects.filter(name__startswith="lifecycle: ").exists()  # no per-target beat rows


def test_the_migration_removes_the_per_target_periodic_tasks(db):
    from backend.apps.core.services import upsert_interval_task

    migration = importlib.import_module("backend.apps.lifecycle.migrations.0004_remove_lifecycle_periodic_tasks")
    old = [
        ("lifecycle: expiry_scan of node node-1", schedules.SCHEDULED_TASK, {"kind": "expiry_scan", "node_id": 1}),
        ("lifecycle: compaction of namespace orders", schedules.SCHEDULED_TASK, {"kind": "compaction"}),
        ("lifecycle: due times of node node-1", schedules.DUE_POLL_TASK, {"node_id": 1}),
    ]
    for name, task, kwargs in old:
        upsert_interval_task(name, task, 60, kwargs)
    kept = set(PeriodicTask.objects.exclude(name__startswith="lifecycle: ").values_list("name", flat=True))
    migration.remove_per_target_periodic_tasks(apps, None)
    assert set(PeriodicTask.objects.values_list("name", flat=True)) == kept
    assert {schedules.TICK_SCHEDULE, "platform: beat heartbeat", "platform: reconcile node policies"} <= kept


def _due_rows(nodes: int) -> list[tuple[str, tuple[tuple[str, Any], ...]]]:
    for i in range(nodes):
        schedules.derive_schedules(node=make_node(f"node-{i}"), now=T0)  # file cleaning and the disk check each
    return sorted(key(*schedules.task_of(row)) for row in Schedule.objects.all())


@pytest.mark.django_db(transaction=True)
def test_two_ticks_at_once_start_each_due_row_exactly_once(settings):
    settings.LIFECYCLE_DEADLINES = False
    expected = _due_rows(nodes=20)
    now = T0
    for _ in range(5):
        now += 3600 * S
        sent, counts = Sent(), []
        barrier = threading.Barrier(2)

        def tick(at: datetime = now, sent: Sent = sent, counts: list[int] = counts, barrier: Any = barrier) -> None:
            try:
                barrier.wait(timeout=10)
                counts.append(schedules.tick_schedules(now=at, send=sent))
            finally:
                connection.close()

        threads = [threading.Thread(target=tick) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(sent) == expected and sum(counts) == len(expected) == 40
        assert all(row.next_due > now for row in Schedule.objects.all())


@pytest.mark.django_db(transaction=True)
def test_a_tick_skips_the_rows_another_tick_holds_without_waiting(settings):
    if connection.vendor != "postgresql":
        pytest.skip("row locks (SELECT … FOR UPDATE SKIP LOCKED) are PostgreSQL's; SQLite runs one writer")
    settings.LIFECYCLE_DEADLINES = False
    expected = _due_rows(nodes=3)
    now = T0 + 3600 * S
    holding, release = threading.Event(), threading.Event()
    first, second = Sent(), Sent()
    counts: dict[str, int] = {}

    def first_tick() -> None:
        try:
            with transaction.atomic():  # its claim stays uncommitted until released
                counts["first"] = schedules.tick_schedules(now=now, send=first)
                holding.set()
                release.wait(20)
        finally:
            connection.close()

    thread = threading.Thread(target=first_tick)
    thread.start()
    try:
        assert holding.wait(20)
        started = time.monotonic()
        counts["second"] = schedules.tick_schedules(now=now, send=second)
        assert time.monotonic() - started < 5  # skipped, not waited for
    finally:
        release.set()
        thread.join(30)
    assert counts == {"first": len(expected), "second": 0}
    assert sorted(first) == expected and second == []
    assert schedules.tick_schedules(now=now, send=second) == 0 and second == []  # committed: one interval on
