"""A retention run reports freed and pending bytes separately (issue 26): against a real node whose deleted
segment files wait ``file_delete_delay_ms`` as ``.deleted`` files, the run frees nothing yet (``bytes_reclaimed``
0, the summary's ``bytes`` 0) and its summary's ``pending_bytes`` are the dropped files' bytes, as its dry run
said; the node's disk status counts the same bytes pending."""

from __future__ import annotations

from typing import Any

from backend.apps.lifecycle import services
from backend.apps.runs.models import TaskRun
from storage_engine.api import NewRecord
from storage_engine.node_api.client import NodeClient


def run(api: Any, capture: Any, body: dict[str, Any]) -> dict[str, Any]:
    with capture(execute=False):
        response = api.post("/api/namespaces/orders/actions", body, format="json")
    assert response.status_code == 202, response.content
    run_id = response.json()["id"]
    while services.run_step(run_id) is services.StepOutcome.MORE:
        pass
    assert TaskRun.objects.get(pk=run_id).state == "succeeded"
    return api.get(f"/api/runs/{run_id}/").json()


def test_a_retention_run_frees_nothing_while_its_files_wait_and_says_what_is_pending(
    api_as, registered_node, node, django_capture_on_commit_callbacks
):
    admin = api_as("admin")
    assert admin.post("/api/namespaces/", {"name": "orders", "shards": 1}, format="json").status_code == 201
    admin.patch("/api/namespaces/orders/policy", {"set": {"segment_bytes": 1024}}, format="json")
    with NodeClient(node.url, node.token) as client:
        for _ in range(30):
            client.append("orders", 0, [NewRecord(value=b"v" * 300)])
        before = client.list_segments("orders", 0)
        assert client.node_policy()["file_delete_delay_ms"] > 0
    limit = sum(s.size_bytes for s in before) // 2
    admin.patch("/api/namespaces/orders/policy", {"set": {"retention_bytes": limit}}, format="json")

    operator = api_as("operator")
    dry = run(operator, django_capture_on_commit_callbacks, {"action": "retention", "dry_run": True})
    real = run(operator, django_capture_on_commit_callbacks, {"action": "retention", "confirm": "orders"})
    with NodeClient(node.url, node.token) as client:
        after = client.list_segments("orders", 0)
        disk = client.check_disk()
    dropped = sum(s.size_bytes for s in before[: len(before) - len(after)])
    assert dropped > 0
    for shown in (dry, real):
        assert shown["bytes_reclaimed"] == shown["summary"]["bytes"] == 0, shown
        assert shown["summary"]["pending_bytes"] == dropped, shown
        assert shown["summary"]["segments"] == len(before) - len(after)
    assert disk["pending_delete_bytes"] == dropped  # the node's disk counts them: still on disk
