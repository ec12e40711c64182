from __future__ import annotations

import pytest

from backend.apps.audit.models import AuditEntry
from storage_engine.node_api.client import NodeClient


def test_node_token_is_write_only(api_as):
    admin = api_as("admin")
    response = admin.post(
        "/api/nodes/", {"name": "n2", "url": "http://127.0.0.1:7071", "token": "s3cret"}, format="json"
    )
    assert response.status_code == 201
    assert "token" not in response.json() and response.json()["has_token"] is True
    listed = admin.get("/api/nodes/").json()
    assert "s3cret" not in str(listed)
    assert AuditEntry.objects.get(action="node.create").target == "n2"


def test_node_writes_need_admin(api_as):
    assert api_as("operator").post("/api/nodes/", {"name": "x", "url": "http://h:1"}, format="json").status_code == 403
    assert api_as("viewer").get("/api/nodes/").status_code == 200


def test_deleting_a_namespace_needs_confirmation_and_is_audited(api_as, registered_node, node):
    admin = api_as("admin")
    admin.post("/api/namespaces/", {"name": "doomed", "shards": 1}, format="json")
    response = admin.delete("/api/namespaces/doomed/", {"confirm": "doom"}, format="json")
    assert response.status_code == 400 and "repeat the namespace name" in response.json()["errors"]["confirm"][0]
    assert admin.delete("/api/namespaces/doomed/", {}, format="json").status_code == 400
    assert admin.delete("/api/namespaces/doomed/", {"confirm": "doomed"}, format="json").status_code == 204
    with NodeClient(node.url, node.token) as client:
        assert client.list_namespaces() == []
    entry = AuditEntry.objects.get(action="namespace.delete")
    assert entry.result == "ok" and entry.before["shards"] == 1 and entry.actor_name == "user-admin"


def test_a_node_hosting_namespaces_cannot_be_deleted(api_as, registered_node):
    admin = api_as("admin")
    admin.post("/api/namespaces/", {"name": "kept", "shards": 1}, format="json")
    response = admin.delete(f"/api/nodes/{registered_node.name}/")
    assert response.status_code == 400 and "still hosts namespaces" in response.json()["errors"]["name"][0]


def test_login_failures_are_audited_without_the_password(api_as, db):
    from rest_framework.test import APIClient

    APIClient().post("/api/auth/login", {"username": "mallory", "password": "guess-123"}, format="json")
    entry = AuditEntry.objects.get(action="auth.login_failed")
    assert entry.target == "mallory" and entry.result == "failed"
    assert "guess-123" not in str(entry.__dict__)


@pytest.mark.parametrize("query", ["?action=auth", "?actor=mallory", "?result=failed", "?q=mall"])
def test_audit_filters(api_as, db, query):
    from rest_framework.test import APIClient

    APIClient().post("/api/auth/login", {"username": "mallory", "password": "x"}, format="json")
    viewer = api_as("viewer")
    assert [e["target"] for e in viewer.get(f"/api/audit/{query}").json()["results"]] == ["mallory"]
    assert viewer.get("/api/audit/?action=policy").json()["results"] == []
