"""Writes of node policies, and the field-change rule every policy write uses. Every change is
validated as the effective policy it produces, saved, audited with its diff, and pushed to the node.
Namespace and cluster policy writes live with the namespaces they change (``namespaces.services``)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from django.db import transaction

from backend.apps.audit import services as audit
from backend.apps.core.signals import schedules_changed
from backend.apps.nodes.services import mark_policy_pending, push_node_policy
from backend.apps.policies.models import ClusterPolicy
from backend.apps.policies.selectors import (
    NODE,
)
from storage_engine.errors import PolicyValidationError
from storage_engine.policies.policy import NodePolicy, resolve_policy


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


def update_node_policy(*, actor: Any, node: Any, set_: dict[str, Any], reset: list[str]) -> Any:
    """Save, audit and push a node's policy; it stays ``pending`` until the node confirms it
    (a node that is down gets it from the reconcile task, see ``backend.apps.nodes.services``)."""
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
        schedules_changed.send(sender=ClusterPolicy, node=node)
    return push_node_policy(node)
