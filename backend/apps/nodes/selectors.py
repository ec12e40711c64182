"""Reads of the nodes app, and the one way the control plane calls a node (:func:`client_for`)."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
from django.conf import settings

from backend.apps.core.outgoing import OutgoingURLRefused, check_outgoing_url
from backend.apps.nodes.models import StorageNode
from storage_engine.client import NodeClient
from storage_engine.config import ADAPTERS
from storage_engine.errors import NodeUnavailableError, RemoteError, StorageError
from storage_engine.policy import NodePolicy, resolve_policy

log = logging.getLogger(__name__)

WITHHELD = "the answer is no storage node error (its text is withheld)"


class CheckedNodeClient(NodeClient):
    """A node client that checks the node's URL against ``OUTGOING_URL_ALLOW`` before every call.

    A node whose URL or token cannot be used at all (an address httpx refuses, a token that is not ASCII)
    still gets a client: every call fails with :class:`NodeUnavailableError`, like an unreachable node,
    so one bad node row never breaks a loop over nodes. An error answer that is not a node's typed error
    (a proxy page, another service) keeps its status but not its text.
    """

    def __init__(self, url: str, token: str | None, timeout_s: float) -> None:
        self._problem = ""
        try:
            super().__init__(url, token, timeout_s=timeout_s)
        except (ValueError, httpx.InvalidURL) as exc:  # UnicodeEncodeError is a ValueError
            self._problem = f"its URL or token cannot be used ({type(exc).__name__})"
            super().__init__("http://invalid.", None, timeout_s=timeout_s)
            self.base_url = url.rstrip("/")

    def _call(self, method: str, path: str, *, idempotent: bool, **kwargs: Any) -> httpx.Response:
        if self._problem:
            raise NodeUnavailableError(self.base_url, self._problem)
        try:
            check_outgoing_url(self.base_url)
        except OutgoingURLRefused as exc:
            raise NodeUnavailableError(self.base_url, f"refused: {exc}") from None
        try:
            return super()._call(method, path, idempotent=idempotent, **kwargs)
        except RemoteError as exc:
            if exc.remote_code != "unknown":
                raise
            raise RemoteError(exc.status, "unknown", WITHHELD) from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:  # not a transport error: e.g. a URL httpx refuses
            raise NodeUnavailableError(self.base_url, type(exc).__name__) from None


def client_for(node: StorageNode) -> NodeClient:
    return CheckedNodeClient(node.url, node.token or None, timeout_s=settings.NODE_TIMEOUT_S)


def describe_node_error(exc: BaseException) -> str:
    """What went wrong with a node, in words safe for anyone: never the text the node (or whatever answers
    at its URL) sent, nor its URL."""
    if isinstance(exc, NodeUnavailableError):
        return "unavailable" + (f": {exc.reason}" if exc.reason.startswith(("refused", "its URL")) else "")
    if isinstance(exc, RemoteError):
        return f"answered HTTP {exc.status}"
    if isinstance(exc, StorageError):
        return f"answered an error ({exc.code})"
    if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
        return "answered something that is not JSON"
    return f"answered something unexpected ({type(exc).__name__})"


def node_health_summary() -> tuple[bool, str]:
    """Ask every registered node for ``/health``; all must answer. Each node is asked on its own: one that
    is down, misconfigured or answers nonsense is named, the others are still checked."""
    nodes = list(StorageNode.objects.all())
    if not nodes:
        return False, "no storage node registered"
    problems, fine = [], []
    for node in nodes:
        try:
            with client_for(node) as client:
                answer = client.health()
        except Exception as exc:  # any failure is this node's, never the endpoint's
            log.info("health: node %s: %r", node.name, exc)
            problems.append(f"{node.name}: {describe_node_error(exc)}")
            continue
        if not isinstance(answer, dict) or answer.get("status") != "ok":
            problems.append(f"{node.name}: answered something that is not a node's health")
            continue
        adapter = answer.get("adapter")
        fine.append(f"{node.name} ({adapter if adapter in ADAPTERS else '?'})")  # no text from the answer
    if problems:
        return False, "; ".join(problems)
    return True, "reachable: " + ", ".join(fine)


def queue_for(node: StorageNode) -> str:
    """Celery tasks for a node go to its own queue, so workers near that node share its load."""
    return f"{settings.CELERY_TASK_DEFAULT_QUEUE}.{node.name}"


NODE_LAYER = "node"  # the name of a node's own layer of policy overrides


def effective_node_policy(node: StorageNode) -> NodePolicy:
    """The node's policy: its own overrides over the built-in defaults (nodes have no cluster layer)."""
    policy, _ = resolve_policy(NodePolicy, [(NODE_LAYER, node.policy_overrides)])
    return policy
