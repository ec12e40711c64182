"""Writes of the reports app: lifecycle reports posted by Spark, and Spark jobs run as task runs.

Reports: :func:`store_lifecycle_report` upserts one row per (namespace, day); a re-post replaces the rows
of the days it covers, unless the stored row comes from a report generated later (a late retry of an old
report never overwrites a newer one). Rows of namespaces the control plane does not know are skipped and
named in the answer.

Spark jobs: :func:`start_spark_job` (an operator) and :func:`schedule_spark_job` (beat) create a
``TaskRun`` of the job's kind and queue :func:`backend.apps.reports.tasks.spark_job`, which calls
:func:`run_spark_job`: it takes the job's lease (one run of a job at a time; a live lease also tells the
lifecycle reaper that a worker is on the run), runs ``python -m spark_jobs <job> …`` under
:func:`backend.apps.reports.jobs.supervise`, and records the exit code, the job's JSON summary (numbers in
``counts``, the whole of it in ``params["summary"]``) and, on failure, the tail of its stderr. A cancelled
run's process group is terminated; so is one that outlives ``SPARK_JOB_TIME_LIMIT_S``.
"""

from __future__ import annotations

import enum
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from backend.apps.audit import services as audit
from backend.apps.lifecycle import leases
from backend.apps.lifecycle.models import Lease
from backend.apps.namespaces.models import Namespace
from backend.apps.namespaces.selectors import hosting_nodes
from backend.apps.nodes.models import StorageNode
from backend.apps.nodes.services import DEFAULT_NODE_NAME
from backend.apps.policies.selectors import cluster_policy, effective_namespace_policy
from backend.apps.reports import enqueue as enqueue_task
from backend.apps.reports import jobs
from backend.apps.reports.models import REPORT_FIELDS, LifecycleReportRow
from backend.apps.runs import services as runs
from backend.apps.runs.models import FINISHED, State, TaskRun
from storage_engine.errors import InvalidArgumentError

SERVICE_USERNAME = "spark-jobs"
SERVICE_ROLE = "operator"  # the least role that may post reports (core.roles has no narrower service role)
LEASE_TTL_S = 120
LEASE_RENEW_S = 30
REPORT_PATH = "/api/reports/lifecycle"

# -- lifecycle reports ---------------------------------------------------------------------


@transaction.atomic
def store_lifecycle_report(
    *, actor: Any, generated_at: datetime, rows: Sequence[dict[str, Any]], remote_addr: str | None = None
) -> dict[str, Any]:
    """Upsert validated rows (keys of the job's JSON, ``date`` as a date); audited as a write."""
    names = {row["namespace"] for row in rows}
    namespaces = {ns.name: ns for ns in Namespace.objects.filter(name__in=names)}
    newer = set(
        LifecycleReportRow.objects.filter(
            namespace__in=namespaces.values(), day__in={row["date"] for row in rows}, generated_at__gt=generated_at
        ).values_list("namespace_id", "day")
    )
    unknown: set[str] = set()
    stale = 0
    objs = []
    for row in rows:
        namespace = namespaces.get(row["namespace"])
        if namespace is None:
            unknown.add(row["namespace"])
            continue
        if (namespace.pk, row["date"]) in newer:
            stale += 1
            continue
        values = {field: row.get(field) for field in REPORT_FIELDS}
        objs.append(LifecycleReportRow(namespace=namespace, day=row["date"], generated_at=generated_at, **values))
    LifecycleReportRow.objects.bulk_create(
        objs,
        update_conflicts=True,
        unique_fields=["namespace", "day"],
        update_fields=[*REPORT_FIELDS, "generated_at", "received_at"],
    )
    result = {
        "generated_at": generated_at,
        "stored": len(objs),
        "stale": stale,
        "unknown_namespaces": sorted(unknown),
    }
    audit.record(
        actor=actor,
        action="report.lifecycle",
        target_type="report",
        target="lifecycle",
        after={
            "generated_at": generated_at.isoformat(),
            "stored": len(objs),
            "stale": stale,
            "namespaces": sorted(set(namespaces))[:100],
            "unknown_namespaces": sorted(unknown)[:100],
        },
        remote_addr=remote_addr,
    )
    return result


# -- the service user Spark jobs post as ---------------------------------------------------


def ensure_service_token() -> str:
    """The API token of the ``spark-jobs`` user (created with the operator role and no password)."""
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(username=SERVICE_USERNAME)
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    user.groups.add(Group.objects.get_or_create(name=SERVICE_ROLE)[0])
    token, _ = Token.objects.get_or_create(user=user)
    return str(token.key)


# -- Spark jobs as task runs ---------------------------------------------------------------


class JobOutcome(enum.StrEnum):
    DONE = "done"  # the run finished (succeeded, failed or cancelled)
    BUSY = "busy"  # another run of the job holds its lease: try again later


def _kind(job: str) -> str:
    known = jobs.registered_jobs()
    kind = jobs.kind_for(job)
    if job not in known or kind is None:
        raise InvalidArgumentError("job", f"must be one of {', '.join(known) or '(no Spark jobs are registered)'}")
    return kind


def active_spark_run(kind: str) -> TaskRun | None:
    return TaskRun.objects.filter(kind=kind).exclude(state__in=FINISHED).order_by("created_at").first()


def create_spark_run(
    *,
    job: str,
    actor: Any = None,
    namespace: Namespace | None = None,
    params: dict[str, Any] | None = None,
    schedule: str = "",
) -> TaskRun:
    """A queued run of a registered job (not enqueued: :func:`start_spark_job` and beat do that)."""
    kind = _kind(job)
    if namespace is None and job in jobs.NEEDS_NAMESPACE:
        raise InvalidArgumentError("namespace", f"is required for {job}")
    node = namespace.node if namespace is not None else StorageNode.objects.filter(name=DEFAULT_NODE_NAME).first()
    return runs.create_run(
        kind=kind,
        actor=actor,
        schedule=schedule,
        namespace=namespace,
        node=node,
        params={**(params or {}), "job": job},
    )


def enqueue(run: TaskRun) -> None:
    """Queue the run's Spark job once the transaction commits."""
    enqueue_task.spark_job(run.pk)


def start_spark_job(
    *, job: str, actor: Any, namespace: Namespace | None = None, params: dict[str, Any] | None = None
) -> TaskRun:
    """An operator's manual start: checked (a registered job, none of its runs active), audited, queued."""
    kind = _kind(job)
    active = active_spark_run(kind)
    if active is not None:
        raise InvalidArgumentError("job", f"a {job} run is already {active.state} (run {active.pk})")
    with transaction.atomic():
        run = create_spark_run(job=job, actor=actor, namespace=namespace, params={**(params or {}), "manual": True})
        audit.record(
            actor=actor,
            action=f"spark_job.{job}",
            target_type="spark_job",
            target=job,
            after={"run": run.pk, "namespace": namespace.name if namespace else None},
        )
    enqueue(run)
    return run


def schedule_spark_job(job: str, schedule: str = "") -> TaskRun | None:
    """A scheduled run, unless a run of the job is still active."""
    if active_spark_run(_kind(job)) is not None:
        return None
    with transaction.atomic():
        run = create_spark_run(job=job, schedule=schedule)
    enqueue(run)
    return run


def _ttls() -> dict[str, int]:
    cluster = cluster_policy()
    ttls = {}
    for namespace in Namespace.objects.all():
        ttl = effective_namespace_policy(namespace, cluster).ttl_ms
        if ttl:
            ttls[namespace.name] = int(ttl)
    return ttls


def _counts(summary: dict[str, Any] | None) -> dict[str, int]:
    if not summary:
        return {}
    return {k: v for k, v in summary.items() if isinstance(v, int) and not isinstance(v, bool)}


def _reading_nodes(namespace: Namespace | None, node: StorageNode | None) -> list[StorageNode]:
    """The nodes a reading job lists segments from: every node hosting a shard of ``namespace`` (every node for
    a cluster-wide job), ``node`` (whose data directory is NODE_DATA_DIR) first."""
    found = [n for n, _shards in hosting_nodes(namespace)] if namespace else list(StorageNode.objects.order_by("name"))
    if node is None:
        return found
    return [node, *(n for n in found if n.pk != node.pk)]


def run_spark_job(run_id: int, *, clock: Callable[[], float] = time.monotonic, poll_s: float = 1.0) -> JobOutcome:
    """Run the job of a queued run to its end; see the module docstring."""
    run = TaskRun.objects.select_related("namespace__node").get(pk=run_id)
    if run.state in FINISHED:
        return JobOutcome.DONE
    if run.cancel_requested:
        runs.finish(run, State.CANCELLED, "cancelled before it started")
        return JobOutcome.DONE
    job = str(run.params.get("job") or jobs.job_for(run.kind))
    key, holder = f"spark:{job}", f"run:{run.pk}"
    if Lease.objects.filter(key=key, holder=holder, expires_at__gt=timezone.now()).exists():
        return JobOutcome.DONE  # a duplicate delivery: a live worker is on this run
    if not leases.acquire(key, holder, LEASE_TTL_S):
        return JobOutcome.BUSY
    try:
        runs.mark_running(run)
        # The node that lists the segments to read (and takes a job's result): the namespace's, or for a
        # cluster-wide job the default node, whose data directory is NODE_DATA_DIR.
        node = run.namespace.node if run.namespace else StorageNode.objects.filter(name=DEFAULT_NODE_NAME).first()
        readers = _reading_nodes(run.namespace, node)
        with tempfile.TemporaryDirectory(prefix=f"spark-run-{run.pk}-") as tmp:
            ctx = jobs.JobContext(
                namespace=run.namespace.name if run.namespace else None,
                workdir=Path(tmp),
                node_data_dir=Path(settings.NODE_DATA_DIR),
                ttls=_ttls(),
                post_url=settings.CONTROL_PLANE_URL.rstrip("/") + REPORT_PATH,
                params=run.params,
                node_url=node.url if node is not None else "",
                node_urls=tuple(n.url for n in readers) if len(readers) > 1 else (),
            )
            argv = jobs.command(job, ctx)
            shown = ["python", *argv[1:]]
            token = ensure_service_token() if job in jobs.POSTS_REPORT else None
            TaskRun.objects.filter(pk=run.pk).update(params={**run.params, "command": shown})
            renewed = [clock()]

            def renew() -> None:
                if clock() - renewed[0] >= LEASE_RENEW_S:
                    leases.acquire(key, holder, LEASE_TTL_S)
                    renewed[0] = clock()

            outcome = jobs.supervise(
                argv,
                env=jobs.job_environment(
                    token,
                    node_token=node.token if node is not None else None,
                    node_tokens={n.url: n.token for n in readers if n.token} if len(readers) > 1 else None,
                ),
                workdir=Path(tmp),
                time_limit_s=settings.SPARK_JOB_TIME_LIMIT_S,
                should_cancel=lambda: runs.cancel_requested(run),
                on_start=lambda pid: TaskRun.objects.filter(pk=run.pk).update(
                    params={**run.params, "command": shown, "pid": pid}
                ),
                on_tick=renew,
                clock=clock,
                poll_s=poll_s,
            )
        summary = outcome.summary
        run.refresh_from_db()
        TaskRun.objects.filter(pk=run.pk).update(
            params={**run.params, "exit_code": outcome.exit_code, "summary": summary}
        )
        runs.record_step(run, _counts(summary), progress=1.0 if outcome.exit_code == 0 else None)
        if outcome.cancelled:
            runs.finish(run, State.CANCELLED, "cancelled while running: the job was terminated")
        elif outcome.timed_out:
            limit = settings.SPARK_JOB_TIME_LIMIT_S
            runs.finish(run, State.FAILED, f"exceeded the {limit} s time limit: terminated\n{outcome.stderr_tail}")
        elif outcome.exit_code == 0:
            runs.finish(run, State.SUCCEEDED)
        else:
            runs.finish(run, State.FAILED, f"exit code {outcome.exit_code}\n{outcome.stderr_tail}")
    except BaseException as exc:  # the worker is stopping (soft time limit) or the job could not start
        runs.finish(run, State.FAILED, f"{type(exc).__name__}: {exc}")
        raise
    finally:
        leases.release_all([key], holder)
    return JobOutcome.DONE
