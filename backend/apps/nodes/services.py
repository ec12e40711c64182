"""Writes of the nodes app."""

from __future__ import annotations

from django.conf import settings

from backend.apps.nodes.models import StorageNode

DEFAULT_NODE_NAME = "node-1"


def ensure_default_node() -> StorageNode:
    """The node from ``NODE_URL``/``NODE_TOKEN`` exists and matches the settings."""
    node, _ = StorageNode.objects.update_or_create(
        name=DEFAULT_NODE_NAME, defaults={"url": settings.NODE_URL, "token": settings.NODE_TOKEN}
    )
    return node
