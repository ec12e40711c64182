"""Reads of the nodes app."""

from __future__ import annotations

from django.conf import settings

from backend.apps.nodes.models import StorageNode
from storage_engine.client import NodeClient
from storage_engine.errors import StorageError


def client_for(node: StorageNode) -> NodeClient:
    return NodeClient(node.url, node.token or None, timeout_s=settings.NODE_TIMEOUT_S)


def node_health_summary() -> tuple[bool, str]:
    """Ask every registered node for ``/health``; all must answer."""
    nodes = list(StorageNode.objects.all())
    if not nodes:
        return False, "no storage node registered"
    problems, fine = [], []
    for node in nodes:
        with client_for(node) as client:
            try:
                answer = client.health()
                fine.append(f"{node.name} ({answer.get('adapter', '?')})")
            except StorageError as exc:
                problems.append(f"{node.name}: {exc}")
    if problems:
        return False, "; ".join(problems)
    return True, "reachable: " + ", ".join(fine)
