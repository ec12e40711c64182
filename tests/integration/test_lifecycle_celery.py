"""Lifecycle jobs end to end: a real broker, real Celery workers and beat, a real node."""

from __future__ import annotations

import itertools
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from backend.apps.lifecycle import services as lifecycle
from backend.apps.namespaces.services import create_namespace
from backend.apps.nodes.models import StorageNode
from backend.apps.runs.models import TaskRun
from storage_engine.api import NewRecord
from storage_engine.node_api.client import NodeClient
from tests.support.processes import Proc, spawn, start_node, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgresql://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def queue(settings) -> str:  # type: ignore[no-untyped-def]
    """A queue of this test's own, so no stray worker takes its tasks."""
    settings.CELERY_TASK_DEFAULT_QUEUE = f"it-{uuid.uuid4().hex[:8]}"
    return settings.CELERY_TASK_DEFAULT_QUEUE


@pytest.fixture
def celery_env(queue: str, tmp_path: Path) -> dict[str, str]:
    env = {
        "APP_ENV": "test",
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "CELERY_QUEUE": queue,
        "VAR_DIR": str(tmp_path / "var"),
    }
    if settings.CELERY_BROKER_URL.startswith("filesystem"):
        env["BROKER_DIR"] = str(Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"]).parent)
    return env


def start_worker(env: dict[str, str], log: Path, name: str) -> Proc:
    queues = f"{env['CELERY_QUEUE']},{env['CELERY_QUEUE']}.node-1"
    return spawn(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "backend.config",
            "worker",
            "--loglevel",
            "INFO",
            "--concurrency",
            "1",
            "--hostname",
            f"{name}@%h",
            "--without-gossip",
            "--without-mingle",
            "-Q",
            queues,
        ],
        log,
        env=env,
        new_session=True,
    )


@pytest.fixture
def node(tmp_path: Path, settings) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """A real node process registered as the default node."""
    proc = start_node(tmp_path / "node")
    settings.NODE_URL, settings.NODE_TOKEN = proc.url, proc.token
    StorageNode.objects.create(name="node-1", url=proc.url, token=proc.token)
    yield proc
    proc.stop()


def produce_expired(node: object, name: str, expired: int, live: int) -> None:
    with NodeClient(node.url, node.token) as client:  # type: ignore[attr-defined]
        client.append(name, 0, [NewRecord(value=b"old", expire_at=1)] * expired)
        client.append(name, 0, [NewRecord(value=f"live-{i}".encode()) for i in range(live)])


def finished(run: TaskRun) -> bool:
    run.refresh_from_db()
    return run.state in ("succeeded", "failed", "cancelled")


def test_beat_schedules_the_scan_that_removes_expired_records(node, celery_env, tmp_path):
    namespace = create_namespace(name="ttl-ns", shards=1, policy={"scan_interval_ms": 1000})
    assert namespace.sync_state == "synced"
    produce_expired(node, "ttl-ns", expired=200, live=5)
    worker = start_worker(celery_env, tmp_path / "worker.log", "w1")
    beat = spawn(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "backend.config",
            "beat",
            "--loglevel",
            "INFO",
            "--scheduler",
            "django_celery_beat.schedulers:DatabaseScheduler",
            "--pidfile=",
        ],
        tmp_path / "beat.log",
        env=celery_env,
        new_session=True,
    )
    try:

        def scanned() -> bool:
            done = TaskRun.objects.filter(kind="expiry_scan", node=namespace.node, state="succeeded")
            return any(r.counts.get("expired_records", 0) for r in done)

        wait_until(scanned, 90, "a scheduled expiry scan")
    except TimeoutError:
        pytest.fail(f"no scheduled scan.\n--- beat ---\n{beat.log()[-3000:]}\n--- worker ---\n{worker.log()[-3000:]}")
    finally:
        beat.kill_group()
        worker.kill_group()
    run = TaskRun.objects.filter(kind="expiry_scan", state="succeeded").exclude(counts={}).first()
    # The beat schedule, or the due-time sweep it leads to (scheduled at the node's next TTL deadline).
    sweep = f"lifecycle: expiry_scan of node {namespace.node.name}"
    assert run is not None and run.schedule in (sweep, f"{sweep} (due)"), run.schedule
    assert run.namespace is None  # the node's sweep over every namespace it hosts
    with NodeClient(node.url, node.token) as client:
        assert [r.value for r in client.read("ttl-ns", 0, 0).records] == [f"live-{i}".encode() for i in range(5)]
        assert client.verify("ttl-ns")["ok"]


def test_two_workers_never_run_one_shard_at_once(node, celery_env, tmp_path):
    namespace = create_namespace(name="busy-ns", shards=1)
    produce_expired(node, "busy-ns", expired=3000, live=1)
    runs = [
        lifecycle.start_action(kind=kind, actor=None, namespace=namespace, confirm="busy-ns")
        for kind in ("expiry_scan", "reclaim", "retention", "expiry_scan", "reclaim", "retention")
    ]
    workers = [start_worker(celery_env, tmp_path / f"worker{i}.log", f"w{i}") for i in range(2)]
    try:
        wait_until(lambda: all(finished(r) for r in runs), 120, "every run to finish")
    finally:
        for worker in workers:
            worker.kill_group()
    spans = sorted((r.started_at, r.finished_at) for r in runs)
    assert all(r.state == "succeeded" for r in runs), [(r.kind, r.state, r.error) for r in runs]
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start, "two lifecycle jobs held the same shard at once"


def test_a_node_down_then_up_is_retried_to_success(node, celery_env, tmp_path):
    namespace = create_namespace(name="later-ns", shards=1)
    produce_expired(node, "later-ns", expired=10, live=1)
    port = int(node.url.rsplit(":", 1)[1])
    node.stop()
    run = lifecycle.start_action(kind="expiry_scan", actor=None, namespace=namespace)
    worker = start_worker(celery_env, tmp_path / "worker.log", "w1")
    try:
        wait_until(lambda: "Retry in" in worker.log(), 60, "the first retry")
        assert not finished(run)
        restarted = start_node(node.data_dir, token=node.token, port=port)
        try:
            wait_until(lambda: finished(run), 60, "the retried run")
        finally:
            restarted.stop()
    finally:
        worker.kill_group()
    assert run.state == "succeeded", run.error
    assert run.counts["expired_records"] == 10


def test_a_worker_killed_mid_job_leaves_a_resumable_run(node, celery_env, tmp_path):
    from datetime import timedelta

    from django.utils import timezone

    namespace = create_namespace(name="killed-ns", shards=1, policy={"max_delete_per_scan": 50})
    produce_expired(node, "killed-ns", expired=10_000, live=3)
    run = lifecycle.start_action(kind="expiry_scan", actor=None, namespace=namespace)
    worker = start_worker(celery_env, tmp_path / "worker1.log", "w1")
    try:
        wait_until(lambda: (run.refresh_from_db() or run.steps) >= 3, 60, "a few steps")
    finally:
        worker.kill_group()  # SIGKILL mid-job: the step in flight is never acknowledged
    run.refresh_from_db()
    assert run.state == "running"
    # Its leases lapse; the reaper queues it again (Redis would only redeliver after an hour).
    assert lifecycle.reap_stale_runs(now=timezone.now() + timedelta(seconds=lifecycle.LEASE_TTL_S + 1)) == {
        "resumed": 1,
        "failed": 0,
    }
    worker = start_worker(celery_env, tmp_path / "worker2.log", "w2")
    try:
        wait_until(lambda: finished(run), 120, "the resumed run")
    finally:
        worker.kill_group()
    assert run.state == "succeeded", run.error
    with NodeClient(node.url, node.token) as client:
        assert [r.value for r in client.read("killed-ns", 0, 0).records] == [f"live-{i}".encode() for i in range(3)]
        assert client.verify("killed-ns")["ok"]
