"""Operations-grade node (issue 18): probes that say why a node is not ready, one error shape
(RFC 9457 problem details) that the client reads back into the same exceptions, a CLI whose every
option has an environment variable, and JSON logs with ``LOG_FORMAT=json``."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from storage_engine import errors
from storage_engine.api import NewRecord
from storage_engine.formats.codec import scan_batches
from storage_engine.node.server import build_parser
from storage_engine.node_api.client import NodeClient
from storage_engine.node_api.problem import MEDIA_TYPE, problem
from storage_engine.node_api.wire import error_from_body, problem_for
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.version import package_version
from tests.support.processes import BIN, start_node


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_healthy_node_is_live_and_ready_without_a_token(tmp_path: Path) -> None:
    node = start_node(tmp_path / "node", adapter="segment")
    try:
        assert httpx.get(f"{node.url}/livez").json() == {"status": "ok"}
        ready = httpx.get(f"{node.url}/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        health = httpx.get(f"{node.url}/health").json()
        assert health["status"] == "ok" and health["reasons"] == [] and health["adapter"] == "segment"
        refused = httpx.get(f"{node.url}/v1/namespaces")
        assert refused.status_code == 401 and refused.headers["content-type"] == MEDIA_TYPE
        answer = httpx.get(f"{node.url}/v1/namespaces", headers={**auth(node.token), "X-Request-ID": "abc-123"})
        assert answer.headers["x-request-id"] == "abc-123"  # the id the node's log lines carry
    finally:
        node.stop()


def test_a_full_disk_makes_the_node_unready_but_alive(tmp_path: Path) -> None:
    """A one-byte quota: every measurement is far above disk_warning_ratio, so appends are refused."""
    node = start_node(tmp_path / "node", adapter="segment", extra=["--disk-capacity", "1"])
    try:
        with NodeClient(node.url, node.token) as client:
            client.create_namespace("orders", 1)
            with pytest.raises(errors.DiskFullError):
                client.append("orders", 0, [NewRecord(b"v")])
        ready = httpx.get(f"{node.url}/readyz")
        assert ready.status_code == 503 and ready.headers["content-type"] == MEDIA_TYPE
        body = ready.json()
        assert (body["code"], body["status"]) == ("not_ready", 503) and "disk" in body["detail"]
        assert [r["reason"] for r in body["reasons"]] == ["disk_full"]
        assert body["reasons"][0]["warning_ratio"] == 0.9 and body["reasons"][0]["used_ratio"] > 1
        assert httpx.get(f"{node.url}/livez").status_code == 200
        health = httpx.get(f"{node.url}/health")
        assert health.status_code == 200 and health.json()["status"] == "degraded"  # still serving reads
        metrics = httpx.get(f"{node.url}/metrics", headers=auth(node.token)).text
        assert "\nlcs_disk_full 1.0\n" in metrics and "\nlcs_disk_warning_ratio 0.9\n" in metrics
        refused = httpx.post(
            f"{node.url}/v1/namespaces/orders/shards/0/records",
            headers=auth(node.token),
            json={"records": [{"value_text": "v"}]},
        )
        assert refused.status_code == 507 and refused.json()["code"] == "disk_full"
        assert refused.json()["instance"] == "/v1/namespaces/orders/shards/0/records"
    finally:
        node.stop()


def test_a_failed_shard_makes_the_node_unready_and_names_it_to_token_holders_only(tmp_path: Path) -> None:
    node = start_node(tmp_path / "node", adapter="segment")
    try:
        with NodeClient(node.url, node.token) as client:
            client.create_namespace("orders", 2, NamespacePolicy(retention_ms=None, segment_bytes=1024))
            for i in range(8):
                client.append("orders", 0, [NewRecord(b"v" * 300, key=b"k%d" % i)])
    finally:
        assert node.stop() == 0
    path = node.data_dir / "segments" / "orders" / "0" / f"{0:020d}.log"
    damaged = bytearray(path.read_bytes())
    second_batch = next(iter(scan_batches(bytes(damaged))))[1].length
    damaged[second_batch + 70] ^= 0x01  # one bit inside a sealed segment's second batch
    path.write_bytes(bytes(damaged))

    node = start_node(node.data_dir, adapter="segment")
    try:
        public = httpx.get(f"{node.url}/readyz")
        assert public.status_code == 503
        (reason,) = public.json()["reasons"]
        assert reason["reason"] == "shard_failed" and reason["shards"] == 1 and "failed" not in reason
        assert "orders" not in public.text and str(path) not in public.text  # nothing stored is named publicly
        named = httpx.get(f"{node.url}/readyz", headers=auth(node.token)).json()["reasons"][0]["failed"]
        assert named == [{"namespace": "orders", "shard": 0, "code": "corrupt_segment"}]
        assert httpx.get(f"{node.url}/health").json()["status"] == "degraded"
        metrics = httpx.get(f"{node.url}/metrics", headers=auth(node.token)).text
        assert 'lcs_shard_failed{namespace="orders",shard="0"} 1.0' in metrics
        assert 'lcs_shard_failed{namespace="orders",shard="1"} 0.0' in metrics
        with NodeClient(node.url, node.token) as client, pytest.raises(errors.RemoteError) as failed:
            client.read("orders", 0, 0)
        assert (failed.value.status, failed.value.remote_code) == (500, "corrupt_segment")
    finally:
        node.stop()


@pytest.mark.parametrize(
    "exc",
    [
        errors.InvalidArgumentError("records[3].ttl_ms", "must be positive"),
        errors.PolicyValidationError({"retention_ms": "must be at least 0"}),
        errors.UnknownNamespaceError("orders"),
        errors.UnknownShardError("orders", 7, 2),
        errors.NamespaceExistsError("orders"),
        errors.RecordTooLargeError(2000, 1000),
        errors.OffsetOutOfRangeError("orders", 0, 99, 0, 10),
        errors.DiskFullError(0.96, 0.9),
        errors.UnknownSubscriptionError("orders", "billing"),
        errors.SubscriptionExistsError("orders", "billing"),
        errors.BacklogQuotaExceededError("orders", "size", 10, 20),
        errors.ProducerHeldTooLongError("orders", "time", 10, 20, 3000),
    ],
    ids=lambda e: type(e).__name__,
)
def test_problem_details_come_back_as_the_same_exception(exc: errors.StorageError) -> None:
    body = json.loads(json.dumps(problem_for(exc, "/v1/x")))  # what crosses the wire
    assert {"type", "title", "status", "detail", "code", "instance"} <= set(body)
    again = error_from_body(body["status"], body)
    assert type(again) is type(exc) and str(again) == str(exc)
    legacy = {
        "error": exc.code,
        "message": str(exc),
        **{k: v for k, v in body.items() if k not in problem(400, "x", "")},
    }
    assert type(error_from_body(body["status"], legacy)) is type(exc)  # a node from before problem details


def test_an_unknown_problem_is_a_remote_error_with_its_status() -> None:
    again = error_from_body(412, problem(412, "precondition_failed", "stale", version=3))
    assert isinstance(again, errors.RemoteError) and (again.status, again.remote_code) == (412, "precondition_failed")


def test_help_names_every_option_with_its_environment_variable_and_default() -> None:
    parser = build_parser()
    shown = subprocess.run([str(BIN / "storage-node"), "--help"], capture_output=True, text=True, check=True).stdout
    flat = " ".join(shown.split())
    for action in parser._actions:
        if action.dest in ("help", "version"):
            continue
        assert action.help and "[env " in action.help and "default: " in action.help, action.dest
        env = action.help.split("[env ", 1)[1].split(";")[0].split("=")[0]
        assert f"env {env}" in flat, env
    for env in ("NODE_DATA_DIR", "NODE_HOST", "NODE_PORT", "NODE_TOKEN", "NODE_METRICS_TOKEN", "NODE_INSECURE_NO_AUTH"):
        assert env in flat
    for env in ("NODE_ADAPTER", "NODE_IO_WORKERS", "NODE_DURABILITY", "NODE_DISK_CAPACITY", "LOG_LEVEL", "LOG_FORMAT"):
        assert env in flat


def test_version_prints_the_package_version() -> None:
    node = subprocess.run([str(BIN / "storage-node"), "--version"], capture_output=True, text=True, check=True)
    assert node.stdout.strip() == f"storage-node {package_version()}"
    bench = subprocess.run(
        [str(BIN / "python"), "-m", "storage_engine.bench", "--version"], capture_output=True, text=True, check=True
    )
    assert bench.stdout.strip().endswith(package_version())


def test_a_bad_environment_variable_is_named(tmp_path: Path) -> None:
    env = {"PATH": str(BIN), "NODE_PORT": "seventy", "NODE_TOKEN": "t"}
    result = subprocess.run([str(BIN / "storage-node")], capture_output=True, text=True, env=env)
    assert result.returncode == 2 and "NODE_PORT must be a port number" in result.stderr


def test_log_format_json_makes_every_line_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOG_FORMAT", "json")
    node = start_node(tmp_path / "node", extra=["--log-level", "info"])
    try:
        httpx.get(f"{node.url}/v1/namespaces", headers=auth(node.token))
    finally:
        node.stop(signal.SIGTERM)
    lines = [line for line in node.log().splitlines() if line.strip()]
    assert lines, "the node logged nothing"
    parsed = [json.loads(line) for line in lines]  # every line, uvicorn's included
    assert all({"time", "level", "logger", "message"} <= set(p) for p in parsed)
    assert any(p["logger"] == "storage_node" and p["message"].startswith("serving ") for p in parsed)
    assert any(p["logger"].startswith("uvicorn") for p in parsed)
