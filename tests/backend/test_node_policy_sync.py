"""The control plane tracks whether each node enforces its node policy, as it does for
namespaces: pending until the node confirms with its (persisted) version, re-pushed when
the node reports another version or other values. Real node processes."""

from __future__ import annotations

import shutil

from backend.apps.nodes import services
from backend.apps.nodes.models import StorageNode
from storage_engine.node_api.client import NodeClient
from tests.support.processes import free_port, start_node


def node_state(name: str = "node-1") -> tuple[str, int | None]:
    node = StorageNode.objects.get(name=name)
    return node.policy_sync_state, node.policy_version


def reported(node) -> tuple[int, dict]:  # type: ignore[no-untyped-def]
    with NodeClient(node.url, node.token) as client:
        state = client.node_policy_state()
    return state.version, state.policy


def test_a_node_policy_is_pending_until_the_node_confirms_its_version(api_as, registered_node, node) -> None:
    assert node_state() == ("pending", None)  # never confirmed
    assert services.reconcile_node_policies() == {"synced": 1}
    assert node_state() == ("synced", reported(node)[0]) == ("synced", 1)
    admin = api_as("admin")
    answer = admin.patch("/api/nodes/node-1/policy", {"set": {"delete_when": "03"}}, format="json").json()
    assert (answer["sync_state"], answer["version"], answer["fields"]["delete_when"]["value"]) == ("synced", 2, "03")
    assert reported(node) == (2, {**reported(node)[1], "delete_when": "03"})
    listed = admin.get("/api/nodes/node-1/").json()
    assert (listed["policy_sync_state"], listed["policy_version"]) == ("synced", 2)
    assert listed["policy_synced_at"] and listed["policy_sync_error"] == ""
    assert services.reconcile_node_policies() == {"synced": 1}
    assert reported(node)[0] == 2  # nothing drifted: nothing pushed


def test_an_unreachable_node_stays_pending_and_syncs_when_it_answers(api_as, db, node) -> None:
    admin = api_as("admin")
    dead = f"http://127.0.0.1:{free_port()}"
    admin.post("/api/nodes/", {"name": "n2", "url": dead, "token": node.token}, format="json")
    answer = admin.patch("/api/nodes/n2/policy", {"set": {"delete_when": "05"}}, format="json").json()
    assert answer["sync_state"] == "pending" and answer["version"] is None
    assert "not pushed" in answer["sync_error"]
    assert services.reconcile_node_policies() == {"pending": 1}  # still down
    # A new URL takes the token again (never sent on its own to a new address).
    assert admin.patch("/api/nodes/n2/", {"url": node.url, "token": node.token}, format="json").status_code == 200
    assert services.reconcile_node_policies() == {"synced": 1}
    assert node_state("n2") == ("synced", 1) and reported(node)[1]["delete_when"] == "05"


def test_the_policy_is_pushed_again_when_the_node_reports_another_version(api_as, registered_node, node) -> None:
    admin = api_as("admin")
    admin.patch("/api/nodes/node-1/policy", {"set": {"delete_when": "03"}}, format="json")
    assert node_state() == ("synced", 1)
    with NodeClient(node.url, node.token) as client:  # someone changes the node behind the control plane
        assert client.put_node_policy({"delete_when": "07"}).version == 2
    assert services.reconcile_node_policies() == {"synced": 1}
    assert reported(node)[1]["delete_when"] == "03" and node_state() == ("synced", 3)

    # The node restarts on a wiped data directory: version 0, built-in defaults.
    node.stop()
    shutil.rmtree(node.data_dir)
    fresh = start_node(node.data_dir, token=node.token, port=int(node.url.rsplit(":", 1)[1]))
    try:
        assert reported(fresh) == (0, {**reported(fresh)[1], "delete_when": "04"})
        assert services.reconcile_node_policies() == {"synced": 1}
        assert reported(fresh)[1]["delete_when"] == "03" and node_state() == ("synced", 1)
    finally:
        fresh.stop()
