"""Input validation shared by every adapter, so all of them reject the same
input with the same error (field and rule named)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TypeVar

from storage_engine.api import NewRecord, Record
from storage_engine.errors import (
    InvalidArgumentError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnknownNamespaceError,
    UnknownShardError,
)
from storage_engine.policies.bounds import MAX_INT64, int_ok, int_rule
from storage_engine.policies.policy import NamespacePolicy, validate_namespace_policy

T = TypeVar("T")

# The name rule of namespaces and subscriptions, in one place: the regex, the words every refusal says, and
# the facts the console's hint is built from (frontend/src/features/namespaces/nameRule.json is a copy of
# name_rule_facts(), checked equal by a test).
NAME_CHARS = "A-Za-z0-9._-"
NAME_MAX_LENGTH = 200
RESERVED_NAMES = (".", "..")  # a directory's own names: a namespace is a directory of the data dir
NAME_RULE = (
    f"must be 1-{NAME_MAX_LENGTH} characters of ASCII letters, digits, '.', '_' or '-', "
    f"other than {' and '.join(repr(n) for n in RESERVED_NAMES)}"
)
NAME_EXAMPLES = ("orders", "sensor-readings", "billing.v2", "eu_west-1")
# Anchored with \Z, not "$" (which lets a trailing "\n" in): the control plane's RegexField searches with it.
NAMESPACE_NAME = re.compile(rf"^[{NAME_CHARS}]{{1,{NAME_MAX_LENGTH}}}\Z")
MAX_SHARDS = 1024
MAX_TAGS = 64
MAX_TAG_BYTES = 255
MAX_HEADERS = 64
MAX_TIMESTAMP_MS = MAX_INT64
MAX_OFFSET = MAX_INT64
# Bytes a record costs beyond its payload in every adapter's accounting.
RECORD_OVERHEAD_BYTES = 32


def check_int(value: object, field: str, minimum: int = 0, maximum: int = MAX_INT64) -> int:
    """``value`` as an integer within ``minimum..maximum`` or :class:`InvalidArgumentError` naming ``field``."""
    if not int_ok(value, minimum, maximum):
        raise InvalidArgumentError(field, int_rule(minimum, maximum, field))
    return value


# ASCII digits only: Python's int() also takes Unicode digits ("٣"), "1_000" and surrounding
# spaces, and raises ValueError for "²" (which str.isdigit() accepts) and past 4,300 digits.
# 19 digits hold any int64.
_DECIMAL = re.compile(r"-?[0-9]{1,19}")


def int_from_text(text: str, field: str, minimum: int = 0, maximum: int = MAX_INT64) -> int:
    """A decimal integer written in ASCII digits (a query or path parameter), within bounds."""
    if not _DECIMAL.fullmatch(text):
        raise InvalidArgumentError(field, f"{int_rule(minimum, maximum, field)}, written in ASCII digits")
    return check_int(int(text), field, minimum, maximum)


def int_value(value: object, field: str, minimum: int = 0, maximum: int = MAX_INT64) -> int:
    """An integer argument as either place gives it: a query's text (:func:`int_from_text`) or a JSON
    body's number (:func:`check_int`), checked by the same bounds."""
    if isinstance(value, str):
        return int_from_text(value, field, minimum, maximum)
    return check_int(value, field, minimum, maximum)


TRUE_TEXT = ("true", "1")
FALSE_TEXT = ("false", "0")


def flag_value(value: object, field: str) -> bool:
    """A true/false argument: JSON ``true``/``false``, or a query's ``true``/``1`` or ``false``/``0``
    (an empty ``?dry_run=`` is refused, not read as false)."""
    if value is True or (isinstance(value, str) and value in TRUE_TEXT):
        return True
    if value is False or (isinstance(value, str) and value in FALSE_TEXT):
        return False
    raise InvalidArgumentError(field, "must be true or false")


def check_offset(value: object, field: str = "offset") -> int:
    return check_int(value, field, 0, MAX_OFFSET)


def check_timestamp(value: object, field: str = "timestamp") -> int:
    return check_int(value, field, 0, MAX_TIMESTAMP_MS)


def check_shard_arg(shard: object) -> int:
    """The type of a shard argument (:func:`check_shard` also checks the namespace has it)."""
    if isinstance(shard, bool) or not isinstance(shard, int):
        raise InvalidArgumentError("shard", "must be an integer")
    return shard


def check_shard(namespace: str, shard: object, shards: int) -> int:
    """A shard argument of a namespace with ``shards`` shards: an int in ``0..shards-1``."""
    index = check_shard_arg(shard)
    if not 0 <= index < shards:
        raise UnknownShardError(namespace, index, shards)
    return index


def find_namespace(namespaces: Mapping[str, T], name: object) -> T:
    """The namespace called ``name`` in an adapter's catalog; any other name (not a string, not
    even hashable) is an unknown one."""
    found = namespaces.get(name) if isinstance(name, str) else None
    if found is None:
        raise UnknownNamespaceError(str(name))
    return found


def check_policy(policy: object) -> NamespacePolicy:
    """A policy argument: a :class:`NamespacePolicy` whose every field keeps its rule."""
    if not isinstance(policy, NamespacePolicy):
        raise InvalidArgumentError("policy", "must be a NamespacePolicy")
    validate_namespace_policy(policy)
    return policy


def select_shards(namespace: str, shards: Sequence[T], shard: object) -> list[T]:
    """The shards a call names: every one for ``None``, else the one :func:`check_shard` accepts."""
    if shard is None:
        return list(shards)
    return [shards[check_shard(namespace, shard, len(shards))]]


def _tag_problem(tag: object) -> str | None:
    """Why ``tag`` is not a tag (a non-empty string of at most MAX_TAG_BYTES UTF-8 bytes), or None."""
    rule = f"must be a non-empty string of at most {MAX_TAG_BYTES} UTF-8 bytes"
    if not isinstance(tag, str) or not tag:
        return rule
    try:
        size = len(tag.encode())
    except UnicodeEncodeError:  # a lone surrogate has no UTF-8 form
        return rule
    return rule if size > MAX_TAG_BYTES else None


def check_tag(tag: object) -> str:
    problem = _tag_problem(tag)
    if problem is not None or not isinstance(tag, str):
        raise InvalidArgumentError("tag", problem or "must be a string")
    return tag


def validate_namespace_name(name: object) -> str:
    if not isinstance(name, str) or not NAMESPACE_NAME.fullmatch(name) or name in RESERVED_NAMES:
        raise InvalidArgumentError("name", NAME_RULE)
    return name


def name_rule_facts() -> dict[str, object]:
    """The name rule as the console builds its hint and its check from it (``nameRule.json``)."""
    return {
        "chars": NAME_CHARS,
        "max_length": NAME_MAX_LENGTH,
        "reserved": list(RESERVED_NAMES),
        "rule": NAME_RULE,
        "examples": list(NAME_EXAMPLES),
    }


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
    if not int_ok(value, 0, MAX_TIMESTAMP_MS):
        raise InvalidRecordError(field, int_rule(0, MAX_TIMESTAMP_MS, field), index)


def _check_tags_and_headers(r: NewRecord, i: int) -> None:
    if not isinstance(r.tags, tuple) or len(r.tags) > MAX_TAGS:
        raise InvalidRecordError("tags", f"must be a tuple of at most {MAX_TAGS} strings", i)
    for tag in r.tags:
        problem = _tag_problem(tag)
        if problem is not None:
            raise InvalidRecordError("tags", f"each tag {problem}", i)
    if not isinstance(r.headers, tuple) or len(r.headers) > MAX_HEADERS:
        raise InvalidRecordError("headers", f"must be a tuple of at most {MAX_HEADERS} (name, bytes) pairs", i)
    for h in r.headers:
        if not (isinstance(h, tuple) and len(h) == 2 and isinstance(h[0], str) and isinstance(h[1], bytes)):
            raise InvalidRecordError("headers", "each header must be a (str, bytes) pair", i)


def validate_records(records: Sequence[NewRecord], policy: NamespacePolicy) -> list[int]:
    """Check a batch and every record of it before anything is written (a batch is atomic).

    Returns each record's :func:`record_size`, so callers never compute it twice.
    This runs once per appended record: per-batch facts are hoisted out of the
    loop and the common case (no tags, no headers) skips their checks.
    """
    if not isinstance(records, Sequence) or isinstance(records, (str, bytes)):
        raise InvalidArgumentError("records", "must be a sequence of NewRecord")
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


def check_key(key: object) -> bytes:
    """The key argument of ``read_key``."""
    if not isinstance(key, bytes):
        raise InvalidArgumentError("key", "must be bytes")
    return key


def check_read_offset(namespace: str, shard: int, offset: int, log_start: int, end: int) -> None:
    """``read``'s offset against the shard: outside ``[log start, end]`` is out of range (at
    the end the read is empty: the consumer is caught up)."""
    if not log_start <= offset <= end:
        raise OffsetOutOfRangeError(namespace, shard, offset, log_start, end)


def check_tag_offset(namespace: str, shard: int, offset: int, log_start: int, end: int) -> None:
    """``read_tag``'s offset against the shard: past the end is out of range, as for ``read``;
    below the log start the lookup starts at the log start."""
    if offset > end:
        raise OffsetOutOfRangeError(namespace, shard, offset, log_start, end)


def validate_read_limits(max_records: object, max_bytes: object) -> None:
    check_int(max_records, "max_records", 1)
    check_int(max_bytes, "max_bytes", 1)


def validate_read_args(shard: object, offset: object, max_records: object, max_bytes: object = 1) -> None:
    """The arguments of every read (``read``, ``read_tag``): one check, so every adapter refuses
    the same input with the same error. Whether ``offset`` lies in the shard is the adapter's
    :class:`~storage_engine.errors.OffsetOutOfRangeError`. ``read_tag`` has no byte limit and
    leaves ``max_bytes`` at its (valid) default."""
    check_shard_arg(shard)
    check_offset(offset)
    validate_read_limits(max_records, max_bytes)
