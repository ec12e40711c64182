"""Does expired data leave on time, at scale? (issues 8 and 15)

Starts a real node, a Celery worker and Celery beat (Redis broker, a queue of
its own), creates ``--namespaces`` namespaces of ``--shards`` shards, and
produces records with a TTL at a steady rate for two phases of ``--seconds``
each: first with the lifecycle schedules disabled, then enabled (sweeps at the
node's next due times, ``GET /v1/node/next-due``, with the interval schedules as
a safety net; ``--no-deadlines``: the intervals only). With ``--peers nats,redis``
the same load then runs against NATS JetStream and Redis Streams
(:mod:`backend.bench.peers`). Every system is sampled every second the same way
(:mod:`backend.bench.measure`) and prints one JSON line: the steady-state
expired ratio, its maximum, the worst time a stored record spent past its TTL
and produce latency; ours adds lifecycle runs per second and the deepest
Celery queue.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings
from django.core.management import call_command
from django.db.models import Sum

from backend.bench import peers as peer_bench
from backend.bench.measure import Load, Sample, Sampler, now_ms, summary
from storage_engine.api import NewRecord
from storage_engine.node_api.client import NodeClient

BIN = Path(sys.executable).parent


def _spawn(argv: list[str], log: Path, env: dict[str, str]) -> Any:
    out = open(log, "wb")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen(
        argv, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_http(url: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} never answered")


class Producer:
    """Our system's side of the shared load (:class:`~backend.bench.measure.Load`): appends to the node
    and remembers, per shard, the base offset and TTL end of every batch (the ground truth of what is
    expired, see :func:`probe_node`)."""

    def __init__(self, client: Any, load: Load, record_ttl: bool = False) -> None:
        self.client, self.load, self.record_ttl = client, load, record_ttl
        self.value = b"x" * load.record_bytes
        self.batches: dict[tuple[str, int], tuple[list[int], list[int]]] = {}  # shard → (bases, TTL ends)
        self._new = NewRecord

    def send(self, name: str, shard: int, deadline: int) -> None:
        # The namespace's ttl_ms gives every record its TTL (as MaxAge does a NATS stream's messages); with
        # --ttl-source record each record also carries it as expire_at (and so gets a TTL-index entry).
        records = [self._new(value=self.value, expire_at=deadline if self.record_ttl else None)] * self.load.batch
        result = self.client.append(name, shard, records)
        bases, deadlines = self.batches.setdefault((name, shard), ([], []))
        bases.append(result.base_offset)
        deadlines.append(deadline)

    def first_deadline(self, name: str, shard: int, offset: int) -> int | None:
        """When the TTL of the record at ``offset`` ended (the batch holding it)."""
        found = self.batches.get((name, shard))
        if not found:
            return None
        i = bisect_right(found[0], offset) - 1
        return found[1][i] if i >= 0 else None


def probe_node(client: Any, producer: Producer) -> Callable[[float], Sample]:
    """A sample of our node: stored records from ``GET /v1/stats`` (every shard's ``record_count``),
    expired = stored − what the ledger says has not reached its TTL, and the oldest stored record
    of each shard found from its ``log_start_offset`` in what was appended (an upper bound: a
    rewrite may have removed the records at the start of the first segment). The engine's own
    ``expired_records`` rides along as a cross-check."""

    def probe(t_s: float) -> Sample:
        stats = client.stats()
        at = now_ms()
        stored = engine_expired = 0
        worst = 0
        for sh in stats["shards"]:
            stored += sh["record_count"]
            engine_expired += sh["expired_records"]
            if sh["record_count"]:
                deadline = producer.first_deadline(sh["namespace"], sh["shard"], sh["log_start_offset"])
                if deadline is not None:
                    worst = max(worst, at - deadline)
        unexpired = producer.load.ledger.unexpired(at)
        return Sample(t_s, stored, stored - unexpired, max(0, worst) / 1000, engine_expired)

    return probe


def _queue_depth(queues: list[str]) -> int:
    # Django app loading: __main__ imports this module to parse arguments, before django.setup().
    from backend.apps.metrics.services import celery_queue_depths

    return max(celery_queue_depths(queues).values(), default=0)


def _phase(
    name: str, producer: Producer, client: Any, args: argparse.Namespace, queues: list[str], **extra: Any
) -> dict[str, Any]:
    # Django app loading: __main__ imports this module to parse arguments, before django.setup().
    from backend.apps.runs.models import TaskRun

    def sweeps_by_kind() -> dict[str, int]:
        # Scheduled sweeps fold into one row per kind, target and window: a row stands for ``sweeps`` runs.
        rows = TaskRun.objects.filter(state="succeeded").values("kind").annotate(n=Sum("sweeps"))
        return {row["kind"]: int(row["n"] or 0) for row in rows}

    finished_before = sweeps_by_kind()
    reclaimed_before = TaskRun.objects.aggregate(total=Sum("bytes_reclaimed"))["total"] or 0
    depths: list[int] = []
    depth_stop = threading.Event()

    def sample_depth() -> None:
        while not depth_stop.wait(1.0):
            depths.append(_queue_depth(queues))

    depth_thread = threading.Thread(target=sample_depth, daemon=True)
    depth_thread.start()
    producer.load.latencies_ms.clear()
    sampler = Sampler(probe_node(client, producer), args.sample_s).start()
    producer.load.run(args.seconds, producer.send)
    samples = sampler.stop()
    depth_stop.set()
    depth_thread.join()
    stats = client.stats()
    finished = sweeps_by_kind()
    by_kind = {kind: n - finished_before.get(kind, 0) for kind, n in finished.items()}
    by_kind = {kind: n for kind, n in by_kind.items() if n > 0}
    runs = sum(by_kind.values())
    # every run's bytes, finished or not (a sweep under load may still be going at the end)
    reclaimed = (TaskRun.objects.aggregate(total=Sum("bytes_reclaimed"))["total"] or 0) - reclaimed_before
    return summary(
        name,
        producer.load,
        samples,
        args.warmup_s,
        args.seconds,
        segments=sum(sh["segment_count"] for sh in stats["shards"]),
        runs_per_s=round(runs / args.seconds, 2),
        runs_by_kind=by_kind,
        runs_failed=TaskRun.objects.filter(state="failed").count(),
        bytes_reclaimed=reclaimed,
        max_queue_depth=max(depths, default=0),
        probe_errors=sampler.errors,
        **extra,
    )


def run(args: argparse.Namespace, scratch: Path) -> Iterator[dict[str, Any]]:
    # Django app loading: __main__ imports this module to parse arguments, before django.setup().
    from backend.apps.lifecycle.schedules import set_schedules_enabled
    from backend.apps.namespaces.services import create_namespace
    from backend.apps.nodes.models import StorageNode

    logging.getLogger("httpx").setLevel(logging.WARNING)
    call_command("migrate", interactive=False, verbosity=0)
    logs = Path(args.log_dir) if args.log_dir else scratch
    logs.mkdir(parents=True, exist_ok=True)
    token, queue, port = uuid.uuid4().hex, f"bench-{uuid.uuid4().hex[:8]}", _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        "APP_ENV": "development",
        "DATABASE_URL": os.environ["DATABASE_URL"],
        "VAR_DIR": str(scratch),
        "CELERY_QUEUE": queue,
        "CELERY_BROKER_URL": args.redis_url,
        "NODE_TOKEN": token,
        "NODE_URL": url,
        "LIFECYCLE_DEADLINES": "1" if args.deadlines else "0",
    }
    os.environ["LIFECYCLE_DEADLINES"] = env["LIFECYCLE_DEADLINES"]  # the schedules this process writes follow it
    procs = [
        _spawn(
            [
                str(BIN / "storage-node"),
                "--data-dir",
                str(scratch / "node"),
                "--port",
                str(port),
                "--token",
                token,
                "--log-level",
                "warning",
            ],
            logs / "node.log",
            env,
        )
    ]
    try:
        _wait_http(f"{url}/health")

        settings.NODE_URL, settings.NODE_TOKEN = url, token
        settings.CELERY_TASK_DEFAULT_QUEUE = queue  # what this process sends (the first due sweeps) goes there
        StorageNode.objects.create(name="node-1", url=url, token=token)
        # Segments roll well within the TTL (--segment-ms, default TTL/20) so that whole expired segments can
        # be reclaimed close to their records' deadlines (layer 3).
        segment_ms = args.segment_ms or max(1_000, args.ttl_ms // 20)
        policy = {
            "scan_interval_ms": args.scan_interval_ms,
            "compaction_check_interval_ms": args.scan_interval_ms,
            "segment_bytes": args.segment_bytes,
            "segment_ms": segment_ms,
            "ttl_ms": args.ttl_ms,
        }
        names = [f"bench-{i:03d}" for i in range(args.namespaces)]
        for name in names:
            create_namespace(name=name, shards=args.shards, policy=policy)
        set_schedules_enabled(False)  # the first phase: no lifecycle schedule fires (the tick skips them)
        celery = [sys.executable, "-m", "celery", "-A", "backend.config"]
        # One worker for everything (--no-node-worker), or, as README "Several nodes" advises, the node's
        # lifecycle queue served by a worker of its own, so that sweeps never wait behind the control plane's
        # long periodic tasks (catalog sync and metrics take seconds each at 800 shards).
        workers = [(f"{queue},{queue}.node-1", "worker.log")]
        if args.node_worker:
            workers = [(queue, "worker.log"), (f"{queue}.node-1", "node-worker.log")]
        for index, (queues_arg, log_name) in enumerate(workers):
            procs.append(
                _spawn(
                    [
                        *celery,
                        "worker",
                        "--concurrency",
                        "2",
                        "--loglevel",
                        args.celery_log_level,
                        "-Q",
                        queues_arg,
                        "-n",
                        f"bench{index}@%h",
                        "--without-gossip",
                        "--without-mingle",
                    ],
                    logs / log_name,
                    env,
                )
            )
        procs.append(
            _spawn(
                [
                    *celery,
                    "beat",
                    "--loglevel",
                    "WARNING",
                    "--pidfile=",
                    "--scheduler",
                    "django_celery_beat.schedulers:DatabaseScheduler",
                ],
                logs / "beat.log",
                env,
            )
        )
        queues = [queue, f"{queue}.node-1"]
        with (
            NodeClient(url, token, binary=True, timeout_s=30) as client,
            NodeClient(url, token, timeout_s=30) as probe_client,
        ):
            load = Load(names, args.shards, args.rate, args.batch, args.ttl_ms, args.record_bytes)
            producer = Producer(client, load, record_ttl=args.ttl_source == "record")
            node_policy = client.get_namespace(names[0]).policy
            setup = {
                "namespaces": len(names),
                "shards": args.shards,
                "rate": args.rate,
                "record_bytes": args.record_bytes,
                "segment_ms": node_policy.segment_ms,
                "segment_bytes": node_policy.segment_bytes,
                "ttl_ms": node_policy.ttl_ms,
                "ttl_source": args.ttl_source,
                "node_worker": args.node_worker,
            }
            yield _phase("without-lifecycle", producer, probe_client, args, queues, **setup)
            set_schedules_enabled(True)  # the next tick (every second) starts them
            if args.deadlines:
                # Django app loading (see run's imports).
                from backend.apps.lifecycle.services import schedule_due_sweeps

                schedule_due_sweeps(StorageNode.objects.get(name="node-1"))  # then every sweep schedules the next
            yield _phase("with-lifecycle", producer, probe_client, args, queues, deadlines=args.deadlines, **setup)
    finally:
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(20)
            except Exception:
                os.killpg(proc.pid, signal.SIGKILL)
    for peer in peer_bench.parse_peers(args.peers):
        if peer == "nats":
            yield peer_bench.run_nats(args, names, scratch)
        else:
            yield peer_bench.run_redis(args, names)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespaces", type=int, default=200)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=120, help="length of each phase (and of each peer's run)")
    parser.add_argument("--rate", type=int, default=2_000, help="records produced per second")
    parser.add_argument("--batch", type=int, default=50, help="records per produce call")
    parser.add_argument("--record-bytes", type=int, default=100, help="value size of every record")
    parser.add_argument("--ttl-ms", type=int, default=20_000)
    parser.add_argument(
        "--ttl-source",
        choices=["namespace", "record"],
        default="namespace",
        help="where our records' TTL comes from: the namespace's ttl_ms (as the peers' per-stream age), or "
        "also each record's expire_at (a TTL-index entry per record: the TTL scan's work too)",
    )
    parser.add_argument(
        "--scan-interval-ms",
        type=int,
        default=5_000,
        help="the policies' sweep intervals (with deadline scheduling only the safety net)",
    )
    parser.add_argument(
        "--segment-ms",
        type=int,
        default=None,
        help="segment roll time (default: TTL/20, at least 1 s). Whole segments go once their newest record "
        "expires, so a record can stay up to segment-ms past its TTL: keep it well under the TTL",
    )
    parser.add_argument("--segment-bytes", type=int, default=16 * 1024)
    parser.add_argument(
        "--no-node-worker",
        dest="node_worker",
        action="store_false",
        help="one Celery worker for every queue (default: the node's lifecycle queue has a worker of its own)",
    )
    parser.add_argument(
        "--no-deadlines",
        dest="deadlines",
        action="store_false",
        help="sweeps on the schedules' intervals only (before issue 15), not at the node's next due times",
    )
    parser.add_argument("--log-dir", default=None, help="keep the node's, worker's and beat's logs here")
    parser.add_argument("--celery-log-level", default="WARNING", help="the worker's (INFO shows every task)")
    parser.add_argument("--warmup-s", type=float, default=40, help="samples before this are not steady state")
    parser.add_argument("--sample-s", type=float, default=1.0, help="seconds between two samples")
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--database-url", default=None, help="default: a temporary SQLite file")
    parser.add_argument("--json", action="store_true")
    peer_bench.add_arguments(parser)


def emit(line: dict[str, Any], as_json: bool) -> None:
    print(json.dumps(line) if as_json else "  ".join(f"{k}={v}" for k, v in line.items()), flush=True)
