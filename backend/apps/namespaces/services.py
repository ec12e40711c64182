"""Writes of the namespaces app. A namespace is saved first, then pushed to its
node; if the node cannot take it now, it stays ``pending`` and
:func:`push_pending_namespaces` retries."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from backend.apps.namespaces.models import Namespace, SyncState
from backend.apps.nodes.selectors import client_for
from backend.apps.nodes.services import ensure_default_node
from storage_engine.errors import NamespaceExistsError, NodeUnavailableError, StorageError
from storage_engine.validation import validate_namespace_name, validate_shard_count

log = logging.getLogger(__name__)


def create_namespace(*, name: str, shards: int, actor: Any = None) -> Namespace:
    validate_namespace_name(name)
    validate_shard_count(shards)
    with transaction.atomic():
        namespace = Namespace.objects.create(
            name=name, shards=shards, node=ensure_default_node(), created_by=actor if actor and actor.pk else None
        )
    push_namespace(namespace)
    return namespace


def push_namespace(namespace: Namespace) -> Namespace:
    """Make the node hold the namespace; record the outcome on the row."""
    with client_for(namespace.node) as client:
        try:
            client.create_namespace(namespace.name, namespace.shards)
            state, error = SyncState.SYNCED, ""
        except NamespaceExistsError:
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
