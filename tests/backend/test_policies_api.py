"""Policy inheritance through the API: builtin → cluster → namespace, validation, audit, push."""

from __future__ import annotations

import pytest

from backend.apps.audit.models import AuditEntry
from backend.apps.namespaces.models import Namespace
from backend.apps.namespaces.services import push_pending_namespaces
from storage_engine.node_api.client import NodeClient


@pytest.fixture
def admin(api_as):
    return api_as("admin")


@pytest.fixture
def orders(admin, registered_node):
    assert admin.post("/api/namespaces/", {"name": "orders", "shards": 2}, format="json").status_code == 201
    return "orders"


def node_policy(node, name):
    with NodeClient(node.url, node.token) as client:
        return client.get_namespace(name).policy


def test_every_field_has_value_source_and_presentation(admin, orders):
    fields = admin.get(f"/api/namespaces/{orders}/policy").json()["fields"]
    assert fields["ttl_ms"] == {
        "value": None,
        "source": "builtin",
        "overridden": False,
        "default": None,
        "group": "expiry",
        "unit": "ms",
        "nullable": True,
        "choices": [],
        "help": fields["ttl_ms"]["help"],
    }
    assert fields["cleanup_policy"]["choices"] == ["delete", "compact", "compact,delete"]
    assert {f["group"] for f in fields.values()} == {"expiry", "retention", "compaction", "subscriptions"}
    # A field flows from storage_engine/policies/policy.py alone (the expired-share roll of issue 26).
    roll = fields["segment_expired_roll_ratio"]
    assert (roll["value"], roll["default"], roll["unit"], roll["nullable"], roll["group"]) == (
        0.5,
        0.5,
        "ratio",
        True,
        "expiry",
    )
    assert "expired" in roll["help"]


def test_namespace_override_cluster_default_and_reset(admin, orders, node):
    response = admin.patch(
        "/api/policies/cluster", {"set": {"ttl_ms": 3_600_000, "retention_ms": 86_400_000}}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["fields"]["ttl_ms"]["source"] == "cluster"
    assert push_pending_namespaces() == 1  # the cluster change re-pushes every namespace
    assert node_policy(node, orders).ttl_ms == 3_600_000

    response = admin.patch(f"/api/namespaces/{orders}/policy", {"set": {"ttl_ms": 60_000}}, format="json")
    body = response.json()
    assert body["fields"]["ttl_ms"] == {
        **body["fields"]["ttl_ms"],
        "value": 60_000,
        "source": "namespace",
        "overridden": True,
    }
    assert body["fields"]["retention_ms"]["source"] == "cluster"
    assert body["sync_state"] == "synced"
    assert node_policy(node, orders).ttl_ms == 60_000

    body = admin.patch(f"/api/namespaces/{orders}/policy", {"reset": ["ttl_ms"]}, format="json").json()
    assert body["fields"]["ttl_ms"]["value"] == 3_600_000 and body["fields"]["ttl_ms"]["source"] == "cluster"
    assert node_policy(node, orders).ttl_ms == 3_600_000


def test_null_sets_infinite(admin, orders):
    body = admin.patch(f"/api/namespaces/{orders}/policy", {"set": {"retention_ms": None}}, format="json").json()
    assert body["fields"]["retention_ms"]["value"] is None
    assert body["fields"]["retention_ms"]["source"] == "namespace"


@pytest.mark.parametrize(
    ("change", "field", "rule"),
    [
        (
            {"set": {"min_compaction_lag_ms": 10, "max_compaction_lag_ms": 5}},
            "min_compaction_lag_ms",
            "≤ max_compaction_lag_ms",
        ),
        ({"set": {"retention_ms": 1000, "backlog_quota_seconds": 60}}, "retention_ms", "exceed the backlog quota"),
        ({"set": {"colour": "red"}}, "colour", "unknown field"),
        ({"reset": ["colour"]}, "colour", "unknown field"),
        ({"set": {"ttl_ms": "soon"}}, "ttl_ms", "integer"),
        ({"set": {"ttl_ms": 5}, "reset": ["ttl_ms"]}, "ttl_ms", "set and reset"),
        ({"set": {"segment_expired_roll_ratio": 0}}, "segment_expired_roll_ratio", "> 0"),
    ],
)
def test_invalid_changes_are_400_naming_field_and_rule(admin, orders, change, field, rule):
    before = Namespace.objects.get(name=orders).policy_overrides
    response = admin.patch(f"/api/namespaces/{orders}/policy", change, format="json")
    assert response.status_code == 400
    assert rule in response.json()["errors"][field][0]
    assert Namespace.objects.get(name=orders).policy_overrides == before
    assert not AuditEntry.objects.filter(action="policy.namespace.update").exists()


def test_disk_ratio_ordering_on_node_policy(admin, registered_node):
    response = admin.patch(
        f"/api/nodes/{registered_node.name}/policy", {"set": {"disk_max_used_ratio": 0.9}}, format="json"
    )
    assert response.status_code == 400
    assert "≤ disk_clean_forcibly_ratio" in response.json()["errors"]["disk_max_used_ratio"][0]
    response = admin.patch(
        f"/api/nodes/{registered_node.name}/policy",
        {"set": {"disk_max_used_ratio": 0.7, "delete_when": "03;04"}},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["fields"]["delete_when"] == {
        **response.json()["fields"]["delete_when"],
        "value": "03;04",
        "source": "node",
    }


def test_cluster_change_that_breaks_a_namespace_is_refused(admin, orders):
    admin.patch(f"/api/namespaces/{orders}/policy", {"set": {"backlog_quota_seconds": 3600}}, format="json")
    response = admin.patch("/api/policies/cluster", {"set": {"retention_ms": 60_000}}, format="json")
    assert response.status_code == 400
    assert "would make namespace 'orders' invalid" in response.json()["errors"]["retention_ms"][0]


def test_policy_changes_are_audited_with_a_diff(admin, orders):
    admin.patch(f"/api/namespaces/{orders}/policy", {"set": {"ttl_ms": 60_000}}, format="json")
    admin.patch(f"/api/namespaces/{orders}/policy", {"set": {"ttl_ms": 120_000}, "reset": []}, format="json")
    entries = admin.get("/api/audit/?action=policy.namespace").json()["results"]
    assert [e["diff"] for e in entries] == [
        {"ttl_ms": {"before": 60_000, "after": 120_000}},
        {"ttl_ms": {"before": None, "after": 60_000}},
    ]
    assert entries[0]["actor"] == "user-admin" and entries[0]["target"] == "orders"


@pytest.mark.parametrize(("role", "status"), [(None, 401), ("viewer", 403), ("operator", 403)])
def test_policy_writes_need_admin(api_as, orders, role, status):
    client = api_as(role)
    assert client.patch(f"/api/namespaces/{orders}/policy", {"set": {"ttl_ms": 1}}, format="json").status_code == status
    assert client.patch("/api/policies/cluster", {"set": {"ttl_ms": 1}}, format="json").status_code == status


def test_policy_change_while_the_node_is_down_is_pending_then_pushed(admin, orders, node):
    node.stop()
    body = admin.patch(f"/api/namespaces/{orders}/policy", {"set": {"ttl_ms": 90_000}}, format="json").json()
    assert body["sync_state"] == "pending" and "unavailable" in body["sync_error"]
    assert body["fields"]["ttl_ms"]["value"] == 90_000  # saved even though the node has not taken it
