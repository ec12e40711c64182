"""The lifecycle bench's peer mode (issue 15) runs end to end, briefly: our system (node, Celery worker
and beat) without and with lifecycle, then NATS JetStream and Redis Streams under the same load, one
JSON line each with the promised fields (never asserting on timings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from backend.bench.peers import nats_server_path, rfc3339_ms

pytestmark = pytest.mark.slow
FIELDS = {"system", "expired_ratio", "expired_ratio_max", "worst_past_ttl_s", "produce_p99_ms", "samples"}


def redis_url() -> str | None:
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    try:
        import redis

        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
    except Exception:
        return None
    return url


def test_nats_first_ts_is_read_in_ms():
    stamp = datetime(2026, 11, 23, 18, 39, 57, 500_000, tzinfo=UTC)
    assert rfc3339_ms("2026-11-23T18:39:57.500604123Z") == int(stamp.timestamp() * 1000)
    assert rfc3339_ms("0001-01-01T00:00:00Z") is None  # an empty stream's


def test_peer_mode_prints_one_line_per_system(tmp_path: Path):
    if nats_server_path() is None:
        pytest.skip("nats-server is not installed (make peers installs Debian's package)")
    url = redis_url()
    if url is None:
        pytest.skip("no Redis on 127.0.0.1:6379 (the Celery broker and the Redis Streams peer)")
    argv = [
        sys.executable, "-m", "backend.bench", "lifecycle",
        "--namespaces", "2", "--shards", "2", "--seconds", "3", "--rate", "100", "--batch", "10",
        "--ttl-ms", "1000", "--warmup-s", "1", "--peers", "nats,redis", "--redis-url", url,
        "--peer-redis-url", url, "--json",
    ]  # fmt: skip
    env = {**os.environ, "APP_ENV": "development", "VAR_DIR": str(tmp_path)}
    env.pop("DATABASE_URL", None)  # the bench's own temporary SQLite database
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=150, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [line["system"] for line in lines] == [
        "without-lifecycle",
        "with-lifecycle",
        "nats-jetstream",
        "redis-streams",
    ]
    for line in lines:
        assert line.keys() >= FIELDS, line
        assert line["samples"] >= 1 and line["produced"] > 0
        assert 0 <= line["expired_ratio"] <= 1 and line["worst_past_ttl_s"] >= 0
    assert lines[1]["deadlines"] is True and lines[0]["runs_per_s"] == 0
