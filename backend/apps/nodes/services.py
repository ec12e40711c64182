"""Writes of the nodes app."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from backend.apps.audit import services as audit
from backend.apps.nodes.models import StorageNode
from storage_engine.errors import PolicyValidationError

DEFAULT_NODE_NAME = "node-1"


def ensure_default_node() -> StorageNode:
    """The node from ``NODE_URL``/``NODE_TOKEN`` exists and matches the settings."""
    node, created = StorageNode.objects.update_or_create(
        name=DEFAULT_NODE_NAME, defaults={"url": settings.NODE_URL, "token": settings.NODE_TOKEN}
    )
    if created:
        _sync_schedules(node)
    return node


def _sync_schedules(node: StorageNode) -> None:
    from backend.apps.lifecycle.services import sync_node_schedules

    sync_node_schedules(node)


def create_node(*, actor: Any, name: str, url: str, token: str = "") -> StorageNode:
    node = StorageNode.objects.create(name=name, url=url, token=token)
    audit.record(actor=actor, action="node.create", target_type="node", target=name, after={"url": url})
    _sync_schedules(node)
    return node


def update_node(*, actor: Any, node: StorageNode, **changes: Any) -> StorageNode:
    before = {"url": node.url, "token": "***" if node.token else ""}
    for field, value in changes.items():
        setattr(node, field, value)
    node.save()
    after = {"url": node.url, "token": "***" if node.token else ""}
    audit.record(actor=actor, action="node.update", target_type="node", target=node.name, before=before, after=after)
    return node


def delete_node(*, actor: Any, node: StorageNode) -> None:
    if node.namespaces.exists() or node.shard_placements.exists():
        raise PolicyValidationError({"name": "the node still hosts namespaces; move or delete them first"})
    audit.record(actor=actor, action="node.delete", target_type="node", target=node.name, before={"url": node.url})
    from django_celery_beat.models import PeriodicTask

    from backend.apps.lifecycle.services import NODE_SCHEDULES, SWEPT_KINDS, schedule_name
    from backend.apps.runs.models import Kind

    names = [schedule_name(kind, node=node) for kind in [*NODE_SCHEDULES, *SWEPT_KINDS, Kind.DISK_CHECK]]
    PeriodicTask.objects.filter(name__in=names).delete()
    node.delete()
