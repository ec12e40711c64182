"""Nodes forked from the fork server (tests/support/node_forks.py) behave as spawned ones: they serve, log to
their file, see the environment given, exit with the codes Popen reports, and leave no zombie behind."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.node_forks import NodeForkServer
from tests.support.processes import OWNER_ENV, ROOT, free_port, http_ok, kill_leftovers, process_env, wait_until


def node_argv(data_dir: Path, port: int, *extra: str) -> list[str]:
    return ["storage-node", "--data-dir", str(data_dir), "--port", str(port), "--log-level", "info", *extra]


@pytest.fixture
def server() -> Iterator[NodeForkServer]:
    started = NodeForkServer()
    yield started
    started.close()
    assert not started.alive()  # the server ends with its test process's pipe


def test_a_forked_node_serves_logs_and_stops_cleanly_on_sigterm(server: NodeForkServer, tmp_path: Path):
    port = free_port()
    env = {**process_env(), "NODE_TOKEN": "from-the-environment"}  # the node reads its token from here
    node = server.fork(node_argv(tmp_path / "data", port), tmp_path / "node.log", env, ROOT)
    wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/health") or node.poll() is not None, 30, "the node", 0.02)
    assert node.poll() is None
    headers = {"Authorization": "Bearer from-the-environment"}
    assert httpx.get(f"http://127.0.0.1:{port}/v1/namespaces", headers=headers).status_code == 200
    assert httpx.get(f"http://127.0.0.1:{port}/v1/namespaces").status_code == 401
    with pytest.raises(subprocess.TimeoutExpired):
        node.wait(0.05)
    node.terminate()
    assert node.wait(20) == 0 and node.poll() == 0
    assert f"on http://127.0.0.1:{port}" in (tmp_path / "node.log").read_text()
    assert (tmp_path / "data").is_dir()


def test_exit_codes_are_popens_and_no_child_stays_a_zombie(server: NodeForkServer, tmp_path: Path):
    port = free_port()
    killed = server.fork(node_argv(tmp_path / "a", port, "--token", "t"), tmp_path / "a.log", process_env(), ROOT)
    wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/health"), 30, "the node", 0.02)
    killed.kill()
    assert killed.wait(20) == -signal.SIGKILL
    # No token and no --insecure-no-auth: the node's main refuses with 2, as `storage-node` does.
    env = {k: v for k, v in process_env().items() if k != "NODE_TOKEN"}
    refused = server.fork(node_argv(tmp_path / "b", free_port()), tmp_path / "b.log", env, ROOT)
    assert refused.wait(20) == 2
    assert "--token (or NODE_TOKEN) is required" in (tmp_path / "b.log").read_text()
    server.reap(0)  # any request reaps what has exited
    zombies = [
        pid
        for pid in (killed.pid, refused.pid)
        if Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"
    ]
    assert zombies == []


def test_forked_nodes_carry_the_owner_mark_so_leftovers_are_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # An owner of its own, so that kill_leftovers takes this test's server and node and nothing of this process's.
    owner = 2**22 + 12_345
    monkeypatch.setenv(OWNER_ENV, f"{os.environ.get(OWNER_ENV, '')} {owner}")
    server, port = NodeForkServer(), free_port()
    node = server.fork(node_argv(tmp_path / "c", port, "--token", "t"), tmp_path / "c.log", process_env(), ROOT)
    wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/health"), 30, "the node", 0.02)
    assert {node.pid, server.pid} <= set(kill_leftovers(owner))  # the node and the server that forked it
    assert node.has_exited(20)
