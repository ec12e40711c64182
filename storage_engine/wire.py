"""JSON shapes exchanged between the node server and its client, and the
mapping between engine errors and HTTP statuses. One module serves both ends so
they cannot drift apart."""

from __future__ import annotations

from typing import Any

from storage_engine import errors
from storage_engine.api import NamespaceInfo
from storage_engine.policy import NamespacePolicy, namespace_policy_from

# error class → HTTP status (the node's contract, see docs/node-api.md)
STATUS_BY_ERROR: dict[type[errors.StorageError], int] = {
    errors.PolicyValidationError: 400,
    errors.InvalidRecordError: 400,
    errors.InvalidArgumentError: 400,
    errors.UnknownNamespaceError: 404,
    errors.UnknownShardError: 404,
    errors.NamespaceExistsError: 409,
    errors.RecordTooLargeError: 413,
    errors.OffsetOutOfRangeError: 416,
    errors.DiskFullError: 507,
    errors.EngineClosedError: 503,
    errors.CorruptSegmentError: 500,
}


def status_for(exc: errors.StorageError) -> int:
    for cls in type(exc).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]  # type: ignore[index]
    return 500


def error_body(exc: errors.StorageError) -> dict[str, Any]:
    """The JSON body of an error: a stable code, a message and the numbers."""
    body: dict[str, Any] = {"error": exc.code, "message": str(exc)}
    for attr in ("field", "rule", "errors", "namespace", "shard", "shards", "offset", "log_start_offset", "end_offset",
                 "size", "limit", "used_ratio", "warning_ratio", "path", "position"):
        if hasattr(exc, attr):
            body[attr] = getattr(exc, attr)
    return body


def error_from_body(status: int, body: dict[str, Any]) -> errors.StorageError:
    """Rebuild the typed engine error a node answered with."""
    code = body.get("error", "")
    message = str(body.get("message", ""))
    try:
        if code == "invalid_policy":
            return errors.PolicyValidationError(dict(body.get("errors", {})))
        if code in ("invalid_argument", "invalid_record"):
            return errors.InvalidArgumentError(str(body.get("field", "")), str(body.get("rule", message)))
        if code == "unknown_namespace":
            return errors.UnknownNamespaceError(body["namespace"])
        if code == "unknown_shard":
            return errors.UnknownShardError(body["namespace"], body["shard"], int(body.get("shards", 0)))
        if code == "namespace_exists":
            return errors.NamespaceExistsError(body["namespace"])
        if code == "record_too_large":
            return errors.RecordTooLargeError(body["size"], body["limit"])
        if code == "offset_out_of_range":
            return errors.OffsetOutOfRangeError(
                body["namespace"], body["shard"], body["offset"], body["log_start_offset"], body["end_offset"]
            )
        if code == "disk_full":
            return errors.DiskFullError(body["used_ratio"], body["warning_ratio"])
    except KeyError:
        pass
    return errors.RemoteError(status, code or "unknown", message)


def namespace_to_json(info: NamespaceInfo) -> dict[str, Any]:
    return {"name": info.name, "shards": info.shards, "policy": info.policy.to_dict(), "created_at": info.created_at}


def namespace_from_json(body: dict[str, Any]) -> NamespaceInfo:
    return NamespaceInfo(
        name=body["name"],
        shards=int(body["shards"]),
        policy=namespace_policy_from(body.get("policy") or {}),
        created_at=int(body["created_at"]),
    )


def policy_from_json(value: Any) -> NamespacePolicy:
    if value is None:
        return NamespacePolicy()
    if not isinstance(value, dict):
        raise errors.InvalidArgumentError("policy", "must be a JSON object of policy fields")
    return namespace_policy_from(value)
