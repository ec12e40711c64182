"""Reads of the nodes app (the database only; calling a node is :mod:`backend.apps.nodes.gateway`)."""

from __future__ import annotations

import logging

from django.conf import settings

from backend.apps.nodes.models import StorageNode
from storage_engine.policies.policy import NodePolicy, resolve_policy

log = logging.getLogger(__name__)


def queue_for(node: StorageNode) -> str:
    """Celery tasks for a node go to its own queue, so workers near that node share its load."""
    return f"{settings.CELERY_TASK_DEFAULT_QUEUE}.{node.name}"


NODE_LAYER = "node"  # the name of a node's own layer of policy overrides


def effective_node_policy(node: StorageNode) -> NodePolicy:
    """The node's policy: its own overrides over the built-in defaults (nodes have no cluster layer)."""
    policy, _ = resolve_policy(NodePolicy, [(NODE_LAYER, node.policy_overrides)])
    return policy
