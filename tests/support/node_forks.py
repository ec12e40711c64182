"""Storage nodes forked from a process that has already imported the node: a fork server, as
multiprocessing's ``forkserver`` or Android's zygote.

A node started the usual way (``storage-node …``) spends about 0.35 s of CPU before it serves: Python
starting, then importing the node, uvicorn, numpy and RocksDB. The suite starts a node for ~370 tests,
so that is two minutes of one core. Each test process instead starts one fork server
(``python -m tests.support.node_forks``), which imports the node once and then forks a child per node
and runs the node's own ``main(argv)`` in it; the child is the same program as ``storage-node`` with
the same arguments, environment, working directory and log file, in a fresh process.

The protocol is one JSON object a line on the server's stdin and stdout:
``{"op": "fork", "argv": [...], "env": {...}, "cwd": ..., "log": ...}`` → ``{"pid": N}``, and
``{"op": "reap", "pid": N}`` → ``{"status": S | null}`` (the wait status once it has exited).

The forked node is the server's child, not the test's, so :class:`ForkedProcess` stands in for
``subprocess.Popen`` with a pidfd: the test process waits on it and signals through it (a pid could be
reused; a pidfd cannot), and asks the server for the exit status. The server reaps every exited child
at each request, so none stays a zombie; a test process that dies leaves the server its stdin's end of
file, and it exits (the nodes it forked carry the test's owner mark: ``kill_leftovers`` finds them).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import IO, Any

# What a node imports before it serves; the server imports them once.
PRELOAD = (
    "storage_engine.node.server",
    "storage_engine.adapters.segment",
    "storage_engine.adapters.rocksdb",
    "storage_engine.adapters.memory",
    "uvicorn.loops.auto",
    "uvicorn.loops.asyncio",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.websockets.auto",
    "uvicorn.lifespan.on",
)


class ForkedProcess:
    """The part of ``subprocess.Popen`` the tests use, for a process the fork server started."""

    def __init__(self, server: NodeForkServer, pid: int) -> None:
        self._server = server
        self.pid = pid
        self._pidfd = os.pidfd_open(pid)
        self.returncode: int | None = None

    def has_exited(self, timeout: float | None) -> bool:
        """Whether the process has ended (waiting up to ``timeout``); its status is then the server's to give."""
        readable, _, _ = select.select([self._pidfd], [], [], timeout)
        return bool(readable)

    def _collect(self) -> None:
        status = self._server.reap(self.pid)
        if status is not None:
            self.returncode = os.waitstatus_to_exitcode(status)
            os.close(self._pidfd)

    def poll(self) -> int | None:
        if self.returncode is None and self.has_exited(0):
            self._collect()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self.has_exited(timeout):
                raise subprocess.TimeoutExpired(f"node {self.pid}", timeout or 0)
            while self.returncode is None:  # exited: the server reaps it at once
                self._collect()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # exited: Popen.send_signal does nothing then
                signal.pidfd_send_signal(self._pidfd, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class NodeForkServer:
    """This test process's fork server (:func:`fork_server` starts it on first use)."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.node_forks"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=Path(__file__).resolve().parents[2],
        )
        self._lock = threading.Lock()
        if self._ask({"op": "ready"}) != {"ready": True}:
            raise RuntimeError("the node fork server did not start")

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        with self._lock:
            self._proc.stdin.write(json.dumps(request).encode() + b"\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the node fork server exited ({self._proc.poll()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def fork(self, argv: list[str], log_path: Path, env: dict[str, str], cwd: Path) -> ForkedProcess:
        """Start ``argv`` (``storage-node`` and its arguments) as a fork; its output goes to ``log_path``."""
        answer = self._ask({"op": "fork", "argv": argv, "env": env, "cwd": str(cwd), "log": str(log_path)})
        return ForkedProcess(self, int(answer["pid"]))

    def reap(self, pid: int) -> int | None:
        status = self._ask({"op": "reap", "pid": pid})["status"]
        return None if status is None else int(status)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def close(self) -> None:
        """End the server: its stdin closes and it exits (nodes it forked are their tests' to stop)."""
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait(10)

    def alive(self) -> bool:
        return self._proc.poll() is None


_server: NodeForkServer | None = None


def fork_server() -> NodeForkServer:
    """This process's fork server, started on first use (and again if it died)."""
    global _server
    if _server is None or not _server.alive():
        _server = NodeForkServer()
    return _server


# -- the server's side ---------------------------------------------------------------------------
def _run_node(request: dict[str, Any]) -> None:
    """In the child: become ``storage-node argv…`` with the request's environment and log, then exit."""
    from storage_engine.node import server

    code = 1
    try:
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.argv = list(request["argv"])
        code = server.main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # reported in the node's log, as an uncaught error would be
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _serve(requests: IO[str], answers: IO[str]) -> None:
    exited: dict[int, int] = {}
    for line in requests:
        while True:  # reap every child that has exited, keeping its status for its "reap"
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            exited[pid] = status
        request = json.loads(line)
        if request["op"] == "fork":
            pid = os.fork()
            if pid == 0:
                _run_node(request)
            answer: dict[str, Any] = {"pid": pid}
        elif request["op"] == "reap":
            answer = {"status": exited.pop(request["pid"], None)}
        else:
            answer = {"ready": True}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def main() -> None:
    for module in PRELOAD:
        importlib.import_module(module)
    # The server must stay single-threaded to fork safely; nothing above starts a thread.
    assert threading.active_count() == 1, threading.enumerate()
    _serve(sys.stdin, sys.stdout)


if __name__ == "__main__":
    main()
