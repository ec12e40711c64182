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


def subscriptions_with_backlog(namespace: Namespace) -> tuple[list[dict], str]:
    """The namespace's subscriptions with their live backlog per shard from the nodes hosting them.

    Each shard's backlog comes from the node it is placed on. When a node cannot
    be reached the subscriptions are still listed, without that node's shards
    (``backlog`` null if none answered), and the reason is returned beside them.
    """
    from backend.apps.nodes.selectors import client_for
    from storage_engine.errors import StorageError

    rows = {
        s.name: {"name": s.name, "initial": s.initial, "created_at": s.created_at, "backlog": None}
        for s in namespace.subscriptions.order_by("name")
    }
    errors = []
    for node, shards in hosting_nodes(namespace):
        with client_for(node) as client:
            try:
                for row in client.backlog(namespace.name):
                    if row["subscription"] in rows and row["shard"] in shards:
                        entry = rows[row["subscription"]]
                        entry["backlog"] = [*(entry["backlog"] or []), row]
            except StorageError as exc:
                errors.append(f"{node.name}: {exc}")
    for entry in rows.values():
        shards_backlog = entry["backlog"] or []
        shards_backlog.sort(key=lambda row: row["shard"])
        # A subscription's backlog is the sum over its shards (DESIGN §3 "Figures"); null when no node answered.
        for figure in ("messages", "live_messages", "bytes"):
            entry[figure] = sum(row[figure] for row in shards_backlog) if entry["backlog"] else None
        # Its age is that of its oldest unacknowledged record, on whichever shard.
        entry["age_ms"] = max(row["age_ms"] for row in shards_backlog) if entry["backlog"] else None
    return list(rows.values()), "; ".join(errors)
