"""Spark jobs run by Celery: the supervised subprocess, the task run it records, and one real
``lifecycle-report`` on engine-written segments posting to the live control plane."""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from backend.apps.audit.models import AuditEntry
from backend.apps.lifecycle.models import Lease
from backend.apps.namespaces.models import Namespace, ShardPlacement
from backend.apps.nodes.models import StorageNode
from backend.apps.reports import jobs, services, tasks
from backend.apps.reports.models import LifecycleReportRow
from backend.apps.runs import services as runs
from backend.apps.runs.models import TaskRun
from tests.spark.engine_data import write_segments
from tests.support.processes import start_node


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (nobody may reap orphans in a container)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


# -- the supervised subprocess ---------------------------------------------------------------


def test_supervise_reports_the_exit_code_the_summary_and_the_stderr_tail(tmp_path):
    code = (
        "import json, sys; print('spark noise'); print(json.dumps({'job': 'x', 'rows': 3}));"
        "sys.stderr.write('x' * 5000 + 'the end'); sys.exit(3)"
    )
    outcome = jobs.supervise(
        py(code), env=os.environ, workdir=tmp_path, time_limit_s=60, should_cancel=lambda: False, poll_s=0.05
    )
    assert outcome.exit_code == 3 and not outcome.cancelled and not outcome.timed_out
    assert outcome.summary == {"job": "x", "rows": 3}
    assert outcome.stderr_tail.endswith("the end") and len(outcome.stderr_tail) == jobs.TAIL_BYTES


def test_cancelling_kills_the_whole_process_group(tmp_path):
    # The job starts a child of its own (as PySpark starts a JVM); both must go.
    code = (
        "import subprocess, sys, time;"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']);"
        "print(child.pid, flush=True); time.sleep(120)"
    )
    stdout = tmp_path / "stdout"
    started: list[int] = []

    def child_started() -> bool:  # cancel as soon as the grandchild exists
        return stdout.exists() and bool(stdout.read_text().strip())

    outcome = jobs.supervise(
        py(code),
        env=os.environ,
        workdir=tmp_path,
        time_limit_s=600,
        should_cancel=child_started,
        on_start=started.append,
        poll_s=0.05,
    )
    assert outcome.cancelled and outcome.exit_code is None
    assert not alive(started[0])
    grandchild = int(outcome.stdout.strip())
    _wait_for(lambda: not alive(grandchild), timeout_s=10)  # it was signalled; it may take a moment to exit


def test_the_hard_time_limit_kills_the_job(tmp_path):
    clock = itertools.count(0, 100).__next__  # each look at the clock: 100 s later
    outcome = jobs.supervise(
        py("import time; time.sleep(120)"),
        env=os.environ,
        workdir=tmp_path,
        time_limit_s=250,
        should_cancel=lambda: False,
        clock=clock,
        poll_s=0.05,
    )
    assert outcome.timed_out and not outcome.cancelled and outcome.exit_code is None


def test_the_command_line_comes_from_the_job_table(tmp_path, settings):
    settings.SPARK_REPORT_SOURCE = "segments"
    ctx = jobs.JobContext(
        namespace="orders",
        workdir=tmp_path,
        node_data_dir=Path("/data/node"),
        ttls={"orders": 60_000},
        post_url="http://cp/api/reports/lifecycle",
        params={},
    )
    # No node registered: the jobs open the stopped directory themselves, and say so.
    assert jobs.command("lake-export", ctx)[1:] == [
        "-m",
        "spark_jobs",
        "lake-export",
        "--data-dir",
        "/data/node",
        "--offline",
        "--namespace",
        "orders",
    ]
    # With a node: it lists the sealed segments and dead records each job reads.
    ctx = replace(ctx, node_url="http://node:7070")
    report = jobs.command("lifecycle-report", ctx)
    assert report[3:] == [
        "lifecycle-report",
        "--source",
        "segments",
        "--data-dir",
        "/data/node",
        "--node-url",
        "http://node:7070",
        "--policies",
        str(tmp_path / "policies.json"),
        "--post-url",
        "http://cp/api/reports/lifecycle",
        "--namespace",
        "orders",
    ]
    assert json.loads((tmp_path / "policies.json").read_text()) == {"orders": 60_000}
    assert jobs.command("compaction-plan", ctx)[3:] == [
        "compaction-plan",
        "--namespace",
        "orders",
        "--data-dir",
        "/data/node",
        "--node-url",
        "http://node:7070",
        "--plan-only",  # applying a plan is the node's compaction action, not this job's
        "--ttl-ms",
        "60000",
    ]
    assert jobs.command("demo-parquet", ctx)[3:] == ["demo-parquet"]  # a job without an entry: no extra options
    env = jobs.job_environment("secret")
    assert env["CONTROL_PLANE_TOKEN"] == "secret" and "secret" not in " ".join(report)
    backfill = replace(ctx, params={"key_prefix": "user:", "ttl": "7d"})
    assert jobs.command("ttl-backfill", backfill)[3:] == [
        "ttl-backfill",
        "--namespace",
        "orders",
        "--data-dir",
        "/data/node",
        "--node-url",
        "http://node:7070",
        "--key-prefix",
        "user:",
        "--ttl",
        "7d",
    ]
    assert jobs.job_environment(None, node_token="node-secret")["NODE_TOKEN"] == "node-secret"


# -- the task run ----------------------------------------------------------------------------


def test_reading_jobs_list_every_node_hosting_a_shard(db, tmp_path):
    """A namespace placed on two nodes (issue 19): lake-export and lifecycle-report list both (the namespace's
    node first, its data directory NODE_DATA_DIR), tokens in NODE_TOKENS, never on the command line; jobs that
    hand a result to the node keep the namespace's node."""
    a = StorageNode.objects.create(name="node-a", url="http://a:7070", token="token-a")
    b = StorageNode.objects.create(name="node-b", url="http://b:7070", token="token-b")
    spread = Namespace.objects.create(name="spread", shards=3, node=b)
    for shard, node in ((0, a), (1, b), (2, a)):
        ShardPlacement.objects.create(namespace=spread, shard=shard, node=node)
    assert [n.name for n in services._reading_nodes(spread, spread.node)] == ["node-b", "node-a"]
    everywhere = [n.name for n in services._reading_nodes(None, a)]
    assert everywhere[0] == "node-a" and set(everywhere) >= {"node-a", "node-b"}
    ctx = jobs.JobContext(
        namespace="spread",
        workdir=tmp_path,
        node_data_dir=Path("/data/node"),
        ttls={},
        post_url="http://cp/api/reports/lifecycle",
        params={},
        node_url=b.url,
        node_urls=(b.url, a.url),
    )
    export = jobs.command("lake-export", ctx)
    assert export[3:] == [
        "lake-export",
        *("--data-dir", "/data/node", "--node-url", "http://b:7070", "--node-url", "http://a:7070"),
        *("--namespace", "spread"),
    ]
    assert jobs.command("lifecycle-report", ctx).count("--node-url") == 2
    assert jobs.command("compaction-plan", ctx).count("--node-url") == 1
    env = jobs.job_environment(None, node_token=b.token, node_tokens={a.url: a.token, b.url: b.token})
    assert json.loads(env["NODE_TOKENS"]) == {"http://a:7070": "token-a", "http://b:7070": "token-b"}
    assert "token-a" not in " ".join(export) and "NODE_TOKENS" not in jobs.job_environment(None)


def test_a_failing_job_fails_its_run_with_the_stderr_tail(db, tmp_path, settings):
    settings.NODE_DATA_DIR = tmp_path / "empty-node"  # no segments/: lake-export refuses before Spark starts
    settings.LAKE_PATH = str(tmp_path / "lake")
    run = services.create_spark_run(job="lake-export")
    assert tasks.spark_job(run.pk) == "done"
    run.refresh_from_db()
    assert run.state == "failed" and run.params["exit_code"] == 2
    assert run.error.startswith("exit code 2") and "holds no segments/ directory" in run.error
    assert run.params["command"][:5] == ["python", "-m", "spark_jobs", "lake-export", "--data-dir"]
    assert run.started_at and run.finished_at
    assert not Lease.objects.exists()


def test_a_run_cancelled_while_queued_never_starts(db):
    run = services.create_spark_run(job="lake-export")
    runs.request_cancel(run=run, actor=None)
    assert tasks.spark_job(run.pk) == "done"
    run.refresh_from_db()
    assert run.state == "cancelled" and "command" not in run.params


def test_a_run_waits_while_another_run_of_the_job_holds_its_lease(db):
    from backend.apps.lifecycle import leases

    first = services.create_spark_run(job="lake-export")
    second = services.create_spark_run(job="lake-export")
    assert leases.acquire("spark:lake-export", f"run:{first.pk}", 60)
    assert services.run_spark_job(second.pk) is services.JobOutcome.BUSY
    assert TaskRun.objects.get(pk=second.pk).state == "queued"


def _wait_for(predicate: Callable[[], bool], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_cancelling_a_running_spark_run_terminates_its_job(tmp_path, settings):
    data_dir = tmp_path / "node-data"
    write_segments(data_dir, batches=4)
    settings.NODE_DATA_DIR = data_dir
    settings.LAKE_PATH = str(tmp_path / "lake")
    run = services.create_spark_run(job="lake-export")
    worker = threading.Thread(target=services.run_spark_job, args=(run.pk,), kwargs={"poll_s": 0.1})
    worker.start()
    try:
        _wait_for(lambda: "pid" in TaskRun.objects.get(pk=run.pk).params)
        runs.request_cancel(run=TaskRun.objects.get(pk=run.pk), actor=None)
    finally:
        worker.join(timeout=120)
    run.refresh_from_db()
    assert run.state == "cancelled" and "terminated" in run.error
    assert not alive(run.params["pid"])
    assert not Lease.objects.exists()


# -- end to end: a real lifecycle-report posting to the live control plane --------------------


@pytest.mark.spark
def test_a_lifecycle_report_run_lands_its_rows_in_the_reports_table(
    live_server, tmp_path, settings, monkeypatch, request
):
    data_dir = tmp_path / "node-data"
    write_segments(data_dir)
    proc = start_node(data_dir)  # the node lists the sealed segments and dead records the job reads
    request.addfinalizer(proc.stop)
    node = StorageNode.objects.create(name="node-1", url=proc.url, token=proc.token)
    Namespace.objects.create(name="orders", node=node, shards=2, policy_overrides={"ttl_ms": 3_600_000})
    Namespace.objects.create(name="audit", node=node, shards=1)
    settings.NODE_DATA_DIR = data_dir
    settings.LAKE_PATH = str(tmp_path / "lake")
    settings.SPARK_MASTER = "local[2]"
    settings.CONTROL_PLANE_URL = live_server.url
    for name, value in (("SPARK_SHUFFLE_PARTITIONS", "2"), ("SPARK_DRIVER_MEMORY", "1g"), ("SPARK_LOG_LEVEL", "ERROR")):
        monkeypatch.setenv(name, value)

    run = services.create_spark_run(job="lifecycle-report", namespace=Namespace.objects.get(name="orders"))
    assert tasks.spark_job(run.pk) == "done"  # the task function, eagerly, in this process

    run.refresh_from_db()
    assert run.state == "succeeded", run.error
    summary = run.params["summary"]
    assert summary["posted"] == 200 and run.params["exit_code"] == 0
    posted = json.loads((tmp_path / "lake" / "reports" / "lifecycle" / "_report.json").read_text())["rows"]
    # Started for orders: orders only (over two UTC days), though audit's segments sit beside it.
    assert run.counts["rows"] == summary["rows"] == len(posted) == 2
    assert {r["namespace"] for r in posted} == {"orders"}
    stored = {(r.namespace.name, r.day.isoformat()): r for r in LifecycleReportRow.objects.select_related("namespace")}
    assert set(stored) == {(r["namespace"], r["date"]) for r in posted}
    for r in posted:
        row = stored[(r["namespace"], r["date"])]
        for field in services.REPORT_FIELDS:
            assert getattr(row, field) == r[field], field
    # The namespace TTL reached the job: every orders record has an expiry.
    assert all(r.unbounded_records == 0 for (ns, _), r in stored.items() if ns == "orders")
    entry = AuditEntry.objects.get(action="report.lifecycle")
    assert entry.actor == User.objects.get(username=services.SERVICE_USERNAME)
