"""Writes of the namespaces app. A namespace is saved first (with the placement
of each shard on a node), then pushed to every node hosting one of its shards
with its effective policy; if a node cannot take it now, it stays ``pending`` and
:func:`push_pending_namespaces` retries."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from backend.apps.audit import services as audit
from backend.apps.core.signals import schedules_changed
from backend.apps.namespaces import selectors
from backend.apps.namespaces.models import Namespace, ShardPlacement, Subscription, SyncState
from backend.apps.nodes import gateway
from backend.apps.nodes.gateway import client_for
from backend.apps.nodes.models import StorageNode
from backend.apps.nodes.services import ensure_default_node
from backend.apps.policies.models import ClusterPolicy
from backend.apps.policies.selectors import CLUSTER, cluster_policy, effective_namespace_policy, namespace_layers
from backend.apps.policies.services import changed_overrides
from storage_engine.errors import (
    InvalidArgumentError,
    NodeUnavailableError,
    PolicyValidationError,
    StorageError,
    SubscriptionExistsError,
    UnknownNamespaceError,
    UnknownSubscriptionError,
)
from storage_engine.policies.policy import NamespacePolicy, resolve_policy
from storage_engine.rules.validation import validate_namespace_name, validate_shard_count

log = logging.getLogger(__name__)


def resolve_placement(shards: int, node: Any = None, placement: list[str] | None = None) -> list[StorageNode]:
    """The node of each shard: ``placement`` names one node per shard; without it every shard goes to ``node``
    (or the default node)."""
    if placement is None:
        return [node or ensure_default_node()] * shards
    if len(placement) != shards:
        raise InvalidArgumentError("placement", f"must name one node per shard: {shards} names, got {len(placement)}")
    nodes = {n.name: n for n in StorageNode.objects.filter(name__in=set(placement))}
    unknown = sorted(set(placement) - set(nodes))
    if unknown:
        raise InvalidArgumentError("placement", f"unknown nodes: {', '.join(unknown)}")
    return [nodes[name] for name in placement]


def create_namespace(
    *,
    name: str,
    shards: int,
    actor: Any = None,
    policy: dict[str, Any] | None = None,
    node: Any = None,
    placement: list[str] | None = None,
) -> Namespace:
    validate_namespace_name(name)
    validate_shard_count(shards)
    overrides = changed_overrides({}, policy or {}, [], NamespacePolicy)
    resolve_policy(NamespacePolicy, namespace_layers(overrides))
    shard_nodes = resolve_placement(shards, node, placement)
    with transaction.atomic():
        namespace = Namespace.objects.create(
            name=name,
            shards=shards,
            node=shard_nodes[0],
            policy_overrides=overrides,
            created_by=actor if getattr(actor, "is_authenticated", False) else None,
        )
        ShardPlacement.objects.bulk_create(
            ShardPlacement(namespace=namespace, shard=shard, node=shard_node)
            for shard, shard_node in enumerate(shard_nodes)
        )
        audit.record(
            actor=actor,
            action="namespace.create",
            target_type="namespace",
            target=name,
            after={
                "shards": shards,
                "policy": overrides,
                "node": namespace.node.name,
                "placement": [n.name for n in shard_nodes],
            },
        )
        schedules_changed.send(sender=Namespace, namespace=namespace)
    return push_namespace(namespace)


def push_namespace(namespace: Namespace) -> Namespace:
    """Make every node hosting a shard hold the namespace with its effective policy; record the outcome.

    The outcome is the worst of the nodes' answers: failed (a node refused) over
    pending (a node is unreachable, retried later) over synced.
    """
    policy = effective_namespace_policy(namespace)
    state, errors = SyncState.SYNCED, []
    answers = gateway.on_each_collect(
        selectors.hosting_nodes(namespace),
        lambda client, _shards: client.upsert_namespace(namespace.name, namespace.shards, policy),
    )
    for answer in answers:
        if isinstance(answer.error, NodeUnavailableError):
            state = SyncState.FAILED if state == SyncState.FAILED else SyncState.PENDING
        elif answer.error is not None:
            state = SyncState.FAILED
        if answer.error is not None:
            errors.append(f"{answer.node.name}: {answer.error}")
    error = "; ".join(errors)
    Namespace.objects.filter(pk=namespace.pk).update(sync_state=state, sync_error=error)
    namespace.sync_state, namespace.sync_error = state, error
    return namespace


def push_pending_namespaces(limit: int = 100) -> int:
    """Retry up to ``limit`` pending namespaces; return how many are now synced."""
    synced = 0
    for namespace in selectors.namespace_list().filter(sync_state=SyncState.PENDING)[:limit]:
        if push_namespace(namespace).sync_state == SyncState.SYNCED:
            synced += 1
    return synced


def mark_all_pending() -> int:
    """After a cluster policy change every namespace's effective policy may differ: re-push all."""
    return Namespace.objects.update(sync_state=SyncState.PENDING, sync_error="")


def delete_namespace(*, namespace: Namespace, actor: Any) -> None:
    """Destructive: delete the data on every node hosting a shard, then the row; audited either way.

    A node that fails stops the deletion with the row kept, so a retry finishes it
    (nodes already done answer "unknown namespace", which counts as done).
    """
    placed = selectors.hosting_nodes(namespace)
    before = {
        "shards": namespace.shards,
        "policy": namespace.policy_overrides,
        "node": namespace.node.name,
        "placement": [node.name for node in selectors.shard_nodes(namespace).values()],
    }
    for node, _shards in placed:
        with client_for(node) as client:
            try:
                client.delete_namespace(namespace.name)
            except UnknownNamespaceError:
                pass  # never reached the node, or already gone there
            except StorageError as exc:
                audit.record(
                    actor=actor,
                    action="namespace.delete",
                    target_type="namespace",
                    target=namespace.name,
                    before=before,
                    result="failed",
                    detail=f"{node.name}: {exc}",
                )
                raise
    with transaction.atomic():
        audit.record(
            actor=actor, action="namespace.delete", target_type="namespace", target=namespace.name, before=before
        )
        schedules_changed.send(sender=Namespace, namespace=namespace, removed=True)
        namespace.delete()
        for node, _shards in placed:  # their sweeps may slow down, or stop with nothing left to sweep
            schedules_changed.send(sender=Namespace, node=node)


def create_subscription(*, namespace: Namespace, name: str, initial: str, actor: Any) -> Any:
    """Create the cursor on the node, then the row (the node refuses what it cannot hold)."""
    # Created on a node before (a retry): the row below records it.
    gateway.on_each(
        selectors.hosting_nodes(namespace),
        lambda client, _shards: client.create_subscription(namespace.name, name, initial),
        ignore=(SubscriptionExistsError,),
    )
    with transaction.atomic():
        subscription = Subscription.objects.create(
            namespace=namespace,
            name=name,
            initial=initial,
            created_by=actor if getattr(actor, "is_authenticated", False) else None,
        )
        audit.record(
            actor=actor,
            action="subscription.create",
            target_type="subscription",
            target=f"{namespace.name}/{name}",
            after={"initial": initial},
        )
    return subscription


def delete_subscription(*, subscription: Any, actor: Any) -> None:
    """Destructive: the cursor positions are lost. Node first, then the row; audited."""
    namespace = subscription.namespace
    gateway.on_each(
        selectors.hosting_nodes(namespace),
        lambda client, _shards: client.delete_subscription(namespace.name, subscription.name),
        ignore=(UnknownSubscriptionError,),
    )
    with transaction.atomic():
        audit.record(
            actor=actor,
            action="subscription.delete",
            target_type="subscription",
            target=f"{namespace.name}/{subscription.name}",
            before={"initial": subscription.initial},
        )
        subscription.delete()


# -- policy writes: a namespace's own, and the cluster defaults every namespace inherits ---------------------
def update_cluster_policy(*, actor: Any, set_: dict[str, Any], reset: list[str]) -> ClusterPolicy:
    with transaction.atomic():
        cluster = ClusterPolicy.objects.select_for_update().get(pk=cluster_policy().pk)
        before = dict(cluster.overrides)
        after = changed_overrides(before, set_, reset, NamespacePolicy)
        resolve_policy(NamespacePolicy, [(CLUSTER, after)])
        # A cluster default must leave every namespace valid.
        problems: dict[str, str] = {}
        for ns in Namespace.objects.only("name", "policy_overrides").iterator():
            try:
                resolve_policy(NamespacePolicy, [(CLUSTER, after), ("namespace", ns.policy_overrides)])
            except PolicyValidationError as exc:
                for field, rule in exc.errors.items():
                    problems.setdefault(field, f"would make namespace {ns.name!r} invalid: {rule}")
        if problems:
            raise PolicyValidationError(problems)
        cluster.overrides = after
        cluster.updated_by = actor if getattr(actor, "is_authenticated", False) else None
        cluster.save()
        audit.record(
            actor=actor,
            action="policy.cluster.update",
            target_type="cluster_policy",
            target="cluster",
            before=before,
            after=after,
        )
        # Every namespace's effective policy may have changed: the push task re-sends them all.
        mark_all_pending()
        schedules_changed.send(sender=ClusterPolicy, everything=True)
    return cluster


def update_namespace_policy(*, actor: Any, namespace: Any, set_: dict[str, Any], reset: list[str]) -> Any:
    with transaction.atomic():
        locked = Namespace.objects.select_for_update().get(pk=namespace.pk)
        before = dict(locked.policy_overrides)
        after = changed_overrides(before, set_, reset, NamespacePolicy)
        resolve_policy(NamespacePolicy, namespace_layers(after))
        locked.policy_overrides = after
        locked.sync_state = "pending"
        locked.save(update_fields=["policy_overrides", "sync_state", "updated_at"])
        audit.record(
            actor=actor,
            action="policy.namespace.update",
            target_type="namespace",
            target=locked.name,
            before=before,
            after=after,
        )
        schedules_changed.send(sender=Namespace, namespace=locked)
    return push_namespace(locked)


def subscriptions_with_backlog(namespace: Namespace) -> tuple[list[dict], str]:
    """The namespace's subscriptions with their live backlog per shard from the nodes hosting them (a
    read of the nodes, so here rather than in the selectors, which read only the database).

    Each shard's backlog comes from the node it is placed on. When a node cannot
    be reached the subscriptions are still listed, without that node's shards
    (``backlog`` null if none answered), and the reason is returned beside them.
    """
    rows = {
        s.name: {"name": s.name, "initial": s.initial, "created_at": s.created_at, "backlog": None}
        for s in namespace.subscriptions.order_by("name")
    }
    errors = []
    for answer in gateway.on_each_collect(selectors.hosting_nodes(namespace), lambda c, _: c.backlog(namespace.name)):
        if answer.error is not None:
            errors.append(f"{answer.node.name}: {answer.error}")
            continue
        for row in answer.value or []:
            if row["subscription"] in rows and row["shard"] in answer.shards:
                entry = rows[row["subscription"]]
                entry["backlog"] = [*(entry["backlog"] or []), row]
    for entry in rows.values():
        shards_backlog = entry["backlog"] or []
        shards_backlog.sort(key=lambda row: row["shard"])
        # A subscription's backlog is the sum over its shards (DESIGN §3 "Figures"); null when no node answered.
        for figure in ("messages", "live_messages", "bytes"):
            entry[figure] = sum(row[figure] for row in shards_backlog) if entry["backlog"] else None
        # Its age is that of its oldest unacknowledged record, on whichever shard.
        entry["age_ms"] = max(row["age_ms"] for row in shards_backlog) if entry["backlog"] else None
    return list(rows.values()), "; ".join(errors)
