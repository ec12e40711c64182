"""Typed engine errors. Each carries the numbers an operator needs, and a
stable ``code`` that the node server maps to an HTTP status."""

from __future__ import annotations


class StorageError(Exception):
    """Base of every engine error."""

    code = "storage_error"


class EngineClosedError(StorageError):
    code = "engine_closed"

    def __init__(self) -> None:
        super().__init__("the engine is closed")


class InvalidArgumentError(StorageError, ValueError):
    """Bad input: names the field and the rule it breaks."""

    code = "invalid_argument"

    def __init__(self, field: str, rule: str) -> None:
        self.field = field
        self.rule = rule
        super().__init__(f"{field}: {rule}")


class PolicyValidationError(StorageError, ValueError):
    """One or more policy fields break their rules; ``errors`` maps field → rule."""

    code = "invalid_policy"

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(f"{k}: {v}" for k, v in sorted(self.errors.items())))


class InvalidRecordError(InvalidArgumentError):
    code = "invalid_record"

    def __init__(self, field: str, rule: str, index: int | None = None) -> None:
        self.index = index
        where = f"records[{index}].{field}" if index is not None else field
        super().__init__(where, rule)


class RecordTooLargeError(StorageError):
    code = "record_too_large"

    def __init__(self, size: int, limit: int, index: int | None = None) -> None:
        self.size = size
        self.limit = limit
        self.index = index
        super().__init__(f"record {index if index is not None else ''} is {size} bytes; max_record_bytes is {limit}")


class NamespaceExistsError(StorageError):
    code = "namespace_exists"

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        super().__init__(f"namespace {namespace!r} already exists")


class UnknownNamespaceError(StorageError, KeyError):
    code = "unknown_namespace"

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        super().__init__(f"namespace {namespace!r} does not exist")

    def __str__(self) -> str:  # KeyError would quote the message again
        return str(self.args[0])


class UnknownShardError(StorageError, KeyError):
    code = "unknown_shard"

    def __init__(self, namespace: str, shard: int, shards: int) -> None:
        self.namespace = namespace
        self.shard = shard
        self.shards = shards
        super().__init__(f"namespace {namespace!r} has shards 0..{shards - 1}; shard {shard} does not exist")

    def __str__(self) -> str:
        return str(self.args[0])


class OffsetOutOfRangeError(StorageError):
    code = "offset_out_of_range"

    def __init__(self, namespace: str, shard: int, offset: int, log_start_offset: int, end_offset: int) -> None:
        self.namespace = namespace
        self.shard = shard
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.end_offset = end_offset
        super().__init__(
            f"offset {offset} is outside {namespace}/{shard} "
            f"[log_start_offset={log_start_offset}, end_offset={end_offset}]"
        )


class CorruptSegmentError(StorageError):
    code = "corrupt_segment"

    def __init__(self, path: str, position: int, reason: str) -> None:
        self.path = path
        self.position = position
        self.reason = reason
        super().__init__(f"corrupt segment {path} at byte {position}: {reason}")


class DiskFullError(StorageError):
    code = "disk_full"

    def __init__(self, used_ratio: float, warning_ratio: float) -> None:
        self.used_ratio = used_ratio
        self.warning_ratio = warning_ratio
        super().__init__(
            f"disk full: {used_ratio:.1%} used is above disk_warning_ratio {warning_ratio:.0%}; "
            "writes resume when use falls below it"
        )


class DataDirLockedError(StorageError):
    code = "data_dir_locked"

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"data directory {path} is already opened by another process")


class NodeUnavailableError(StorageError):
    """The client could not reach a storage node (connection refused, timeout)."""

    code = "node_unavailable"

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"storage node {url} is unavailable: {reason}")


class RemoteError(StorageError):
    """An error answered by a node that has no more specific type on this side."""

    code = "remote_error"

    def __init__(self, status: int, code: str, message: str) -> None:
        self.status = status
        self.remote_code = code
        super().__init__(f"node answered {status} {code}: {message}")


class AlreadyRunningError(StorageError):
    """The same operation on the same target is already running (one at a time)."""

    code = "already_running"

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(f"{what} is already running")


class SegmentDeletedError(StorageError):
    """A reader reached a segment file that was deleted under it (forced removal after
    ``destroy_forcibly_after_ms``). The read path answers it as out of range."""

    code = "segment_deleted"

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"segment {path} was deleted while being read")


class UnknownSubscriptionError(StorageError, KeyError):
    """No subscription with this name in the namespace (404-like)."""

    code = "unknown_subscription"

    def __init__(self, namespace: str, name: str) -> None:
        self.namespace = namespace
        self.name = name
        super().__init__(f"subscription {name!r} does not exist in namespace {namespace!r}")

    def __str__(self) -> str:
        return str(self.args[0])


class SubscriptionExistsError(StorageError):
    """A subscription with this name already exists in the namespace (409-like)."""

    code = "subscription_exists"

    def __init__(self, namespace: str, name: str) -> None:
        self.namespace = namespace
        self.name = name
        super().__init__(f"subscription {name!r} already exists in namespace {namespace!r}")


class BacklogQuotaExceededError(StorageError):
    """An append refused because a subscription's backlog is over the namespace's quota.

    ``kind`` is ``"size"`` (``limit`` and ``current`` in bytes) or ``"time"``
    (``limit`` and ``current`` in ms: the age of the oldest unacknowledged record).
    """

    code = "backlog_quota_exceeded"

    def __init__(self, namespace: str, kind: str, limit: int, current: int) -> None:
        self.namespace = namespace
        self.kind = kind
        self.limit = limit
        self.current = current
        unit = "bytes" if kind == "size" else "ms"
        field = "backlog_quota_bytes" if kind == "size" else "backlog_quota_seconds"
        super().__init__(
            f"backlog of namespace {namespace!r} is over its {kind} quota: {current} {unit} > {limit} {unit} ({field})"
        )


class ProducerHeldTooLongError(BacklogQuotaExceededError):
    """A held append (``producer_request_hold``) waited ``backlog_hold_timeout_ms`` and the
    backlog was still over quota; ``waited_ms`` is how long it waited."""

    code = "producer_held"

    def __init__(self, namespace: str, kind: str, limit: int, current: int, waited_ms: int) -> None:
        super().__init__(namespace, kind, limit, current)
        self.waited_ms = waited_ms
        self.args = (f"{self.args[0]}; the append was held {waited_ms} ms (backlog_hold_timeout_ms) and is refused",)


class TierError(StorageError):
    """The object store failed or refused an operation (network, permissions, a missing bucket)."""

    code = "tier_unavailable"

    def __init__(self, uri: str, key: str, operation: str, reason: str) -> None:
        self.uri = uri
        self.key = key
        self.operation = operation
        super().__init__(f"object store {uri}: {operation} {key!r} failed: {reason}")


class ObjectMissingError(TierError):
    """An object the catalog references is not in the object store."""

    code = "tier_object_missing"

    def __init__(self, uri: str, key: str, operation: str) -> None:
        super().__init__(uri, key, operation, "no such object")
