from __future__ import annotations

import pytest

from backend.apps.namespaces.models import Namespace, SyncState
from backend.apps.namespaces.services import push_pending_namespaces
from backend.apps.nodes.models import StorageNode
from storage_engine.node_api.client import NodeClient
from tests.support.processes import start_node


def node_namespaces(node) -> list[str]:
    with NodeClient(node.url, node.token) as client:
        return [n.name for n in client.list_namespaces()]


def test_admin_creates_a_namespace_that_reaches_the_node(api_as, registered_node, node):
    response = api_as("admin").post("/api/namespaces/", {"name": "orders", "shards": 3}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["name"] == "orders" and body["shards"] == 3 and body["sync_state"] == "synced"
    assert node_namespaces(node) == ["orders"]
    listed = api_as("viewer").get("/api/namespaces/").json()
    assert [n["name"] for n in listed["results"]] == ["orders"]


def test_a_namespace_is_created_with_an_infinite_retention(api_as, registered_node, node):
    """null in a create's policy is an override of no limit, as a policy PATCH sets it."""
    response = api_as("admin").post(
        "/api/namespaces/", {"name": "archive", "policy": {"retention_ms": None, "ttl_ms": 60_000}}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["policy_overrides"] == {"retention_ms": None, "ttl_ms": 60_000}
    with NodeClient(node.url, node.token) as client:
        assert client.get_namespace("archive").policy.retention_ms is None


@pytest.mark.parametrize(("role", "status"), [(None, 401), ("viewer", 403), ("operator", 403)])
def test_creating_needs_the_admin_role(api_as, registered_node, role, status):
    response = api_as(role).post("/api/namespaces/", {"name": "orders", "shards": 1}, format="json")
    assert response.status_code == status
    assert not Namespace.objects.exists()


def test_anonymous_cannot_read_namespaces(api_as):
    assert api_as(None).get("/api/namespaces/").status_code == 401


def test_csrf_is_enforced_for_session_writes(db, api_as, registered_node):
    client = api_as("admin")
    client.credentials()  # drop the CSRF header
    assert client.post("/api/namespaces/", {"name": "a", "shards": 1}, format="json").status_code == 403


@pytest.mark.parametrize(
    ("payload", "field", "words"),
    [
        ({"name": "bad name!", "shards": 1}, "name", "ASCII letters, digits"),
        ({"name": "..", "shards": 1}, "name", "other than"),
        ({"name": "x" * 201, "shards": 1}, "name", "1-200 characters"),
        ({"name": "", "shards": 1}, "name", ""),
        ({"name": "ok", "shards": 0}, "shards", "greater than or equal to 1"),
        ({"name": "ok", "shards": 5000}, "shards", "less than or equal to 1024"),
        ({"name": "ok", "shards": "many"}, "shards", "valid integer"),
    ],
)
def test_bad_input_names_the_field_and_rule(api_as, registered_node, payload, field, words):
    response = api_as("admin").post("/api/namespaces/", payload, format="json")
    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert words in " ".join(response.json()["errors"][field])


def test_duplicate_name_is_rejected(api_as, registered_node):
    client = api_as("admin")
    assert client.post("/api/namespaces/", {"name": "dup", "shards": 1}, format="json").status_code == 201
    response = client.post("/api/namespaces/", {"name": "dup", "shards": 1}, format="json")
    assert response.status_code == 400 and "already exists" in response.json()["errors"]["name"][0]


def test_node_down_saves_pending_then_the_retry_pushes_it(api_as, db, settings, tmp_path):
    from tests.support.processes import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    settings.NODE_URL, settings.NODE_TOKEN = url, "t0ken"
    StorageNode.objects.create(name="node-1", url=url, token="t0ken")
    response = api_as("admin").post("/api/namespaces/", {"name": "later", "shards": 2}, format="json")
    assert response.status_code == 201
    assert response.json()["sync_state"] == "pending"
    assert "unavailable" in Namespace.objects.get(name="later").sync_error

    node = start_node(tmp_path / "late-node", token="t0ken", port=port)
    try:
        assert push_pending_namespaces() == 1
        assert Namespace.objects.get(name="later").sync_state == SyncState.SYNCED
        assert node_namespaces(node) == ["later"]
        assert push_pending_namespaces() == 0  # nothing left to retry
    finally:
        node.stop()


def test_namespace_list_paginates_by_cursor(api_as, db):
    node = StorageNode.objects.create(name="n", url="http://127.0.0.1:9", token="")
    Namespace.objects.bulk_create(Namespace(name=f"ns-{i:03d}", shards=1, node=node) for i in range(7))
    client = api_as("viewer")
    page = client.get("/api/namespaces/?page_size=3").json()
    names = [n["name"] for n in page["results"]]
    while page["next"]:
        page = client.get(page["next"]).json()
        names += [n["name"] for n in page["results"]]
    assert names == [f"ns-{i:03d}" for i in range(7)]
