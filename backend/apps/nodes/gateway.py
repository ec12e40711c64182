"""The one way the control plane calls nodes: :func:`client_for` gives the checked client of one node
(URL checked against ``OUTGOING_URL_ALLOW`` before every call, error text of foreign answers withheld),
:func:`describe_node_error` says what went wrong in words safe for anyone; for every node hosting
something (a namespace's shards): each node once, in order, with its client closed afterwards, and
failures handled by one of two named policies.

- :func:`on_each`: all or nothing: the first node that fails raises (the caller's transaction, if any,
  rolls back); errors in ``ignore`` mean the node already is as wanted and count as done.
- :func:`on_each_collect`: best effort: every node is asked; a node's failure is its answer's ``error``
  (a node that is down must not hide the others' answers).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx
from django.conf import settings

from backend.apps.core.outgoing import NODE, OutgoingURLRefused, check_outgoing_url
from backend.apps.nodes.models import StorageNode
from storage_engine.config import ADAPTERS
from storage_engine.errors import NodeUnavailableError, RemoteError, StorageError
from storage_engine.node_api.client import NodeClient

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
            check_outgoing_url(self.base_url, purpose=NODE)
        except OutgoingURLRefused as exc:  # the rule, not the address: the reason is shown to anyone
            raise NodeUnavailableError(self.base_url, f"refused: {exc.rule}") from None
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


# What a node's /health may name when it answers "degraded" (storage_engine.node.probes): only these words
# are repeated, never text from the answer.
DEGRADED_REASONS = {"disk_full", "shard_failed"}


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
        if not isinstance(answer, dict) or answer.get("status") not in ("ok", "degraded"):
            problems.append(f"{node.name}: answered something that is not a node's health")
            continue
        if answer["status"] == "degraded":  # answers, but refuses writes or has stopped shards
            reasons = answer.get("reasons")
            named = {r.get("reason") for r in reasons if isinstance(r, dict)} if isinstance(reasons, list) else set()
            codes = sorted(DEGRADED_REASONS.intersection(named))
            problems.append(f"{node.name}: degraded ({', '.join(codes) or 'reason not given'})")
            continue
        adapter = answer.get("adapter")
        fine.append(f"{node.name} ({adapter if adapter in ADAPTERS else '?'})")  # no text from the answer
    if problems:
        return False, "; ".join(problems)
    return True, "reachable: " + ", ".join(fine)


T = TypeVar("T")
Hosts = Sequence[tuple[StorageNode, list[int]]]  # each node with the shards it hosts
Call = Callable[[NodeClient, list[int]], T]


@dataclass(frozen=True)
class NodeAnswer(Generic[T]):
    node: StorageNode
    shards: list[int]
    value: T | None = None
    error: StorageError | None = None


def on_each(hosts: Hosts, call: Call[T], *, ignore: tuple[type[StorageError], ...] = ()) -> list[T | None]:
    """``call(client, shards)`` on every host; the first failure raises. An ``ignore``d error is ``None``."""
    answers: list[T | None] = []
    for node, shards in hosts:
        with client_for(node) as client:
            try:
                answers.append(call(client, shards))
            except ignore:
                answers.append(None)
    return answers


def on_each_collect(hosts: Hosts, call: Call[T]) -> list[NodeAnswer[T]]:
    """``call(client, shards)`` on every host; a node's ``StorageError`` is its answer's ``error``."""
    answers: list[NodeAnswer[T]] = []
    for node, shards in hosts:
        with client_for(node) as client:
            try:
                answers.append(NodeAnswer(node, shards, value=call(client, shards)))
            except StorageError as exc:
                answers.append(NodeAnswer(node, shards, error=exc))
    return answers
