"""The whole system as `make up` starts it (launcher → honcho → node, web, worker,
beat), on free ports with SQLite and a data directory under a temp dir."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.processes import Proc, free_port, spawn, wait_until

ADMIN_PASSWORD = "quickstart-pw-123"


@dataclass
class System:
    proc: Proc
    url: str
    node_port: int
    var_dir: Path

    @property
    def node_url(self) -> str:
        return f"http://127.0.0.1:{self.node_port}"

    @property
    def node_token(self) -> str:
        return (self.var_dir / "node_token").read_text().strip()


def health(url: str) -> dict:
    try:
        return httpx.get(f"{url}api/health", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return {}


def launch(var_dir: Path, **extra_env: str) -> System:
    """Start the system and wait until /api/health is all green (raises with the log otherwise)."""
    web_port, node_port = free_port(), free_port()
    env = {
        "APP_ENV": "development",
        "VAR_DIR": str(var_dir),
        "DATABASE_URL": f"sqlite:///{var_dir / 'db.sqlite3'}",
        "WEB_PORT": str(web_port),
        "NODE_PORT": str(node_port),
        "REDIS_URL": "redis://127.0.0.1:6379/7",
        "CELERY_QUEUE": f"system-{uuid.uuid4().hex[:8]}",  # a queue of its own: no stray worker takes its tasks
        "CELERY_BROKER_URL": "",
        "ADMIN_PASSWORD": ADMIN_PASSWORD,
        "BEAT_HEARTBEAT_INTERVAL_S": "2",
        "NODE_URL": "",
        "NODE_TOKEN": "",
        "NODE_METRICS_TOKEN": "",
        "SECRET_KEY": "",
        **extra_env,
    }
    proc = spawn([sys.executable, "-m", "backend.launcher"], var_dir / "up.log", env=env, new_session=True)
    url = f"http://127.0.0.1:{web_port}/"
    try:
        wait_until(lambda: health(url).get("status") == "ok" or proc.popen.poll() is not None, 150, "all green")
    except TimeoutError:
        proc.kill_group()
        raise RuntimeError(f"health never turned green: {health(url)}\n--- log ---\n{proc.log()[-6000:]}") from None
    if proc.popen.poll() is not None:
        raise RuntimeError(f"launcher exited {proc.popen.returncode}\n{proc.log()[-6000:]}")
    return System(proc, url, node_port, var_dir)


def running(directory: Path, **env: str) -> Iterator[System]:
    """A module fixture's body: the system launched in ``directory`` (a failed start fails the test,
    naming why), yielded, and its whole process group killed afterwards."""
    try:
        system = launch(directory, **env)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield system
    system.proc.kill_group()
