"""The lifecycle actions of the control plane: each run kind, the node operation it drives, and what
an operator is told about it.

Scope on the node, whether it deletes data, whether it offers a dry run and which arguments it takes
come from the operation's spec in :mod:`storage_engine.node_api.protocol` (defined once for the node, the client
and this app); the UI reads this table through ``GET /api/actions`` rather than keeping its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.apps.runs.models import Kind
from storage_engine.node_api.protocol import SPECS, Operation, OperationSpec, Scope, StepRequest


@dataclass(frozen=True)
class Action:
    kind: str
    operation: Operation
    scope: str  # what an operator starts it on: "namespace" or "node"
    label: str
    help: str
    manual: bool = False  # always a manual request on the node (the file cleaner's manual delete trigger)

    @property
    def spec(self) -> OperationSpec:
        return SPECS[self.operation]

    @property
    def destructive(self) -> bool:
        """Deletes data on the operator's word: a manual start asks to confirm by name."""
        return self.spec.deletes(self.manual)

    @property
    def dry_run(self) -> bool:
        return self.spec.dry_run

    @property
    def sweeps(self) -> bool:
        """A namespace action that also runs node-wide, over every namespace in one step."""
        return self.spec.scope is Scope.ANY

    def request(
        self, namespace: str | None, shard: int | None, *, manual: bool = False, dry_run: bool = False
    ) -> StepRequest:
        """One step of this action on a node, with only the arguments its operation takes."""
        accepts = self.spec.accepts
        return StepRequest(
            self.operation,
            namespace,
            shard=shard if "shard" in accepts else None,
            manual=(manual or self.manual) and "manual" in accepts,
            dry_run=dry_run,
        )


_ACTIONS = (
    Action(Kind.EXPIRY_SCAN, Operation.EXPIRE_SCAN, "namespace", "Expiry scan",
           "Remove expired entries from the TTL index now."),
    Action(Kind.RETENTION, Operation.RETENTION, "namespace", "Apply retention",
           "Delete the oldest segments that break the retention time or size. Irreversible."),
    Action(Kind.RECLAIM, Operation.RECLAIM, "namespace", "Reclaim space",
           "Delete fully expired sealed segments and rewrite mostly dead ones."),
    Action(Kind.COMPACTION, Operation.COMPACT, "namespace", "Compact",
           "Keep only the latest record per key (and tombstones within their horizon). Irreversible."),
    Action(Kind.SUBSCRIPTION_TTL, Operation.SUBSCRIPTION_TTL, "namespace", "Message TTL",
           "Move subscription cursors past messages that expired unacknowledged."),
    Action(Kind.BACKLOG_QUOTA, Operation.BACKLOG_QUOTA, "namespace", "Enforce backlog quota",
           "Apply the namespace's backlog quota policy to subscriptions over it."),
    Action(Kind.OFFLOAD, Operation.OFFLOAD, "namespace", "Offload to the object store",
           "Upload sealed segments to the object store (remote storage enabled), then drop local copies past "
           "local retention; reads go on from the store."),
    Action(Kind.RECALL, Operation.RECALL, "namespace", "Recall from the object store",
           "Download segments whose local copy was dropped back to local disk, verified against their manifest, so "
           "reads are local again. Only what the policy keeps local comes back: raise local retention or turn "
           "remote storage off first. Refused when disk use would pass disk_max_used_ratio."),
    Action(Kind.FILE_CLEAN, Operation.CLEAN_FILES, "node", "Clean files",
           "Run the file cleaner now: delete expired segment files if due (delete hours or disk pressure)."),
    Action(Kind.DISK_CHECK, Operation.DISK_CHECK, "node", "Check disk",
           "Measure disk use against the watermarks now."),
    # A manual delete request (RocketMQ's third trigger): expired files go at any hour.
    Action(Kind.FORCE_DELETE, Operation.CLEAN_FILES, "node", "Force delete",
           "Delete every expired segment file now, whatever the hour; above the forcible watermark the oldest "
           "files go even if not expired. Irreversible.", manual=True),
)  # fmt: skip
ACTIONS: dict[str, Action] = {a.kind: a for a in _ACTIONS}


# Why a step did nothing, as the node answers it (``LifecycleResult.skipped``), in an operator's words:
# a run that did nothing says so rather than only showing zeros.
SKIP_REASONS: dict[str, str] = {
    "policy": "the namespace's policy does not call for it",
    "not_due": "not due yet",
    "backoff": "the object store failed recently: the node retries after a backoff",
    "unsupported": "the node's storage adapter does not support it",
}
SKIP_REASONS_BY_KIND: dict[tuple[str, str], str] = {
    (Kind.OFFLOAD, "policy"): "remote storage is not enabled for the namespace",
    (Kind.RECALL, "policy"): (
        "the policy keeps these segments in the object store only: raise local_retention_ms / "
        "local_retention_bytes or turn remote storage off, then recall"
    ),
    (Kind.COMPACTION, "policy"): "the namespace's cleanup_policy does not contain compact",
}


def skip_reason(kind: str, skipped: str) -> str:
    """The operator's sentence for a step of ``kind`` the node skipped for ``skipped``."""
    return SKIP_REASONS_BY_KIND.get((kind, skipped)) or SKIP_REASONS.get(skipped) or skipped


def actions_for(scope: str) -> list[str]:
    """The kinds an operator may start on a namespace or a node (a sweeping kind also node-wide)."""
    return sorted(k for k, a in ACTIONS.items() if a.scope == scope or (scope == "node" and a.sweeps))
