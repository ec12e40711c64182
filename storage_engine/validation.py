"""Input validation shared by every adapter, so all of them reject the same
input with the same error (field and rule named)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from storage_engine.api import NewRecord
from storage_engine.errors import InvalidArgumentError, InvalidRecordError, RecordTooLargeError
from storage_engine.policy import NamespacePolicy

NAMESPACE_NAME = re.compile(r"^[A-Za-z0-9._-]{1,200}$")
MAX_SHARDS = 1024
MAX_TAGS = 64
MAX_TAG_BYTES = 255
MAX_HEADERS = 64
MAX_TIMESTAMP_MS = (1 << 63) - 1
# Bytes a record costs beyond its payload in every adapter's accounting.
RECORD_OVERHEAD_BYTES = 32


def validate_namespace_name(name: object) -> str:
    if not isinstance(name, str) or not NAMESPACE_NAME.match(name):
        raise InvalidArgumentError("name", "must be 1-200 characters of letters, digits, '.', '_' or '-'")
    if name in {".", ".."}:
        raise InvalidArgumentError("name", "must not be '.' or '..'")
    return name


def validate_shard_count(shards: object) -> int:
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidArgumentError("shards", f"must be an integer from 1 to {MAX_SHARDS}")
    return shards


def record_size(record: NewRecord) -> int:
    """The logical size of a record: payload plus a fixed overhead."""
    size = RECORD_OVERHEAD_BYTES + len(record.value or b"") + len(record.key or b"")
    size += sum(len(t.encode()) + 1 for t in record.tags)
    size += sum(len(k.encode()) + len(v) + 2 for k, v in record.headers)
    return size


def _check_timestamp(value: object, field: str, index: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRecordError(field, "must be an integer number of milliseconds", index)
    if not 0 <= value <= MAX_TIMESTAMP_MS:
        raise InvalidRecordError(field, "must be between 0 and 2^63-1 ms", index)


def validate_records(records: Sequence[NewRecord], policy: NamespacePolicy) -> None:
    """Check every record of a batch before anything is written (a batch is atomic)."""
    for i, r in enumerate(records):
        if not isinstance(r, NewRecord):
            raise InvalidRecordError("record", "must be a NewRecord", i)
        if r.value is not None and not isinstance(r.value, bytes):
            raise InvalidRecordError("value", "must be bytes or null (a tombstone)", i)
        if r.key is not None and not isinstance(r.key, bytes):
            raise InvalidRecordError("key", "must be bytes or null", i)
        if policy.compacts and r.key is None:
            raise InvalidRecordError("key", "is required: the namespace's cleanup_policy includes compact", i)
        _check_timestamp(r.timestamp, "timestamp", i)
        _check_timestamp(r.expire_at, "expire_at", i)
        if not isinstance(r.tags, tuple) or len(r.tags) > MAX_TAGS:
            raise InvalidRecordError("tags", f"must be a tuple of at most {MAX_TAGS} strings", i)
        for tag in r.tags:
            if not isinstance(tag, str) or not tag or len(tag.encode()) > MAX_TAG_BYTES:
                raise InvalidRecordError(
                    "tags", f"each tag must be a non-empty string of at most {MAX_TAG_BYTES} bytes", i
                )
        if not isinstance(r.headers, tuple) or len(r.headers) > MAX_HEADERS:
            raise InvalidRecordError("headers", f"must be a tuple of at most {MAX_HEADERS} (name, bytes) pairs", i)
        for h in r.headers:
            if not (isinstance(h, tuple) and len(h) == 2 and isinstance(h[0], str) and isinstance(h[1], bytes)):
                raise InvalidRecordError("headers", "each header must be a (str, bytes) pair", i)
        size = record_size(r)
        if size > policy.max_record_bytes:
            raise RecordTooLargeError(size, policy.max_record_bytes, i)


def validate_read_limits(max_records: object, max_bytes: object) -> None:
    if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1:
        raise InvalidArgumentError("max_records", "must be an integer ≥ 1")
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise InvalidArgumentError("max_bytes", "must be an integer ≥ 1")
