"""Reads of the lifecycle app (the database only)."""

from __future__ import annotations

from django.db.models import QuerySet

from backend.apps.lifecycle.models import Schedule
from backend.apps.namespaces.models import Namespace
from backend.apps.nodes.models import StorageNode


def schedules_of(*, namespace: Namespace | None = None, node: StorageNode | None = None) -> QuerySet[Schedule]:
    """The schedules of a namespace or of a node, by kind."""
    target = {"namespace": namespace} if namespace is not None else {"node": node}
    return Schedule.objects.filter(**target).order_by("kind")


def scheduled_kinds_of_node(node: StorageNode) -> set[str]:
    """The kinds the node has a schedule of (its sweeps follow what the namespaces it hosts call for)."""
    return set(Schedule.objects.filter(node=node).values_list("kind", flat=True))
