"""The node's lifecycle routes over real HTTP: bounded steps, jobs, verify, disk, node policy."""

from __future__ import annotations

import threading

import httpx
import pytest

from storage_engine.api import NewRecord
from storage_engine.errors import (
    InvalidArgumentError,
    PolicyValidationError,
    UnknownNamespaceError,
)
from storage_engine.node_api.client import NodeClient


@pytest.fixture
def client(node):
    with NodeClient(node.url, node.token) as c:
        yield c


def test_expire_scan_step_removes_expired_records_and_verify_is_clean(client):
    client.create_namespace("ttl", 1)
    client.append("ttl", 0, [NewRecord(value=b"gone", expire_at=1)] * 50 + [NewRecord(value=b"kept")])
    result = client.lifecycle_step("ttl", "expire-scan", shard=0, manual=True)
    assert result.operation and result.expired_records == 50 and result.more is False
    assert [r.value for r in client.read("ttl", 0, 0).records] == [b"kept"]
    report = client.verify("ttl")
    assert report["ok"] is True and report["problem_count"] == 0


def test_steps_are_bounded_by_limit_and_report_more(client):
    client.create_namespace("big", 1)
    client.append("big", 0, [NewRecord(value=b"x", expire_at=1)] * 30)
    first = client.lifecycle_step("big", "expire-scan", shard=0, limit=10, manual=True)
    assert first.expired_records == 10 and first.more is True
    rest = client.lifecycle_step("big", "expire-scan", shard=0, manual=True)
    assert rest.expired_records == 20 and rest.more is False


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/namespaces/big/lifecycle/explode", "operation"),
        ("/v1/namespaces/big/lifecycle/expire-scan?limit=0", "limit"),
        ("/v1/namespaces/big/lifecycle/expire-scan?shard=x", "shard"),
        ("/v1/namespaces/big/lifecycle/expire-scan?manual=maybe", "manual"),
    ],
)
def test_bad_lifecycle_requests_name_the_field(client, path, field):
    client.create_namespace("big", 1)
    response = httpx.post(f"{client.base_url}{path}", headers=client._http.headers)
    assert response.status_code == 400 and response.json()["field"] == field


def test_node_wide_steps_sweep_every_namespace(client):
    for name in ("a", "b", "c"):
        client.create_namespace(name, 2)
        for shard in (0, 1):
            client.append(name, shard, [NewRecord(value=b"gone", expire_at=1)] * 5 + [NewRecord(value=b"kept")])
    first = client.lifecycle_step(None, "expire-scan", limit=20, manual=True)
    assert (first.namespace, first.expired_records, first.more) == (None, 20, True)
    rest = client.lifecycle_step(None, "expire-scan", manual=True)
    assert (rest.expired_records, rest.more) == (10, False)
    for name in ("a", "b", "c"):
        assert [r.value for r in client.read(name, 1, 0).records] == [b"kept"]
    assert client.lifecycle_step(None, "reclaim", manual=True).more is False
    for operation in ("retention", "subscription-ttl"):
        assert client.lifecycle_step(None, operation).more is False
    response = httpx.post(f"{client.base_url}/v1/node/lifecycle/expire-scan?shard=1", headers=client._http.headers)
    assert response.status_code == 400 and response.json()["field"] == "shard"


def test_unknown_namespace_is_404(client):
    with pytest.raises(UnknownNamespaceError):
        client.lifecycle_step("nope", "retention")


def test_disk_and_node_policy(client):
    disk = client.check_disk()
    assert 0 <= disk["used_ratio"] <= 1 and disk["capacity_bytes"] > 0
    assert client.node_policy()["delete_when"] == "04"
    assert client.set_node_policy({"delete_when": "03;04", "disk_max_used_ratio": 0.7})["delete_when"] == "03;04"
    with pytest.raises(PolicyValidationError) as bad:
        client.set_node_policy({"disk_max_used_ratio": 0.95})
    assert "disk_max_used_ratio" in bad.value.errors
    assert client.node_policy()["disk_max_used_ratio"] == 0.7  # a refused policy changes nothing
    step = client.lifecycle_step(None, "clean-files", manual=True)
    assert step.more is False


def test_steps_repeat_until_done(client):
    """What a control-plane task run does: call the bounded step again while it says ``more``."""
    client.create_namespace("steps", 2)
    for shard in (0, 1):
        client.append("steps", shard, [NewRecord(value=b"x", expire_at=1)] * 25)
    results = [client.lifecycle_step("steps", "expire-scan", limit=10, manual=True)]
    while results[-1].more:
        results.append(client.lifecycle_step("steps", "expire-scan", limit=10, manual=True))
    assert sum(r.expired_records for r in results) == 50 and len(results) >= 5
    with pytest.raises(InvalidArgumentError) as no_namespace:
        client.lifecycle_step(None, "compact")  # expire-scan without one is a node-wide sweep; compact is not
    assert no_namespace.value.field == "namespace"


def test_arguments_an_operation_would_ignore_are_refused(client):
    client.create_namespace("args", 1)
    for path, field in (
        ("/v1/namespaces/args/lifecycle/retention?manual=true", "manual"),
        ("/v1/namespaces/args/lifecycle/backlog-quota?shard=0", "shard"),
        ("/v1/node/lifecycle/clean-files?limit=3", "limit"),
        ("/v1/node/lifecycle/disk-check?dry_run=true", "dry_run"),
        ("/v1/namespaces/args/lifecycle/reclaim?sharrd=0", "sharrd"),
        ("/v1/node/lifecycle/explode", "operation"),
    ):
        response = httpx.post(f"{client.base_url}{path}", headers=client._http.headers)
        assert response.status_code == 400 and response.json()["field"] == field, (path, response.text)
    assert httpx.post(f"{client.base_url}/v1/jobs", headers=client._http.headers).status_code == 404


def test_produce_and_fetch_keep_working_while_a_scan_runs(client, node):
    client.create_namespace("busy", 1)
    client.append("busy", 0, [NewRecord(value=b"x", expire_at=1)] * 5000)
    errors: list[Exception] = []
    produced = []

    def produce() -> None:
        with NodeClient(node.url, node.token) as own:
            try:
                for i in range(40):
                    produced.append(own.append("busy", 0, [NewRecord(value=f"live-{i}".encode())]).base_offset)
                    own.read("busy", 0, produced[-1])
            except Exception as exc:  # collected and asserted below
                errors.append(exc)

    producer = threading.Thread(target=produce)
    producer.start()
    expired = 0
    while True:  # the scan runs as bounded steps, as a task run drives it, while the producer writes
        step = client.lifecycle_step("busy", "expire-scan", limit=100, manual=True)
        expired += step.expired_records
        if not step.more:
            break
    producer.join(60)
    assert errors == [] and len(produced) == 40
    assert expired == 5000
    live = client.read("busy", 0, 0, max_records=100).records
    assert [r.value for r in live] == [f"live-{i}".encode() for i in range(40)]
    assert client.verify("busy")["ok"]
