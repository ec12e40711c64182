"""Spark jobs as the control plane runs them: which jobs exist, their command lines, and a supervised subprocess.

Any job registered in :mod:`spark_jobs.registry` whose name matches a task run kind (``lake-export`` →
``lake_export``) can be started; :data:`JOB_ARGS` is the one table of job-specific arguments (a job without
an entry gets none). Every job gets the Spark master, the lake path and the node's data directory through
the environment (``SPARK_MASTER``, ``LAKE_PATH``, ``NODE_DATA_DIR``, read by ``spark_jobs.config``).

:func:`supervise` runs the command with its output in files (no pipe can fill up), polls for cancellation
and a hard time limit (time from an injected clock), and kills the whole process group when either hits.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from backend.apps.runs.models import Kind
from spark_jobs import registry
from spark_jobs.config import ConfigError

log = logging.getLogger(__name__)

TAIL_BYTES = 4000
TERMINATE_GRACE_S = 10.0


@dataclass(frozen=True)
class JobContext:
    """What a job's argument builder may use."""

    namespace: str | None
    workdir: Path  # a private temporary directory for this run's files
    node_data_dir: Path
    ttls: Mapping[str, int]  # namespace → effective TTL (ms) for namespaces that have one
    post_url: str  # the control plane's report endpoint
    params: Mapping[str, Any]
    # The node that lists the sealed segments and dead records a job reads (and takes a job's result); its
    # token goes in the environment. Without one (no node registered) a job reads the directory --offline.
    node_url: str = ""
    # Every node hosting a shard the job reads, ``node_url`` first (``--data-dir`` is its directory): jobs that
    # only read (lake-export, lifecycle-report) list them all, so a namespace placed on several nodes is read
    # whole. Their tokens go in the environment (NODE_TOKENS). Empty: ``node_url`` alone.
    node_urls: tuple[str, ...] = ()


def _source(ctx: JobContext) -> list[str]:
    """Where a job learns which segments to read: the node, or the stopped directory itself."""
    return ["--data-dir", str(ctx.node_data_dir), *(["--node-url", ctx.node_url] if ctx.node_url else ["--offline"])]


def _read_source(ctx: JobContext) -> list[str]:
    """:func:`_source` for jobs that only read: every node hosting a shard (each a ``--node-url``)."""
    urls = ctx.node_urls or ((ctx.node_url,) if ctx.node_url else ())
    if not urls:
        return _source(ctx)
    return ["--data-dir", str(ctx.node_data_dir), *(arg for url in urls for arg in ("--node-url", url))]


def _lake_export_args(ctx: JobContext) -> list[str]:
    args = _read_source(ctx)
    return [*args, "--namespace", ctx.namespace] if ctx.namespace else args


def _lifecycle_report_args(ctx: JobContext) -> list[str]:
    policies = ctx.workdir / "policies.json"
    policies.write_text(json.dumps(dict(ctx.ttls), sort_keys=True))
    source = str(ctx.params.get("source") or settings.SPARK_REPORT_SOURCE)
    return [
        "--source",
        source,
        *_read_source(ctx),
        "--policies",
        str(policies),
        "--post-url",
        ctx.post_url,
        *(["--namespace", ctx.namespace] if ctx.namespace else []),  # started for one namespace: that one only
    ]


def _compaction_plan_args(ctx: JobContext) -> list[str]:
    # Plans only (--plan-only): applying a plan compacts, which is the node's COMPACTION action's business.
    args = ["--namespace", str(ctx.namespace), *_source(ctx), "--plan-only"]
    ttl = ctx.ttls.get(str(ctx.namespace))
    return [*args, "--ttl-ms", str(ttl)] if ttl else args


def _ttl_backfill_args(ctx: JobContext) -> list[str]:
    """The rule (``params``: ``tag`` or ``key_prefix``, and ``ttl``; checked by :func:`check_params`); the
    job uploads its SST file to the namespace's node (``--node-url``), which ingests it: no filesystem is
    shared with the node beyond the segments the job reads from ``--data-dir``."""
    rule = (
        ["--tag", str(ctx.params["tag"])] if ctx.params.get("tag") else ["--key-prefix", str(ctx.params["key_prefix"])]
    )
    return ["--namespace", str(ctx.namespace), *_source(ctx), *rule, "--ttl", str(ctx.params["ttl"])]


def check_params(job: str, params: Mapping[str, Any]) -> dict[str, list[str]]:
    """Errors per field of a job's ``params`` (empty when fine): only ttl-backfill takes any."""
    if job != "ttl-backfill":
        return {"params": ["this job takes no params"]} if params else {}
    errors: dict[str, list[str]] = {}
    rules = [k for k in ("tag", "key_prefix") if params.get(k)]
    if len(rules) != 1:
        errors["params.tag"] = ["give exactly one rule: tag or key_prefix"]
    unknown = sorted(set(params) - {"tag", "key_prefix", "ttl"})
    if unknown:
        errors["params"] = [f"unknown fields: {', '.join(unknown)}"]
    # Heavy dependency: the job module imports pyspark at its top (seconds); the web loads it only when this
    # job's params are checked, not at every start.
    from spark_jobs.jobs.ttl_backfill import parse_duration_ms

    try:
        parse_duration_ms(str(params.get("ttl", "")))
    except ConfigError as exc:
        errors["params.ttl"] = [str(exc).replace("--ttl", "ttl")]
    return errors


# job name → its job-specific arguments
JOB_ARGS: dict[str, Callable[[JobContext], list[str]]] = {
    "lake-export": _lake_export_args,
    "lifecycle-report": _lifecycle_report_args,
    "compaction-plan": _compaction_plan_args,
    "ttl-backfill": _ttl_backfill_args,
}
# jobs that work on one namespace and cannot start without one
NEEDS_NAMESPACE = frozenset({"compaction-plan", "ttl-backfill"})
# jobs that POST back to the control plane and so need the service user's token
POSTS_REPORT = frozenset({"lifecycle-report"})


def kind_for(job: str) -> str | None:
    kind = job.replace("-", "_")
    return kind if kind in Kind.values else None


def job_for(kind: str) -> str:
    return kind.replace("_", "-")


def registered_jobs() -> list[str]:
    """Jobs in :mod:`spark_jobs.registry` that have a task run kind, by name."""
    try:
        registry.load_jobs()
    except Exception:  # a job module that does not import must not hide the others
        log.exception("loading the Spark job modules failed; offering the jobs that registered")
    return [job.name for job in registry.jobs() if kind_for(job.name) is not None]


def command(job: str, ctx: JobContext) -> list[str]:
    builder = JOB_ARGS.get(job)
    return [sys.executable, "-m", "spark_jobs", job, *(builder(ctx) if builder else [])]


def job_environment(
    token: str | None = None, node_token: str | None = None, node_tokens: Mapping[str, str] | None = None
) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_MASTER=str(settings.SPARK_MASTER),
        LAKE_PATH=str(settings.LAKE_PATH),
        NODE_DATA_DIR=str(settings.NODE_DATA_DIR),
        PYTHONUNBUFFERED="1",
    )
    env.pop("CONTROL_PLANE_TOKEN", None)
    if token:
        env["CONTROL_PLANE_TOKEN"] = token  # in the environment, never on the command line
    env.pop("NODE_TOKEN", None)
    if node_token:
        env["NODE_TOKEN"] = node_token  # for jobs that hand a result to the node (ttl-backfill)
    env.pop("NODE_TOKENS", None)
    if node_tokens:
        env["NODE_TOKENS"] = json.dumps(dict(node_tokens), sort_keys=True)  # several nodes: URL → token
    return env


@dataclass
class Outcome:
    exit_code: int | None  # None when killed by us
    stdout: str
    stderr_tail: str
    cancelled: bool = False
    timed_out: bool = False

    @property
    def summary(self) -> dict[str, Any] | None:
        """The job's one-line JSON summary: the last stdout line that is a JSON object."""
        for line in reversed(self.stdout.splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    value = json.loads(line)
                except ValueError:
                    continue
                if isinstance(value, dict):
                    return value
        return None


def _tail(path: Path, size: int = TAIL_BYTES) -> str:
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - size))
        return f.read().decode(errors="replace")


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float = TERMINATE_GRACE_S) -> None:
    """SIGTERM the job's process group (Spark's JVM included), SIGKILL it if it lingers."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def supervise(
    argv: list[str],
    *,
    env: Mapping[str, str],
    workdir: Path,
    time_limit_s: float,
    should_cancel: Callable[[], bool],
    on_start: Callable[[int], object] = lambda pid: None,
    on_tick: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.monotonic,
    poll_s: float = 1.0,
) -> Outcome:
    """Run ``argv`` to completion, or kill it when ``should_cancel()`` or the time limit says so."""
    stdout_path, stderr_path = workdir / "stdout", workdir / "stderr"
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        proc = subprocess.Popen(
            argv,
            cwd=settings.BASE_DIR,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,  # its own process group: killing it takes Spark's JVM too
        )
        started = clock()
        cancelled = timed_out = False
        try:
            on_start(proc.pid)
            while True:
                try:
                    proc.wait(timeout=poll_s)
                    break
                except subprocess.TimeoutExpired:
                    pass
                on_tick()
                if should_cancel():
                    cancelled = True
                elif clock() - started > time_limit_s:
                    timed_out = True
                if cancelled or timed_out:
                    _kill_group(proc)
                    break
        finally:
            if proc.poll() is None:  # the worker itself is being stopped (e.g. Celery's soft time limit)
                _kill_group(proc, grace_s=2.0)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # stragglers of an exited job (a JVM left behind)
    killed = cancelled or timed_out
    return Outcome(
        exit_code=None if killed else proc.returncode,
        stdout=stdout_path.read_text(errors="replace"),
        stderr_tail=_tail(stderr_path),
        cancelled=cancelled,
        timed_out=timed_out,
    )
