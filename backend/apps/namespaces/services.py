"""Writes of the namespaces app. A namespace is saved first, then pushed to its
node with its effective policy; if the node cannot take it now, it stays
``pending`` and :func:`push_pending_namespaces` retries."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from django.db import transaction

from backend.apps.audit import services as audit
from backend.apps.lifecycle import services as lifecycle
from backend.apps.namespaces.models import Namespace, SyncState
from backend.apps.nodes.selectors import client_for
from backend.apps.nodes.services import ensure_default_node
from backend.apps.policies.selectors import effective_namespace_policy, namespace_layers
from backend.apps.policies.services import changed_overrides
from storage_engine.errors import NamespaceExistsError, NodeUnavailableError, StorageError, UnknownNamespaceError
from storage_engine.policy import NamespacePolicy, resolve_policy
from storage_engine.validation import validate_namespace_name, validate_shard_count

log = logging.getLogger(__name__)


def create_namespace(
    *, name: str, shards: int, actor: Any = None, policy: dict[str, Any] | None = None, node: Any = None
) -> Namespace:
    validate_namespace_name(name)
    validate_shard_count(shards)
    overrides = changed_overrides({}, policy or {}, [], NamespacePolicy)
    resolve_policy(NamespacePolicy, namespace_layers(overrides))
    with transaction.atomic():
        namespace = Namespace.objects.create(
            name=name,
            shards=shards,
            node=node or ensure_default_node(),
            policy_overrides=overrides,
            created_by=actor if getattr(actor, "is_authenticated", False) else None,
        )
        audit.record(
            actor=actor,
            action="namespace.create",
            target_type="namespace",
            target=name,
            after={"shards": shards, "policy": overrides, "node": namespace.node.name},
        )
        lifecycle.sync_namespace_schedules(namespace)
    return push_namespace(namespace)


def push_namespace(namespace: Namespace) -> Namespace:
    """Make the node hold the namespace with its effective policy; record the outcome on the row."""
    policy = effective_namespace_policy(namespace)
    with client_for(namespace.node) as client:
        try:
            try:
                client.create_namespace(namespace.name, namespace.shards, policy)
            except NamespaceExistsError:
                client.update_namespace(namespace.name, policy)
            state, error = SyncState.SYNCED, ""
        except NodeUnavailableError as exc:
            state, error = SyncState.PENDING, str(exc)
        except StorageError as exc:
            state, error = SyncState.FAILED, str(exc)
    Namespace.objects.filter(pk=namespace.pk).update(sync_state=state, sync_error=error)
    namespace.sync_state, namespace.sync_error = state, error
    return namespace


def push_pending_namespaces(limit: int = 100) -> int:
    """Retry up to ``limit`` pending namespaces; return how many are now synced."""
    synced = 0
    for namespace in Namespace.objects.select_related("node").filter(sync_state=SyncState.PENDING)[:limit]:
        if push_namespace(namespace).sync_state == SyncState.SYNCED:
            synced += 1
    return synced


def mark_all_pending() -> int:
    """After a cluster policy change every namespace's effective policy may differ: re-push all."""
    return Namespace.objects.update(sync_state=SyncState.PENDING, sync_error="")


def delete_namespace(*, namespace: Namespace, actor: Any) -> None:
    """Destructive: delete the data on the node, then the row; audited either way."""
    before = {"shards": namespace.shards, "policy": namespace.policy_overrides, "node": namespace.node.name}
    with client_for(namespace.node) as client:
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
                detail=str(exc),
            )
            raise
    with transaction.atomic():
        audit.record(
            actor=actor, action="namespace.delete", target_type="namespace", target=namespace.name, before=before
        )
        lifecycle.remove_namespace_schedules(namespace)
        namespace.delete()


def create_subscription(*, namespace: Namespace, name: str, initial: str, actor: Any) -> Any:
    """Create the cursor on the node, then the row (the node refuses what it cannot hold)."""
    from backend.apps.namespaces.models import Subscription
    from storage_engine.errors import SubscriptionExistsError

    # Created on the node before (a retry): the row below records it.
    with client_for(namespace.node) as client, contextlib.suppress(SubscriptionExistsError):
        client.create_subscription(namespace.name, name, initial)
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
    from storage_engine.errors import UnknownSubscriptionError

    namespace = subscription.namespace
    with client_for(namespace.node) as client, contextlib.suppress(UnknownSubscriptionError):
        client.delete_subscription(namespace.name, subscription.name)
    with transaction.atomic():
        audit.record(
            actor=actor,
            action="subscription.delete",
            target_type="subscription",
            target=f"{namespace.name}/{subscription.name}",
            before={"initial": subscription.initial},
        )
        subscription.delete()
