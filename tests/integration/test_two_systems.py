"""Two systems on one machine never touch each other: each `make up` (launcher → node, web, worker, beat) has
its own VAR_DIR and ports, keeps every runtime file under its VAR_DIR (gunicorn's control socket too, which
gunicorn would put at one path per user) and, on one Redis, its own Celery queue and broadcasts. One stops;
the other still answers, with its files intact."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.launcher import BASE_DIR, prepare_environment, system_queue
from tests.support.processes import BIN, descendants_of
from tests.support.system import System, health, launch

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def control(socket_path: Path, command: str) -> dict[str, Any]:
    """What gunicorn answers on its control socket (gunicornc, JSON)."""
    result = subprocess.run(
        [str(BIN / "gunicornc"), "-s", str(socket_path), "-c", command, "-j"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def runtime_files(system: System) -> dict[str, Path]:
    run = system.var_dir / "run"
    (metrics,) = run.glob("web-metrics-*")
    return {"control socket": run / "gunicorn.ctl", "web metrics": metrics, "node data": system.var_dir / "data"}


def check_alive(system: System) -> None:
    body = health(system.url)
    assert body.get("status") == "ok", body
    # Its own worker answers its pings, and only it: broadcasts do not cross to the other system's worker.
    assert body["components"]["worker"]["detail"].startswith("1 worker(s)"), body["components"]["worker"]
    assert httpx.get(f"{system.node_url}/readyz", timeout=5).status_code == 200
    socket_path = runtime_files(system)["control socket"]
    assert socket_path.is_socket()
    master = control(socket_path, "show stats")["pid"]
    assert master in descendants_of(system.proc.popen.pid)  # this system's gunicorn answers on this socket


def test_two_systems_run_side_by_side_and_one_stops_alone(tmp_path: Path):
    # One home and one runtime directory for both, as for two systems of one user: nothing may go there.
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    home.mkdir()
    xdg.mkdir()
    # CELERY_QUEUE empty: the launcher gives each system its own queue on the shared Redis (its default).
    shared = {"HOME": str(home), "XDG_RUNTIME_DIR": str(xdg), "CELERY_QUEUE": ""}
    systems: list[System] = []
    try:
        for name in ("a", "b"):
            try:
                systems.append(launch(tmp_path / name, **shared))
            except RuntimeError as exc:
                pytest.fail(str(exc))
        a, b = systems
        for system in systems:
            check_alive(system)
        assert [*home.rglob("*"), *xdg.rglob("*")] == []  # nothing per user: all of it is per system
        assert not any(runtime_files(a)[k] == runtime_files(b)[k] for k in runtime_files(a))
        kept = {name: path.stat().st_ino for name, path in runtime_files(a).items()}

        b.proc.kill_group()  # Ctrl-C, as an operator stops `make up`
        assert b.proc.popen.poll() is not None
        assert not httpx_answers(b.url) and not httpx_answers(f"{b.node_url}/readyz")

        check_alive(a)  # still answering: web, node, worker, beat
        assert {name: path.stat().st_ino for name, path in runtime_files(a).items()} == kept  # the same files
        body = health(a.url)
        assert {name for name, c in body["components"].items() if c["ok"]} >= {"database", "broker", "node", "beat"}
    finally:
        for system in systems:
            system.proc.kill_group()


def httpx_answers(url: str) -> bool:
    try:
        httpx.get(url, timeout=1)
        return True
    except httpx.HTTPError:
        return False


def test_each_var_dir_has_its_own_celery_queue(tmp_path: Path):
    assert system_queue(BASE_DIR / "var") == "celery"  # the repository's own system keeps the usual name
    a, b = system_queue(tmp_path / "a"), system_queue(tmp_path / "b")
    assert a.startswith("celery-") and b.startswith("celery-") and a != b
    assert system_queue(tmp_path / "a" / ".." / "a") == a  # one directory, one queue, however written
    env = prepare_environment({"VAR_DIR": str(tmp_path / "a"), "CELERY_BROKER_URL": "filesystem://"})
    assert env["CELERY_QUEUE"] == a
    assert prepare_environment({**env, "CELERY_QUEUE": "mine"})["CELERY_QUEUE"] == "mine"  # set: kept
