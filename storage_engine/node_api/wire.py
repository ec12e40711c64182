"""JSON shapes exchanged between the node server and its client, and the
mapping between engine errors and HTTP statuses. One module serves both ends so
they cannot drift apart."""

from __future__ import annotations

import base64
import binascii
import dataclasses
from typing import Any

from storage_engine import errors
from storage_engine.api import (
    NamespaceInfo,
    NewRecord,
    ReadResult,
    Record,
    SegmentInfo,
    SegmentState,
    SegmentTier,
    ShardStats,
)
from storage_engine.node_api import problem
from storage_engine.policies.bounds import MAX_TTL_MS, int_ok, int_rule
from storage_engine.policies.policy import NamespacePolicy, namespace_policy_from

# error class → HTTP status (the node's contract, see docs/node-api.md)
STATUS_BY_ERROR: dict[type[errors.StorageError], int] = {
    errors.PolicyValidationError: 400,
    errors.InvalidRecordError: 400,
    errors.InvalidArgumentError: 400,
    errors.UnknownNamespaceError: 404,
    errors.UnknownShardError: 404,
    errors.NamespaceExistsError: 409,
    errors.AlreadyRunningError: 409,
    errors.UnknownSubscriptionError: 404,
    errors.SubscriptionExistsError: 409,
    errors.BacklogQuotaExceededError: 429,
    errors.RecordTooLargeError: 413,
    errors.OffsetOutOfRangeError: 416,
    errors.DiskFullError: 507,
    errors.EngineClosedError: 503,
    errors.CorruptSegmentError: 500,
}
# codes of errors defined outside :mod:`storage_engine.errors` (the object-store tier's, in
# :mod:`storage_engine.tier`) → HTTP status
STATUS_BY_CODE: dict[str, int] = {
    "tier_unavailable": 503,  # the object store cannot be reached or refused: try again later
    "tier_verify_failed": 502,  # the object store gave back something else than was sent
    "tier_object_missing": 500,  # the catalog names an object the store does not have
    "tier_manifest_invalid": 500,  # a manifest in the store cannot be read
    "recall_disk_limit": 507,  # a recall would bring disk use above a watermark (storage_engine.tier.recall)
}


def status_for(exc: errors.StorageError) -> int:
    for cls in type(exc).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return STATUS_BY_CODE.get(exc.code, 500)


def error_body(exc: errors.StorageError) -> dict[str, Any]:
    """The JSON body of an error: a stable code, a message and the numbers."""
    body: dict[str, Any] = {"error": exc.code, "message": str(exc)}
    for attr in (
        "field",
        "rule",
        "errors",
        "namespace",
        "shard",
        "shards",
        "offset",
        "log_start_offset",
        "end_offset",
        "size",
        "limit",
        "used_ratio",
        "warning_ratio",
        "path",
        "position",
        "job_id",
        "name",
        "kind",
        "current",
        "waited_ms",
        "key",
        "operation",
    ):
        if hasattr(exc, attr):
            body[attr] = getattr(exc, attr)
    return body


def problem_for(exc: errors.StorageError, instance: str | None = None) -> dict[str, Any]:
    """The error as RFC 9457 problem details (:mod:`storage_engine.node_api.problem`): the node's error body.
    The fields of :func:`error_body` but its code and message are the extension members."""
    extensions = {k: v for k, v in error_body(exc).items() if k not in ("error", "message")}
    return problem.problem(status_for(exc), exc.code, str(exc), instance=instance, **extensions)


def error_from_body(status: int, body: dict[str, Any]) -> errors.StorageError:
    """Rebuild the typed engine error a node answered with: problem details (``code``, ``detail``),
    or the shape nodes answered before them (``error``, ``message``)."""
    code = body.get("code") or problem.code_of_type(str(body.get("type", ""))) or body.get("error") or ""
    code = code if isinstance(code, str) else ""
    message = str(body.get("detail", body.get("message", "")))
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
        if code == "already_running":
            return errors.AlreadyRunningError(message.removesuffix(" is already running"))
        if code == "unknown_subscription":
            return errors.UnknownSubscriptionError(body["namespace"], body["name"])
        if code == "subscription_exists":
            return errors.SubscriptionExistsError(body["namespace"], body["name"])
        if code == "producer_held":
            return errors.ProducerHeldTooLongError(
                body["namespace"], body["kind"], body["limit"], body["current"], body["waited_ms"]
            )
        if code == "backlog_quota_exceeded":
            return errors.BacklogQuotaExceededError(body["namespace"], body["kind"], body["limit"], body["current"])
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


# -- records -----------------------------------------------------------------------
def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _bytes_field(body: dict[str, Any], name: str, index: int) -> bytes | None:
    """``name`` (base64) or ``name_text`` (UTF-8); absent or null means None."""
    text = body.get(f"{name}_text")
    raw = body.get(name)
    if text is not None and raw is not None:
        raise errors.InvalidRecordError(name, f"give {name} (base64) or {name}_text, not both", index)
    if text is not None:
        if not isinstance(text, str):
            raise errors.InvalidRecordError(f"{name}_text", "must be a string", index)
        return text.encode()
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise errors.InvalidRecordError(name, "must be a base64 string or null", index)
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise errors.InvalidRecordError(name, "must be valid base64", index) from exc


RECORD_FIELDS = {"key", "key_text", "value", "value_text", "timestamp", "tags", "headers", "expire_at", "ttl_ms"}


def new_record_from_json(body: Any, index: int, now_ms: int) -> NewRecord:
    """Parse one produced record; ``ttl_ms`` is shorthand for ``expire_at = now + ttl_ms``.

    This is the one place a relative TTL becomes a deadline, with ``now_ms`` from the node's clock:
    a client (the control plane's produce included) sends ``ttl_ms`` as it was given
    (:func:`new_record_to_json`), never a deadline computed on its own clock."""
    if not isinstance(body, dict):
        raise errors.InvalidRecordError("record", "must be a JSON object", index)
    unknown = sorted(set(body) - RECORD_FIELDS)
    if unknown:
        raise errors.InvalidRecordError(unknown[0], "unknown field", index)
    tags = body.get("tags") or []
    if not isinstance(tags, list):
        raise errors.InvalidRecordError("tags", "must be a list of strings", index)
    headers_in = body.get("headers") or {}
    if not isinstance(headers_in, dict) or not all(isinstance(v, str) for v in headers_in.values()):
        raise errors.InvalidRecordError("headers", "must be an object of name → base64 string", index)
    try:
        headers = tuple((k, base64.b64decode(v, validate=True)) for k, v in headers_in.items())
    except (binascii.Error, ValueError) as exc:
        raise errors.InvalidRecordError("headers", "values must be valid base64", index) from exc
    expire_at = body.get("expire_at")
    ttl_ms = body.get("ttl_ms")
    if ttl_ms is not None:
        if expire_at is not None:
            raise errors.InvalidRecordError("ttl_ms", "give expire_at or ttl_ms, not both", index)
        if not int_ok(ttl_ms, 1, MAX_TTL_MS):
            raise errors.InvalidRecordError("ttl_ms", int_rule(1, MAX_TTL_MS, "ttl_ms"), index)
        expire_at = now_ms + ttl_ms
    return NewRecord(
        value=_bytes_field(body, "value", index),
        key=_bytes_field(body, "key", index),
        timestamp=body.get("timestamp"),
        tags=tuple(tags),
        headers=headers,
        expire_at=expire_at,
    )


def new_record_to_json(record: NewRecord, ttl_ms: int | None = None) -> dict[str, Any]:
    """A record to produce as the node reads it (:func:`new_record_from_json`); ``ttl_ms``: it expires
    this long after the node receives it, on the node's clock (a record has its ``expire_at`` or
    a ``ttl_ms``, not both)."""
    if ttl_ms is not None and record.expire_at is not None:
        raise ValueError("give a record expire_at or ttl_ms, not both")
    body: dict[str, Any] = {"key": _b64(record.key), "value": _b64(record.value)}
    if record.timestamp is not None:
        body["timestamp"] = record.timestamp
    if record.tags:
        body["tags"] = list(record.tags)
    if record.headers:
        body["headers"] = {k: _b64(v) for k, v in record.headers}
    if record.expire_at is not None:
        body["expire_at"] = record.expire_at
    if ttl_ms is not None:
        body["ttl_ms"] = ttl_ms
    return body


def record_to_json(record: Record) -> dict[str, Any]:
    return {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": _b64(record.key),
        "value": _b64(record.value),
        "tags": list(record.tags),
        "headers": {k: _b64(v) for k, v in record.headers},
        "expire_at": record.expire_at,
    }


def record_from_json(body: dict[str, Any]) -> Record:
    def raw(value: str | None) -> bytes | None:
        return None if value is None else base64.b64decode(value)

    return Record(
        offset=body["offset"],
        timestamp=body["timestamp"],
        value=raw(body["value"]),
        key=raw(body["key"]),
        tags=tuple(body.get("tags", ())),
        headers=tuple((k, base64.b64decode(v)) for k, v in body.get("headers", {}).items()),
        expire_at=body.get("expire_at"),
    )


def read_result_to_json(result: ReadResult) -> dict[str, Any]:
    return {
        "records": [record_to_json(r) for r in result.records],
        "next_offset": result.next_offset,
        "log_start_offset": result.log_start_offset,
        "end_offset": result.end_offset,
    }


def read_result_from_json(body: dict[str, Any]) -> ReadResult:
    return ReadResult(
        records=tuple(record_from_json(r) for r in body["records"]),
        next_offset=body["next_offset"],
        log_start_offset=body["log_start_offset"],
        end_offset=body["end_offset"],
    )


def segment_to_json(info: SegmentInfo) -> dict[str, Any]:
    body = {f.name: getattr(info, f.name) for f in dataclasses.fields(info)}
    body["state"] = info.state.value
    body["tier"] = info.tier.value
    return body


def segment_from_json(body: dict[str, Any]) -> SegmentInfo:
    """A segment as a node sent it (an older node sends no ``tier``: local)."""
    tier = SegmentTier(body.get("tier", SegmentTier.LOCAL.value))
    return SegmentInfo(**{**body, "state": SegmentState(body["state"]), "tier": tier})


def shard_stats_to_json(stats: ShardStats) -> dict[str, Any]:
    return dataclasses.asdict(stats)
