"""Do the lifecycle tasks keep up? (issue 8)

Starts a real node, a Celery worker and Celery beat (Redis broker, a queue of
its own), creates ``--namespaces`` namespaces of ``--shards`` shards, and
produces records with a short TTL at a steady rate for two phases of
``--seconds`` each: first with the lifecycle schedules disabled, then enabled.
Per phase it reports produce p99, the steady-state expired ratio (records
stored whose TTL has passed ÷ records stored, from what was produced), the
number of lifecycle runs finished per second and the deepest Celery queue.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.management import call_command

BIN = Path(sys.executable).parent


def _spawn(argv: list[str], log: Path, env: dict[str, str]) -> Any:
    import subprocess

    out = open(log, "wb")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen(
        argv, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_http(url: str, seconds: float = 30) -> None:
    import httpx

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
    """Steady produce load with a short TTL; remembers when it wrote what."""

    def __init__(self, client: Any, names: list[str], shards: int, rate: int, ttl_ms: int, batch: int) -> None:
        self.client, self.names, self.shards = client, names, shards
        self.rate, self.ttl_ms, self.batch = rate, ttl_ms, batch
        self.latencies: list[float] = []
        self.written: list[tuple[float, int]] = []  # (monotonic time, records)
        self._stop = threading.Event()

    def run(self, seconds: float) -> None:
        from storage_engine.api import NewRecord

        self.latencies.clear()
        interval = self.batch / self.rate
        end = time.monotonic() + seconds
        next_at = time.monotonic()
        rng = random.Random(7)
        records = [NewRecord(value=b"x" * 100, expire_at=None)] * self.batch
        while time.monotonic() < end:
            ttl_records = [NewRecord(value=r.value, expire_at=int(time.time() * 1000) + self.ttl_ms) for r in records]
            started = time.perf_counter()
            self.client.append(rng.choice(self.names), rng.randrange(self.shards), ttl_records)
            self.latencies.append((time.perf_counter() - started) * 1000)
            self.written.append((time.monotonic(), self.batch))
            next_at += interval
            time.sleep(max(0.0, next_at - time.monotonic()))

    def recent(self, within_s: float) -> int:
        cutoff = time.monotonic() - within_s
        return sum(n for t, n in self.written if t >= cutoff)


def _queue_depth(queues: list[str]) -> int:
    from backend.apps.metrics.services import celery_queue_depths

    return max(celery_queue_depths(queues).values(), default=0)


def _phase(name: str, producer: Producer, client: Any, seconds: float, queues: list[str]) -> dict[str, Any]:
    from django.db.models import Sum

    from backend.apps.runs.models import TaskRun

    finished_before = TaskRun.objects.filter(state="succeeded").count()
    reclaimed_before = TaskRun.objects.aggregate(total=Sum("bytes_reclaimed"))["total"] or 0
    depths: list[int] = []
    sampler_stop = threading.Event()

    def sample() -> None:
        while not sampler_stop.wait(1.0):
            depths.append(_queue_depth(queues))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    producer.run(seconds)
    sampler_stop.set()
    sampler.join()
    stats = client.stats()
    stored = sum(s["record_count"] for s in stats["shards"])
    live_by_ttl = min(stored, producer.recent(producer.ttl_ms / 1000))
    runs = TaskRun.objects.filter(state="succeeded").count() - finished_before
    by_kind: dict[str, int] = {}
    for run in TaskRun.objects.filter(state="succeeded").order_by("-id")[:runs]:
        by_kind[run.kind] = by_kind.get(run.kind, 0) + 1
    # every run's bytes, finished or not (a sweep under load may still be going at the end)
    reclaimed = (TaskRun.objects.aggregate(total=Sum("bytes_reclaimed"))["total"] or 0) - reclaimed_before
    failed = TaskRun.objects.filter(state="failed").count()
    lat = sorted(producer.latencies)
    return {
        "bench": "lifecycle",
        "system": name,
        "seconds": seconds,
        "stored_records": stored,
        "segments": sum(sh["segment_count"] for sh in stats["shards"]),
        "expired_ratio": round((stored - live_by_ttl) / stored, 4) if stored else 0.0,
        "runs_per_s": round(runs / seconds, 2),
        "runs_by_kind": by_kind,
        "runs_failed": failed,
        "bytes_reclaimed": reclaimed,
        "max_queue_depth": max(depths, default=0),
        "produce_p50_ms": round(statistics.median(lat), 2) if lat else None,
        "produce_p99_ms": round(lat[int(0.99 * (len(lat) - 1))], 2) if lat else None,
        "produced": sum(n for _, n in producer.written),
    }


def run(args: argparse.Namespace, scratch: Path) -> Iterator[dict[str, Any]]:
    import logging

    from django_celery_beat.models import PeriodicTask, PeriodicTasks

    from backend.apps.namespaces.services import create_namespace
    from backend.apps.nodes.models import StorageNode
    from storage_engine.client import NodeClient

    logging.getLogger("httpx").setLevel(logging.WARNING)
    call_command("migrate", interactive=False, verbosity=0)
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
    }
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
            scratch / "node.log",
            env,
        )
    ]
    try:
        _wait_http(f"{url}/health")
        from django.conf import settings

        settings.NODE_URL, settings.NODE_TOKEN = url, token
        StorageNode.objects.create(name="node-1", url=url, token=token)
        # Segments roll at the TTL so that whole expired segments can be reclaimed (layer 3).
        policy = {
            "scan_interval_ms": args.scan_interval_ms,
            "compaction_check_interval_ms": args.scan_interval_ms,
            "segment_bytes": 16 * 1024,
            "segment_ms": args.segment_ms or args.ttl_ms,
            "ttl_ms": args.ttl_ms,
        }
        names = [f"bench-{i:03d}" for i in range(args.namespaces)]
        for name in names:
            create_namespace(name=name, shards=args.shards, policy=policy)
        lifecycle_tasks = PeriodicTask.objects.filter(name__startswith="lifecycle: ")
        lifecycle_tasks.update(enabled=False)
        celery = [sys.executable, "-m", "celery", "-A", "backend.config"]
        procs.append(
            _spawn(
                [
                    *celery,
                    "worker",
                    "--concurrency",
                    "2",
                    "--loglevel",
                    "WARNING",
                    "-Q",
                    f"{queue},{queue}.node-1",
                    "--without-gossip",
                    "--without-mingle",
                ],
                scratch / "worker.log",
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
                scratch / "beat.log",
                env,
            )
        )
        queues = [queue, f"{queue}.node-1"]
        with NodeClient(url, token, binary=True, timeout_s=30) as client:
            producer = Producer(client, names, args.shards, args.rate, args.ttl_ms, args.batch)
            node_policy = client.get_namespace(names[0]).policy
            yield {
                "bench": "lifecycle",
                "system": "setup",
                "namespaces": len(names),
                "shards": args.shards,
                "segment_ms": node_policy.segment_ms,
                "ttl_ms": node_policy.ttl_ms,
            }
            yield _phase("without-lifecycle", producer, client, args.seconds, queues)
            lifecycle_tasks.update(enabled=True)
            PeriodicTasks.update_changed()  # tells beat the schedule changed
            yield _phase("with-lifecycle", producer, client, args.seconds, queues)
    finally:
        for proc in procs:
            import signal

            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(20)
            except Exception:
                os.killpg(proc.pid, signal.SIGKILL)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespaces", type=int, default=200)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60, help="length of each phase")
    parser.add_argument("--rate", type=int, default=2_000, help="records produced per second")
    parser.add_argument("--batch", type=int, default=50, help="records per produce call")
    parser.add_argument("--ttl-ms", type=int, default=5_000)
    parser.add_argument("--scan-interval-ms", type=int, default=5_000)
    parser.add_argument(
        "--segment-ms",
        type=int,
        default=None,
        help="segment roll time (default: the TTL). Whole segments go once their newest record expires, so a "
        "record can stay up to segment-ms + scan interval past its TTL: keep both well under the TTL",
    )
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--database-url", default=None, help="default: a temporary SQLite file")
    parser.add_argument("--json", action="store_true")


def emit(line: dict[str, Any], as_json: bool) -> None:
    print(json.dumps(line) if as_json else "  ".join(f"{k}={v}" for k, v in line.items()), flush=True)
