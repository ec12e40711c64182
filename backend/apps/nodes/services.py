"""Writes of the nodes app, and the sync of each node's node policy.

The control plane holds the intent (``policy_overrides`` over the built-in
defaults); the node persists what it enforces with a version. A node's
``policy_sync_state`` is ``pending`` from a change until the node answers a
push with exactly the effective values, then ``synced`` with the version the
node confirmed (``policy_version``); ``failed`` when the node refused it.
:func:`reconcile_node_policies` (a periodic task) pushes pending nodes again
and compares synced ones with what they report: another version or other
values (a node restarted on a wiped data directory answers version 0 and its
defaults; a direct ``PUT`` to the node bumps the version) make it pending and
pushed again.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.utils import timezone

from backend.apps.audit import services as audit
from backend.apps.core.models import SyncState
from backend.apps.core.services import upsert_interval_task
from backend.apps.core.signals import schedules_changed
from backend.apps.nodes.gateway import client_for
from backend.apps.nodes.models import StorageNode
from backend.apps.nodes.selectors import effective_node_policy
from storage_engine.errors import InvalidArgumentError, NodeUnavailableError, PolicyValidationError, StorageError
from storage_engine.node_api.client import NodePolicyState

log = logging.getLogger(__name__)

DEFAULT_NODE_NAME = "node-1"
RECONCILE_SCHEDULE = "platform: reconcile node policies"
RECONCILE_INTERVAL_S = 30
TOKEN_REQUIRED = "re-enter the node's token to change its URL: the stored token is never sent to a new address"


def given_token(value: str | None) -> str | None:
    """The token as given, or None when none was: an empty or whitespace-only token is a missing token, so
    it never clears a stored token nor stands for the token a new URL needs."""
    return value if value is not None and value.strip() else None


def ensure_default_node() -> StorageNode:
    """The default node, created from ``NODE_URL``/``NODE_TOKEN`` when it is missing.

    Only created, never updated: once it exists, the console (Nodes, the admin) owns its URL and token,
    and an edit there must not be undone by the next namespace created or the next start.
    """
    node, created = StorageNode.objects.get_or_create(
        name=DEFAULT_NODE_NAME, defaults={"url": settings.NODE_URL, "token": settings.NODE_TOKEN}
    )
    if created:
        _sync_schedules(node)
    return node


def _sync_schedules(node: StorageNode) -> None:
    schedules_changed.send(sender=StorageNode, node=node)


def create_node(*, actor: Any, name: str, url: str, token: str | None = None) -> StorageNode:
    node = StorageNode.objects.create(name=name, url=url, token=given_token(token) or "")
    audit.record(actor=actor, action="node.create", target_type="node", target=name, after={"url": url})
    _sync_schedules(node)
    return node


def update_node(*, actor: Any, node: StorageNode, **changes: Any) -> StorageNode:
    """Change a node; a new URL needs the token given again (``token`` in ``changes``), else the stored
    token would go to whatever answers at the new address. An empty token is no token (:func:`given_token`)."""
    if given_token(changes.get("token")) is None:
        changes.pop("token", None)
    if "url" in changes and changes["url"] != node.url and "token" not in changes:
        raise InvalidArgumentError("token", TOKEN_REQUIRED)
    before = {"url": node.url, "token": "***" if node.token else ""}
    for field, value in changes.items():
        setattr(node, field, value)
    node.save()
    if node.url != before["url"]:  # maybe another process: what it enforces is unknown until it confirms
        mark_policy_pending(node, "the node's URL changed")
    after = {"url": node.url, "token": "***" if node.token else ""}
    if "token" in changes:
        after["token_replaced"] = True
    audit.record(actor=actor, action="node.update", target_type="node", target=node.name, before=before, after=after)
    return node


def record_node_health(node: StorageNode, error: str = "") -> None:
    """What the last look at the node found (the metrics collector's): healthy, or the error, in words
    from :func:`~backend.apps.nodes.gateway.describe_node_error` (never the node's own text)."""
    changes: dict[str, Any] = {"healthy": not error, "last_error": error[:2000]}
    if not error:
        changes["last_seen_at"] = timezone.now()
    StorageNode.objects.filter(pk=node.pk).update(**changes)


def delete_node(*, actor: Any, node: StorageNode) -> None:
    if node.namespaces.exists() or node.shard_placements.exists():
        raise PolicyValidationError({"name": "the node still hosts namespaces; move or delete them first"})
    audit.record(actor=actor, action="node.delete", target_type="node", target=node.name, before={"url": node.url})
    schedules_changed.send(sender=StorageNode, node=node, removed=True)
    node.delete()


# -- node policy sync ---------------------------------------------------------------------
def _record_policy_sync(node: StorageNode, state: str, error: str = "", version: int | None = None) -> StorageNode:
    changes: dict[str, Any] = {"policy_sync_state": state, "policy_sync_error": error}
    if state == SyncState.SYNCED:
        changes.update(policy_version=version, policy_synced_at=timezone.now())
    StorageNode.objects.filter(pk=node.pk).update(**changes)
    for field, value in changes.items():
        setattr(node, field, value)
    return node


def mark_policy_pending(node: StorageNode, reason: str = "") -> StorageNode:
    """The node's effective policy changed (or the node drifted): not synced until it confirms."""
    return _record_policy_sync(node, SyncState.PENDING, reason)


def _differences(wanted: dict[str, Any], answered: dict[str, Any]) -> list[str]:
    return sorted(k for k in wanted.keys() | answered.keys() if wanted.get(k) != answered.get(k))


def push_node_policy(node: StorageNode) -> StorageNode:
    """Hand the node its effective policy and record its answer.

    ``synced`` with the node's version when it answers the same values; ``pending``
    when it cannot be reached (the reconcile task retries); ``failed`` when it refuses
    the policy or answers other values (``policy_sync_error`` says which).
    """
    wanted = effective_node_policy(node).to_dict()
    with client_for(node) as client:
        try:
            answer = client.put_node_policy(wanted)
        except NodeUnavailableError as exc:
            return _record_policy_sync(node, SyncState.PENDING, f"node policy not pushed: {exc}")
        except StorageError as exc:
            return _record_policy_sync(node, SyncState.FAILED, f"node refused the node policy: {exc}")
    differences = _differences(wanted, answer.policy)
    if differences:
        return _record_policy_sync(
            node, SyncState.FAILED, f"node enforces other values than pushed: {', '.join(differences)}"
        )
    return _record_policy_sync(node, SyncState.SYNCED, version=answer.version)


def policy_drift(node: StorageNode, reported: NodePolicyState) -> str | None:
    """Why a synced node's reported policy is not the one it confirmed (``None``: it is)."""
    if reported.version != node.policy_version:
        return f"node reports node policy version {reported.version}, it confirmed {node.policy_version}"
    differences = _differences(effective_node_policy(node).to_dict(), reported.policy)
    if differences:
        return f"node enforces other values: {', '.join(differences)}"
    return None


def reconcile_node_policy(node: StorageNode) -> StorageNode:
    """Push a pending node's policy; check a synced one against what it reports now.

    A failed node is left alone (pushing again would be refused again) until its policy
    changes; a node that cannot be reached keeps its state and is looked at next time.
    """
    if node.policy_sync_state == SyncState.PENDING:
        return push_node_policy(node)
    if node.policy_sync_state != SyncState.SYNCED:
        return node
    with client_for(node) as client:
        try:
            reported = client.node_policy_state()
        except StorageError as exc:
            log.info("node policy of %s not checked: %s", node.name, exc)
            return node
    drift = policy_drift(node, reported)
    if drift is None:
        return node
    log.warning("node %s: %s; pushing its node policy again", node.name, drift)
    mark_policy_pending(node, drift)
    return push_node_policy(node)


def reconcile_node_policies() -> dict[str, int]:
    """Reconcile every node's policy; how many are in each state afterwards."""
    states: dict[str, int] = {}
    for node in StorageNode.objects.order_by("name"):
        state = reconcile_node_policy(node).policy_sync_state
        states[state] = states.get(state, 0) + 1
    return states


def ensure_node_schedules(**_: Any) -> None:
    """Idempotent: the periodic reconcile of node policies exists (runs after every migrate)."""
    upsert_interval_task(RECONCILE_SCHEDULE, "backend.apps.nodes.tasks.reconcile_node_policies", RECONCILE_INTERVAL_S)
