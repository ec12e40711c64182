"""The node policy survives a SIGKILL of the node: what the node acknowledged
(``PUT /v1/node/policy``) is what it enforces after a restart, with the same version."""

from __future__ import annotations

import signal

import httpx
import pytest

from storage_engine.errors import PolicyValidationError, RemoteError
from storage_engine.node_api.client import NodeClient
from tests.support.processes import NodeProc, start_node

pytestmark = pytest.mark.slow

CHOSEN = {"delete_when": "02;03", "disk_max_used_ratio": 0.6, "disk_clean_forcibly_ratio": 0.7}


def test_the_policy_and_its_version_survive_sigkill(tmp_path) -> None:  # type: ignore[no-untyped-def]
    node = start_node(tmp_path / "node")
    try:
        with NodeClient(node.url, node.token) as client:
            fresh = client.node_policy_state()
            assert fresh.version == 0 and fresh.policy["delete_when"] == "04"
            put = client.put_node_policy(CHOSEN)
            assert put.version == 1 and put.policy["delete_when"] == "02;03"
        node.popen.send_signal(signal.SIGKILL)
        node.popen.wait(10)
        node = start_node(node.data_dir)
        with NodeClient(node.url, node.token) as client:
            after = client.node_policy_state()
        assert after == put  # every field and the version
    finally:
        node.stop()


def test_etag_and_if_match(node: NodeProc) -> None:
    url, auth = f"{node.url}/v1/node/policy", {"Authorization": f"Bearer {node.token}"}
    got = httpx.get(url, headers=auth)
    assert got.headers["ETag"] == '"0"' and got.json()["version"] == 0
    put = httpx.put(url, headers={**auth, "If-Match": '"0"'}, json={"policy": CHOSEN})
    assert put.status_code == 200 and put.headers["ETag"] == '"1"' and put.json()["version"] == 1
    stale = httpx.put(url, headers={**auth, "If-Match": '"0"'}, json={"policy": {"delete_when": "01"}})
    assert stale.status_code == 412 and stale.headers["ETag"] == '"1"'
    assert stale.json()["code"] == "precondition_failed" and stale.json()["version"] == 1
    assert httpx.put(url, headers={**auth, "If-Match": 'W/"1"'}, json={"policy": CHOSEN}).status_code == 412
    assert httpx.put(url, headers={**auth, "If-Match": "*"}, json={"policy": CHOSEN}).json()["version"] == 1
    with NodeClient(node.url, node.token) as client:
        with pytest.raises(RemoteError) as err:
            client.put_node_policy({"delete_when": "01"}, if_version=0)
        assert err.value.status == 412
        with pytest.raises(PolicyValidationError):  # a refused policy is refused before If-Match matters
            client.put_node_policy({"disk_max_used_ratio": 0.95}, if_version=1)
        assert client.put_node_policy({"delete_when": "01"}, if_version=1).version == 2
        assert client.node_policy()["delete_when"] == "01"


def test_disk_status_and_metrics_report_pending_deletes(node: NodeProc) -> None:
    with NodeClient(node.url, node.token) as client:
        disk = client.check_disk()
        assert disk["pending_delete_bytes"] == 0 and disk["source"] in ("filesystem", "quota")
        step = client.lifecycle_step(None, "clean-files", manual=True)
        assert step.pending_delete_bytes == 0
    metrics = httpx.get(f"{node.url}/metrics", headers={"Authorization": f"Bearer {node.token}"}).text
    assert "# HELP lcs_disk_pending_delete_bytes " in metrics
    assert "\nlcs_disk_pending_delete_bytes 0.0\n" in metrics
