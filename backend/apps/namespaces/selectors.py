"""Reads of the namespaces app."""

from django.db.models import Prefetch, QuerySet

from backend.apps.namespaces.models import Namespace, ShardPlacement
from backend.apps.nodes.models import StorageNode
from storage_engine.errors import InvalidArgumentError


def namespace_list() -> QuerySet[Namespace]:
    return Namespace.objects.select_related("node").prefetch_related(_PLACEMENTS).order_by("name")


_PLACEMENTS = Prefetch("placements", queryset=ShardPlacement.objects.select_related("node").order_by("shard"))


def shard_nodes(namespace: Namespace) -> dict[int, StorageNode]:
    """Shard → the node hosting it (prefetched rows are used when present).

    A shard without a row (only possible mid-creation) is on the namespace's node.
    """
    placed = {p.shard: p.node for p in namespace.placements.all()}
    return {shard: placed.get(shard, namespace.node) for shard in range(namespace.shards)}


def node_for_shard(namespace: Namespace, shard: int) -> StorageNode:
    if not 0 <= shard < namespace.shards:
        raise InvalidArgumentError("shard", f"must be from 0 to {namespace.shards - 1}")
    return shard_nodes(namespace)[shard]


def hosting_nodes(namespace: Namespace) -> list[tuple[StorageNode, list[int]]]:
    """Each node that hosts a shard of the namespace, with its shards, in shard order."""
    by_node: dict[int, tuple[StorageNode, list[int]]] = {}
    for shard, node in shard_nodes(namespace).items():
        by_node.setdefault(node.pk, (node, []))[1].append(shard)
    return list(by_node.values())


def placement_by_node_name() -> dict[tuple[str, int], str]:
    """(namespace name, shard) → node name for every placed shard (one query)."""
    rows = ShardPlacement.objects.values_list("namespace__name", "shard", "node__name")
    return {(ns, shard): node for ns, shard, node in rows}
