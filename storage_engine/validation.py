"""Input validation shared by every adapter, so all of them reject the same
input with the same error (field and rule named)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from storage_engine.api import NewRecord, Record
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


def record_size(record: NewRecord | Record) -> int:
    """The logical size of a record: payload plus a fixed overhead."""
    size = RECORD_OVERHEAD_BYTES + len(record.value or b"") + len(record.key or b"")
    if record.tags:
        size += sum(len(t.encode()) + 1 for t in record.tags)
    if record.headers:
        size += sum(len(k.encode()) + len(v) + 2 for k, v in record.headers)
    return size


def _check_timestamp(value: object, field: str, index: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRecordError(field, "must be an integer number of milliseconds", index)
    if not 0 <= value <= MAX_TIMESTAMP_MS:
        raise InvalidRecordError(field, "must be between 0 and 2^63-1 ms", index)


def _check_tags_and_headers(r: NewRecord, i: int) -> None:
    if not isinstance(r.tags, tuple) or len(r.tags) > MAX_TAGS:
        raise InvalidRecordError("tags", f"must be a tuple of at most {MAX_TAGS} strings", i)
    for tag in r.tags:
        if not isinstance(tag, str) or not tag or len(tag.encode()) > MAX_TAG_BYTES:
            rule = f"each tag must be a non-empty string of at most {MAX_TAG_BYTES} bytes"
            raise InvalidRecordError("tags", rule, i)
    if not isinstance(r.headers, tuple) or len(r.headers) > MAX_HEADERS:
        raise InvalidRecordError("headers", f"must be a tuple of at most {MAX_HEADERS} (name, bytes) pairs", i)
    for h in r.headers:
        if not (isinstance(h, tuple) and len(h) == 2 and isinstance(h[0], str) and isinstance(h[1], bytes)):
            raise InvalidRecordError("headers", "each header must be a (str, bytes) pair", i)


def validate_records(records: Sequence[NewRecord], policy: NamespacePolicy) -> list[int]:
    """Check every record of a batch before anything is written (a batch is atomic).

    Returns each record's :func:`record_size`, so callers never compute it twice.
    This runs once per appended record: per-batch facts are hoisted out of the
    loop and the common case (no tags, no headers) skips their checks.
    """
    key_required = policy.compacts
    limit = policy.max_record_bytes
    sizes: list[int] = []
    for i, r in enumerate(records):
        if type(r) is not NewRecord:
            raise InvalidRecordError("record", "must be a NewRecord", i)
        value, key = r.value, r.key
        if value is not None and type(value) is not bytes:
            raise InvalidRecordError("value", "must be bytes or null (a tombstone)", i)
        if key is None:
            if key_required:
                raise InvalidRecordError("key", "is required: the namespace's cleanup_policy includes compact", i)
        elif type(key) is not bytes:
            raise InvalidRecordError("key", "must be bytes or null", i)
        if r.timestamp is not None:
            _check_timestamp(r.timestamp, "timestamp", i)
        if r.expire_at is not None:
            _check_timestamp(r.expire_at, "expire_at", i)
        if r.tags or r.headers or type(r.tags) is not tuple or type(r.headers) is not tuple:
            _check_tags_and_headers(r, i)
        size = record_size(r)
        if size > limit:
            raise RecordTooLargeError(size, limit, i)
        sizes.append(size)
    return sizes


def validate_read_limits(max_records: object, max_bytes: object) -> None:
    if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1:
        raise InvalidArgumentError("max_records", "must be an integer ≥ 1")
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise InvalidArgumentError("max_bytes", "must be an integer ≥ 1")
