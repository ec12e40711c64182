"""Start the machine's Redis and PostgreSQL when they are down (the commands the
machine documents), so the suite uses them for real wherever it runs."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

from tests.support.processes import OWNER_ENV


def _service_env() -> dict[str, str]:
    """A service started here outlives the test run: it must not carry the run's mark (kill_leftovers)."""
    return {name: value for name, value in os.environ.items() if name != OWNER_ENV}


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _wait(host: str, port: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if port_open(host, port):
            return True
        time.sleep(0.2)
    return False


def ensure_redis() -> None:
    if port_open("127.0.0.1", 6379):
        return
    Path("/var/lib/redis").mkdir(parents=True, exist_ok=True)
    Path("/var/log/redis").mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "redis-server",
            "--daemonize",
            "yes",
            "--bind",
            "127.0.0.1",
            "-::1",
            "--port",
            "6379",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            "/var/lib/redis",
            "--logfile",
            "/var/log/redis/ci.log",
        ],
        check=False,
        env=_service_env(),
    )
    if not _wait("127.0.0.1", 6379, 15):
        raise RuntimeError("Redis is down on 127.0.0.1:6379 and could not be started")


def ensure_postgres() -> None:
    if port_open("127.0.0.1", 5432):
        return
    versions = sorted(os.listdir("/etc/postgresql")) if os.path.isdir("/etc/postgresql") else []
    if versions:
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main", "start"],
            check=False,
            env=_service_env(),
        )
    if not _wait("127.0.0.1", 5432, 30):
        raise RuntimeError("PostgreSQL is down on 127.0.0.1:5432 and could not be started")
