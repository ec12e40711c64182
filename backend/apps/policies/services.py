"""Writes of policies. Every change is validated as the effective policy it
produces, saved, audited with its diff, and pushed to the nodes."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from django.db import transaction

from backend.apps.audit import services as audit
from backend.apps.policies.models import ClusterPolicy
from backend.apps.policies.selectors import (
    CLUSTER,
    NODE,
    cluster_policy,
    effective_namespace_policy,
    namespace_layers,
)
from storage_engine.errors import PolicyValidationError
from storage_engine.policy import NamespacePolicy, NodePolicy, resolve_policy


def changed_overrides(
    current: dict[str, Any], set_: dict[str, Any], reset: list[str], policy_cls: type
) -> dict[str, Any]:
    """``current`` with ``set_`` applied and the ``reset`` fields removed (they inherit again)."""
    known = {f.name for f in fields(policy_cls)}
    unknown = sorted((set(set_) | set(reset)) - known)
    if unknown:
        raise PolicyValidationError({name: "unknown field" for name in unknown})
    both = sorted(set(set_) & set(reset))
    if both:
        raise PolicyValidationError({name: "cannot be set and reset at once" for name in both})
    result = {k: v for k, v in current.items() if k not in reset}
    result.update(set_)
    return result


def update_cluster_policy(*, actor: Any, set_: dict[str, Any], reset: list[str]) -> ClusterPolicy:
    from backend.apps.lifecycle import services as lifecycle
    from backend.apps.namespaces.models import Namespace
    from backend.apps.namespaces.services import mark_all_pending

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
        lifecycle.sync_all_schedules()
    return cluster


def update_namespace_policy(*, actor: Any, namespace: Any, set_: dict[str, Any], reset: list[str]) -> Any:
    from backend.apps.lifecycle import services as lifecycle
    from backend.apps.namespaces.models import Namespace
    from backend.apps.namespaces.services import push_namespace

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
        lifecycle.sync_namespace_schedules(locked)
    return push_namespace(locked)


def update_node_policy(*, actor: Any, node: Any, set_: dict[str, Any], reset: list[str]) -> Any:
    """Save, audit and push a node's policy; it stays ``pending`` until the node confirms it
    (a node that is down gets it from the reconcile task, see ``backend.apps.nodes.services``)."""
    from backend.apps.lifecycle import services as lifecycle
    from backend.apps.nodes.services import mark_policy_pending, push_node_policy

    with transaction.atomic():
        before = dict(node.policy_overrides)
        after = changed_overrides(before, set_, reset, NodePolicy)
        resolve_policy(NodePolicy, [(NODE, after)])
        node.policy_overrides = after
        node.save(update_fields=["policy_overrides"])
        mark_policy_pending(node)
        audit.record(
            actor=actor, action="policy.node.update", target_type="node", target=node.name, before=before, after=after
        )
        lifecycle.sync_node_schedules(node)
    return push_node_policy(node)


__all__ = ["effective_namespace_policy", "update_cluster_policy", "update_namespace_policy", "update_node_policy"]
