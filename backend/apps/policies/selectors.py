"""Reads of policies: effective values with their sources, per field."""

from __future__ import annotations

from typing import Any

from backend.apps.nodes.selectors import NODE_LAYER, effective_node_policy
from backend.apps.policies.models import ClusterPolicy
from storage_engine.policies.policy import (
    FIELDS,
    NamespacePolicy,
    NodePolicy,
    ResolvedField,
    resolve_policy,
)

CLUSTER, NAMESPACE, NODE, BUILTIN = "cluster", "namespace", NODE_LAYER, "builtin"


def cluster_policy() -> ClusterPolicy:
    policy, _ = ClusterPolicy.objects.get_or_create(pk=1)
    return policy


def namespace_layers(namespace_overrides: dict[str, Any], cluster: ClusterPolicy | None = None):
    cluster = cluster or cluster_policy()
    return [(CLUSTER, cluster.overrides), (NAMESPACE, namespace_overrides)]


def effective_namespace_policy(namespace: Any, cluster: ClusterPolicy | None = None) -> NamespacePolicy:
    policy, _ = resolve_policy(NamespacePolicy, namespace_layers(namespace.policy_overrides, cluster))
    return policy


def describe(resolved: dict[str, ResolvedField], own_layer: str, defaults: Any) -> dict[str, dict[str, Any]]:
    """Per field: effective value, its source, whether this layer overrides it, and how to show it."""
    out = {}
    for name, field in resolved.items():
        info = FIELDS[name]
        out[name] = {
            "value": field.value,
            "source": field.source,
            "overridden": field.source == own_layer,
            "default": getattr(defaults, name),
            "group": info.group,
            "unit": info.unit,
            "nullable": info.nullable,
            "choices": list(info.choices),
            "help": info.help,
        }
    return out


def namespace_policy_view(namespace: Any) -> dict[str, dict[str, Any]]:
    _, resolved = resolve_policy(NamespacePolicy, namespace_layers(namespace.policy_overrides))
    return describe(resolved, NAMESPACE, NamespacePolicy())


def cluster_policy_view() -> dict[str, dict[str, Any]]:
    _, resolved = resolve_policy(NamespacePolicy, [(CLUSTER, cluster_policy().overrides)])
    return describe(resolved, CLUSTER, NamespacePolicy())


def node_policy_view(node: Any) -> dict[str, dict[str, Any]]:
    _, resolved = resolve_policy(NodePolicy, [(NODE, node.policy_overrides)])
    return describe(resolved, NODE, NodePolicy())


__all__ = ["effective_node_policy"]  # resolved by the node registry; read here with the other layers
