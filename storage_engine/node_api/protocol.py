"""The lifecycle vocabulary of the node boundary, defined once.

Every lifecycle operation a node runs is an :class:`Operation`; its
:class:`OperationSpec` says what it acts on, whether it deletes data an
operator must confirm, whether it offers a dry run and which arguments it
takes. A :class:`StepRequest` is one call of one operation, checked when it is
made: the node parses one from a request (:meth:`StepRequest.from_params`), the
client sends one (:meth:`StepRequest.params`), the control plane builds one per
run step. The answer is the engine's :class:`~storage_engine.api.LifecycleResult`
(``disk-check``: :class:`~storage_engine.api.DiskStatus`), parsed back by
:func:`result_from` into the same dataclass.

Who uses it: the node's routes (:mod:`storage_engine.node.lifecycle`),
:meth:`storage_engine.node_api.client.NodeClient.lifecycle_step`, the control plane's
actions (``backend.apps.lifecycle.actions``, which the UI reads through
``GET /api/actions``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from storage_engine.api import DiskStatus, LifecycleResult
from storage_engine.errors import InvalidArgumentError
from storage_engine.rules.validation import flag_value, int_value


class Scope(enum.StrEnum):
    NAMESPACE = "namespace"  # a namespace (optionally one shard)
    NODE = "node"  # the node as a whole
    ANY = "any"  # a namespace, or without one a node-wide sweep of every namespace


class Operation(enum.StrEnum):
    EXPIRE_SCAN = "expire-scan"  # layer 2: the TTL-index scan
    RETENTION = "retention"  # Kafka retention by time and size
    RECLAIM = "reclaim"  # layer 3: drop wholly expired segments, rewrite mostly dead ones
    CLEAN_FILES = "clean-files"  # RocketMQ's file cleaner (manual: the manual delete trigger)
    COMPACT = "compact"  # key compaction
    COMPACT_DIRTIEST = "compact-dirtiest"  # the node's cleaner picks the dirtiest shards
    SUBSCRIPTION_TTL = "subscription-ttl"  # Pulsar's message TTL: cursors move past expired messages
    BACKLOG_QUOTA = "backlog-quota"  # Pulsar's backlog quotas
    DISK_CHECK = "disk-check"  # measure disk use against the watermarks
    OFFLOAD = "offload"  # tiered storage: upload sealed segments, drop local copies past local retention
    RECALL = "recall"  # tiered storage: download local copies of offloaded segments the policy keeps local


ARGUMENTS = ("shard", "limit", "manual", "dry_run")


@dataclass(frozen=True, slots=True)
class OperationSpec:
    """What an operation acts on and takes.

    ``destructive``: it deletes data on an operator's word (a manual run asks the
    operator to confirm by name); ``destructive_if_manual``: only a manual run
    does (the file cleaner's manual trigger deletes expired files at any hour).
    ``dry_run``: it offers a dry run (DESIGN §3 "Dry runs"): every operation that changes
    data does; a dry run answers in one step (``more`` false) with the counts the real
    steps would report in sum.
    """

    scope: Scope
    destructive: bool = False
    destructive_if_manual: bool = False
    dry_run: bool = False
    accepts: frozenset[str] = frozenset()  # of ARGUMENTS; an argument the call would ignore is refused

    def deletes(self, manual: bool) -> bool:
        return self.destructive or (manual and self.destructive_if_manual)


_STEP = frozenset({"shard", "limit", "manual", "dry_run"})
SPECS: dict[Operation, OperationSpec] = {
    Operation.EXPIRE_SCAN: OperationSpec(Scope.ANY, dry_run=True, accepts=_STEP),
    Operation.RETENTION: OperationSpec(
        Scope.ANY, destructive=True, dry_run=True, accepts=frozenset({"shard", "dry_run"})
    ),
    Operation.RECLAIM: OperationSpec(Scope.ANY, dry_run=True, accepts=_STEP),
    Operation.CLEAN_FILES: OperationSpec(
        Scope.NODE, destructive_if_manual=True, dry_run=True, accepts=frozenset({"manual", "dry_run"})
    ),
    Operation.COMPACT: OperationSpec(
        Scope.NAMESPACE, destructive=True, dry_run=True, accepts=frozenset({"shard", "manual", "dry_run"})
    ),
    Operation.COMPACT_DIRTIEST: OperationSpec(
        Scope.NODE, destructive=True, dry_run=True, accepts=frozenset({"limit", "dry_run"})
    ),
    Operation.SUBSCRIPTION_TTL: OperationSpec(Scope.ANY, dry_run=True, accepts=frozenset({"shard", "dry_run"})),
    Operation.BACKLOG_QUOTA: OperationSpec(Scope.NAMESPACE, dry_run=True, accepts=frozenset({"dry_run"})),
    Operation.DISK_CHECK: OperationSpec(Scope.NODE),  # measures; changes no data
    Operation.OFFLOAD: OperationSpec(Scope.ANY, dry_run=True, accepts=frozenset({"shard", "limit", "dry_run"})),
    Operation.RECALL: OperationSpec(Scope.ANY, dry_run=True, accepts=frozenset({"shard", "limit", "dry_run"})),
}


def operation_of(name: object) -> Operation:
    """``name`` as an operation, or an error naming ``operation`` and the choices."""
    if not isinstance(name, str) or name not in {op.value for op in Operation}:
        raise InvalidArgumentError("operation", f"must be one of {', '.join(sorted(Operation))}")
    return Operation(name)


@dataclass(frozen=True, slots=True)
class StepRequest:
    """One bounded step of one operation; invalid combinations are refused when it is made."""

    operation: Operation
    namespace: str | None = None
    shard: int | None = None
    limit: int | None = None
    manual: bool = False
    dry_run: bool = False

    def __post_init__(self) -> None:
        spec = SPECS[self.operation]
        if self.namespace is not None and not isinstance(self.namespace, str):
            raise InvalidArgumentError("namespace", "must be a namespace name (a string)")
        if spec.scope is Scope.NAMESPACE and self.namespace is None:
            raise InvalidArgumentError("namespace", f"is required for {self.operation}")
        if spec.scope is Scope.NODE and self.namespace is not None:
            raise InvalidArgumentError("namespace", f"is not taken by {self.operation}: it acts on the whole node")
        if self.shard is not None and self.namespace is None:
            raise InvalidArgumentError("shard", f"needs a namespace for {self.operation}")
        if self.dry_run and not spec.dry_run:
            offered = ", ".join(sorted(op for op, s in SPECS.items() if s.dry_run))
            raise InvalidArgumentError("dry_run", f"is offered for {offered}, not {self.operation}")
        for name in ARGUMENTS:
            value = getattr(self, name)
            if name not in spec.accepts and value is not None and value is not False:
                raise InvalidArgumentError(name, f"is not taken by {self.operation}")

    @classmethod
    def from_params(cls, operation: object, namespace: str | None, params: Mapping[str, Any]) -> StepRequest:
        """A request from its arguments (``shard``, ``limit``, ``manual``, ``dry_run``), each a
        query's text or a JSON body's value (the node merges both: ``storage_engine.node.params``);
        an absent or ``null`` one takes its default, anything else is refused by name."""
        unknown = sorted(set(params) - set(ARGUMENTS))
        if unknown:
            raise InvalidArgumentError(unknown[0], f"is not a parameter of a lifecycle step ({', '.join(ARGUMENTS)})")
        shard, limit = params.get("shard"), params.get("limit")
        manual, dry_run = params.get("manual"), params.get("dry_run")
        return cls(
            operation_of(operation),
            namespace,
            shard=None if shard is None else int_value(shard, "shard", 0),
            limit=None if limit is None else int_value(limit, "limit", 1),
            manual=manual is not None and flag_value(manual, "manual"),
            dry_run=dry_run is not None and flag_value(dry_run, "dry_run"),
        )

    def params(self) -> dict[str, str | int]:
        """The step's arguments as query parameters (what :meth:`from_params` reads back)."""
        out: dict[str, str | int] = {}
        if self.shard is not None:
            out["shard"] = self.shard
        if self.limit is not None:
            out["limit"] = self.limit
        if self.manual:
            out["manual"] = "true"
        if self.dry_run:
            out["dry_run"] = "true"
        return out

    @property
    def path(self) -> str:
        """The node route of this step."""
        if self.namespace is None:
            return f"/v1/node/lifecycle/{self.operation}"
        return f"/v1/namespaces/{self.namespace}/lifecycle/{self.operation}"


def result_from(operation: Operation, data: Mapping[str, Any]) -> LifecycleResult | DiskStatus:
    """A node's JSON answer to a step, as the dataclass the engine returned (unknown keys are
    ignored, so a newer node's extra figures do not break an older client)."""
    kind: type[LifecycleResult] | type[DiskStatus] = (
        DiskStatus if operation is Operation.DISK_CHECK else LifecycleResult
    )
    names = {f.name for f in fields(kind)}
    return kind(**{k: v for k, v in data.items() if k in names})
