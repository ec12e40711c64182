"""The one way the control plane calls every node hosting something (a namespace's shards): each node
once, in order, with its client closed afterwards, and failures handled by one of two named policies.

- :func:`on_each`: all or nothing: the first node that fails raises (the caller's transaction, if any,
  rolls back); errors in ``ignore`` mean the node already is as wanted and count as done.
- :func:`on_each_collect`: best effort: every node is asked; a node's failure is its answer's ``error``
  (a node that is down must not hide the others' answers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from backend.apps.nodes.models import StorageNode
from backend.apps.nodes.selectors import client_for
from storage_engine.client import NodeClient
from storage_engine.errors import StorageError

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
