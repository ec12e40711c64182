"""Real processes for integration tests: storage nodes, Celery workers and beat,
each on free loopback ports, stopped (and reaped) when the test ends."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.node_forks import fork_server

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# Every process a test starts carries the test process's id in its environment (:func:`own_children`), and hands
# it down to everything it starts in turn (a launched system's node, web, worker and beat, in sessions of their
# own), so that :func:`kill_leftovers` finds them all even when the test process died before its fixtures' teardown.
OWNER_ENV = "LCS_TEST_OWNER"
# Nodes are forked from a server that has imported the node once (tests/support/node_forks.py); "0" spawns each
# one as `storage-node`, as an operator does.
NODE_FORKS_ENV = "TEST_NODE_FORKS"


def own_children() -> None:
    """Mark every process started from now on (any way: spawn, subprocess, Spark's JVM) as this process's. The
    mark lists every test process above too (an xdist worker's children carry the controller's id and the
    worker's), so that killing the owner of an owner finds them."""
    owners = os.environ.get(OWNER_ENV, "").split()
    os.environ[OWNER_ENV] = " ".join([*owners, str(os.getpid())])


# Ports for the servers tests start, below the kernel's ephemeral range (ip_local_port_range, 32768 up here): a
# port the kernel handed out free could be taken by any client connection's source port before the server bound
# it ("address already in use", seen with four xdist workers). Each test process draws from a block of its own.
PORT_BLOCK = 2_000
FIRST_PORT = 12_000
_ports = random.Random()  # not the random module's: Hypothesis seeds that one per example


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port() -> int:
    """A loopback port nothing listens on, outside the ephemeral range, in this test process's own block."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) + 1 if worker.startswith("gw") and worker[2:].isdigit() else 0
    blocks = max(1, (_ephemeral_start() - FIRST_PORT) // PORT_BLOCK)
    low = FIRST_PORT + (index % blocks) * PORT_BLOCK
    for _ in range(200):
        port = _ports.randrange(low, low + PORT_BLOCK)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:  # the block is full: any port the kernel gives
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.1) -> None:
    """Poll ``predicate`` (for processes to come up, not for time to pass)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def http_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@dataclass
class Proc:
    popen: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
        return self.popen.returncode

    def kill_group(self) -> None:
        """Stop a launcher and everything it started, even children in their own sessions.

        First a graceful SIGINT (honcho stops its processes), then SIGKILL for any
        descendant still alive: no test may leave a worker behind to steal the
        next test's tasks.
        """
        descendants = descendants_of(self.popen.pid)
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(30)
        for pid in [self.popen.pid, *descendants, *descendants_of(self.popen.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(10)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(5)


def kill_leftovers(owner: int | None = None) -> list[int]:
    """SIGKILL every live process started (directly or not) by the test process ``owner`` (this one by default);
    returns their pids. Called when a test process ends, however it ends (tests/conftest.py)."""
    prefix, me = f"{OWNER_ENV}=".encode(), str(owner or os.getpid()).encode()
    killed = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                marks = [v[len(prefix) :] for v in environ.read().split(b"\0") if v.startswith(prefix)]
            if not marks or me not in marks[0].split():
                continue
            os.kill(int(entry), signal.SIGKILL)
            killed.append(int(entry))
        except (OSError, ValueError):
            continue
    return killed


def descendants_of(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (children first), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def process_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment :func:`spawn` gives a process: this one's, unbuffered, with the venv's scripts first."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    full_env["PATH"] = f"{BIN}{os.pathsep}{full_env.get('PATH', '')}"
    return full_env


def spawn(
    argv: list[str], log_path: Path, env: dict[str, str] | None = None, cwd: Path = ROOT, new_session: bool = False
) -> Proc:
    full_env = process_env(env)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        popen = subprocess.Popen(
            argv, cwd=cwd, env=full_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=new_session
        )
    return Proc(popen, log_path)


@dataclass
class NodeProc(Proc):
    url: str = ""
    token: str = ""
    data_dir: Path = Path()


def start_node(
    data_dir: Path,
    token: str = "test-token",
    adapter: str | None = None,
    extra: list[str] | None = None,
    port: int | None = None,
) -> NodeProc:
    port = port or free_port()
    adapter = adapter or os.environ.get("TEST_NODE_ADAPTER", "segment")
    argv = [
        str(BIN / "storage-node"),
        "--data-dir",
        str(data_dir),
        "--port",
        str(port),
        "--token",
        token,
        "--adapter",
        adapter,
        "--log-level",
        "warning",
        *(extra or []),
    ]
    log_path = data_dir.parent / f"node-{port}.log"
    if os.environ.get(NODE_FORKS_ENV, "1") == "1":  # forked from a process that has imported the node (node_forks)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        popen: Any = fork_server().fork(argv, log_path, process_env(), ROOT)
    else:
        popen = spawn(argv, log_path).popen
    node = NodeProc(popen, log_path, url=f"http://127.0.0.1:{port}", token=token, data_dir=data_dir)
    try:
        wait_until(lambda: http_ok(f"{node.url}/health") or node.popen.poll() is not None, 30, "the node", 0.02)
    except TimeoutError:
        node.kill()
        raise
    if node.popen.poll() is not None:
        raise RuntimeError(f"storage node exited with {node.popen.returncode}:\n{node.log()}")
    return node
