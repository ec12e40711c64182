"""Bad arguments get the same typed error, naming the same field, on every adapter (memory,
segment, rocksdb): the checks live once in ``storage_engine.rules.validation``.

Offsets and timestamps are signed 64-bit on disk and in the index keys; a larger number
must be refused at the boundary, not fail inside ``struct``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from storage_engine.api import NewRecord, ReadResult, StorageAdapter
from storage_engine.errors import (
    InvalidArgumentError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    PolicyValidationError,
    UnknownNamespaceError,
    UnknownShardError,
)
from storage_engine.policies.policy import NamespacePolicy
from tests.storage_engine.lifecycle_util import make_ns

INT64_MAX = (1 << 63) - 1
BEYOND_64_BITS = [1 << 63, 1 << 64, 10**30]

ShardCall = Callable[[StorageAdapter, str, Any], object]
# Every data operation that takes a shard.
SHARD_OPS: dict[str, ShardCall] = {
    "append": lambda a, ns, s: a.append(ns, s, [NewRecord(value=b"v")]),
    "read": lambda a, ns, s: a.read(ns, s, 0),
    "read_tag": lambda a, ns, s: a.read_tag(ns, s, "t"),
    "read_key": lambda a, ns, s: a.read_key(ns, s, b"k"),
    "offset_for_timestamp": lambda a, ns, s: a.offset_for_timestamp(ns, s, 0),
    "list_segments": lambda a, ns, s: a.list_segments(ns, s),
    "shard_stats": lambda a, ns, s: a.shard_stats(ns, s),
}


def filled(adapter: StorageAdapter, count: int = 3) -> str:
    ns = make_ns(adapter)
    adapter.append(ns, 0, [NewRecord(value=b"v%d" % i, tags=("t",), timestamp=1000 + i) for i in range(count)])
    return ns


def refused(call: Callable[[], object], error: type[Exception] = InvalidArgumentError) -> Any:
    """The error ``call`` raises, which must be exactly ``error`` (not a subclass or a cousin)."""
    with pytest.raises(Exception) as caught:
        call()
    assert type(caught.value) is error, f"{type(caught.value).__name__}: {caught.value}"
    return caught.value


@pytest.mark.parametrize("shard", [True, False, "0", 0.0, None, b"\x00"], ids=repr)
@pytest.mark.parametrize("op", SHARD_OPS)
def test_a_shard_that_is_not_an_int_is_an_invalid_argument(adapter: StorageAdapter, op: str, shard: object) -> None:
    ns = filled(adapter)
    err = refused(lambda: SHARD_OPS[op](adapter, ns, shard))
    assert err.field == "shard" and "integer" in err.rule
    assert adapter.shard_stats(ns, 0).end_offset == 3  # a refused append wrote nothing


def test_an_empty_or_oversized_tag_is_an_invalid_argument(adapter: StorageAdapter) -> None:
    ns = filled(adapter)
    for tag in ["", "t" * 256, "é" * 128, 7, None, "\ud800"]:
        err = refused(lambda tag=tag: adapter.read_tag(ns, 0, tag))  # type: ignore[misc]
        assert err.field == "tag" and "255 UTF-8 bytes" in err.rule
    assert [r.offset for r in adapter.read_tag(ns, 0, "t" * 255).records] == []  # the longest tag is fine


@pytest.mark.parametrize("offset", [-1, -(1 << 70), *BEYOND_64_BITS, True, 1.0, "0", None], ids=repr)
@pytest.mark.parametrize("op", ["read", "read_tag"])
def test_an_offset_outside_0_to_int64_is_an_invalid_argument(adapter: StorageAdapter, op: str, offset: Any) -> None:
    ns = filled(adapter)
    read = (lambda: adapter.read(ns, 0, offset)) if op == "read" else (lambda: adapter.read_tag(ns, 0, "t", offset))
    err = refused(read)
    assert err.field == "offset" and err.rule == "must be an integer from 0 to 9223372036854775807"


@pytest.mark.parametrize("offset", [4, 1000, INT64_MAX])
@pytest.mark.parametrize("op", ["read", "read_tag"])
def test_an_offset_past_the_end_is_out_of_range(adapter: StorageAdapter, op: str, offset: int) -> None:
    ns = filled(adapter)
    read = (lambda: adapter.read(ns, 0, offset)) if op == "read" else (lambda: adapter.read_tag(ns, 0, "t", offset))
    err = refused(read, OffsetOutOfRangeError)
    assert (err.offset, err.log_start_offset, err.end_offset) == (offset, 0, 3)
    assert adapter.read_tag(ns, 0, "t", 3).records == ()  # at the end: nothing, not an error


@pytest.mark.parametrize("field", ["timestamp", "expire_at"])
@pytest.mark.parametrize("value", [*BEYOND_64_BITS, -1, True, 1.5], ids=repr)
def test_an_append_timestamp_outside_0_to_int64_is_refused(adapter: StorageAdapter, field: str, value: object) -> None:
    ns = filled(adapter)
    good = NewRecord(value=b"ok")
    bad = NewRecord(value=b"bad", **{field: value})  # type: ignore[arg-type]
    err = refused(lambda: adapter.append(ns, 0, [good, bad]), InvalidRecordError)
    assert (err.field, err.index) == (f"records[1].{field}", 1)
    assert "from 0 to 9223372036854775807" in err.rule
    assert adapter.shard_stats(ns, 0).end_offset == 3  # the whole batch is refused


def test_the_largest_timestamp_is_accepted(adapter: StorageAdapter) -> None:
    ns = filled(adapter)
    offset = adapter.append(ns, 0, [NewRecord(value=b"late", timestamp=INT64_MAX, expire_at=INT64_MAX)]).base_offset
    assert adapter.read(ns, 0, offset).records[0].timestamp == INT64_MAX


@pytest.mark.parametrize("timestamp", [*BEYOND_64_BITS, -1, True, 2.0, None], ids=repr)
def test_offset_for_timestamp_outside_0_to_int64_is_refused(adapter: StorageAdapter, timestamp: object) -> None:
    ns = filled(adapter)
    err = refused(lambda: adapter.offset_for_timestamp(ns, 0, timestamp))  # type: ignore[arg-type]
    rule = "must be an integer from 0 to 9223372036854775807 ms since the epoch"  # the unit from the field's name
    assert err.field == "timestamp" and err.rule == rule
    assert adapter.offset_for_timestamp(ns, 0, INT64_MAX) is None  # the largest one is a fine question


@pytest.mark.parametrize("limit", ["max_records", "max_bytes"])
@pytest.mark.parametrize("value", [*BEYOND_64_BITS, 0, -5, True, 10.0], ids=repr)
def test_read_limits_outside_1_to_int64_are_refused(adapter: StorageAdapter, limit: str, value: object) -> None:
    ns = filled(adapter)
    err = refused(lambda: adapter.read(ns, 0, 0, **{limit: value}))  # type: ignore[arg-type]
    unit = " bytes" if limit == "max_bytes" else ""  # the unit from the field's name
    assert err.field == limit and err.rule == f"must be an integer from 1 to 9223372036854775807{unit}"
    if limit == "max_records":
        err = refused(lambda: adapter.read_tag(ns, 0, "t", 0, value))  # type: ignore[arg-type]
        assert err.field == "max_records"


def test_the_largest_read_limits_are_accepted(adapter: StorageAdapter) -> None:
    ns = filled(adapter)
    assert len(adapter.read(ns, 0, 0, max_records=INT64_MAX, max_bytes=INT64_MAX).records) == 3
    assert len(adapter.read_tag(ns, 0, "t", 0, max_records=INT64_MAX).records) == 3


@pytest.mark.parametrize(
    "bad",
    [
        {"reclaim_dead_ratio": math.nan},
        {"min_cleanable_dirty_ratio": math.inf},
        {"reclaim_dead_ratio": -math.inf},
        {"retention_ms": 1 << 64},
        {"ttl_ms": True},
    ],
    ids=repr,
)
def test_a_non_finite_or_oversized_policy_is_never_stored(adapter: StorageAdapter, bad: dict[str, Any]) -> None:
    """A stored NaN made every later listing of the namespace fail (JSON has no NaN), even after a restart."""
    ns = filled(adapter)
    policy = NamespacePolicy(**bad)
    err = refused(lambda: adapter.create_namespace("other", 1, policy), PolicyValidationError)
    assert set(err.errors) == set(bad)
    refused(lambda: adapter.update_namespace(ns, policy), PolicyValidationError)
    assert [n.name for n in adapter.list_namespaces()] == [ns]
    json.dumps(adapter.get_namespace(ns).policy.to_dict(), allow_nan=False)  # still answerable


# -- the four lookups, at every edge, alike on every adapter (issue 17) -----------------------------
# The memory adapter implements the contract on its own; these pin it to the log adapters' answers:
# every case below names the error, and the fields that identify it, every adapter must give.


def lookup(adapter: StorageAdapter, op: str, ns: Any = "ns", shard: Any = 0, **args: Any) -> object:
    """One of the four lookups, with fine arguments but for those given."""
    if op == "read":
        return adapter.read(ns, shard, args.get("offset", 0))
    if op == "read_tag":
        return adapter.read_tag(ns, shard, args.get("tag", "t"), args.get("offset", 0))
    if op == "read_key":
        return adapter.read_key(ns, shard, args.get("key", b"k"))
    assert op == "read_time"
    return adapter.offset_for_timestamp(ns, shard, args.get("timestamp", 0))


LOOKUPS = ["read", "read_tag", "read_key", "read_time"]
OFFSET_LOOKUPS = ["read", "read_tag"]
NOT_A_NAME: list[Any] = [None, 7, b"ns", ["ns"], ("ns",), {"ns": 1}]  # the last two: hashable, not


def _past_end(offset: int) -> dict[str, Any]:
    return {"namespace": "ns", "shard": 0, "offset": offset, "log_start_offset": 0, "end_offset": 3}


# (what is wrong, the lookups it applies to, their arguments, the error, its identifying fields)
BAD_LOOKUPS: list[tuple[str, list[str], dict[str, Any], type[Exception], dict[str, Any]]] = [
    ("empty tag", ["read_tag"], {"tag": ""}, InvalidArgumentError, {"field": "tag"}),
    ("offset past the end", OFFSET_LOOKUPS, {"offset": 4}, OffsetOutOfRangeError, _past_end(4)),
    ("offset far past the end", OFFSET_LOOKUPS, {"offset": INT64_MAX}, OffsetOutOfRangeError, _past_end(INT64_MAX)),
    ("negative offset", OFFSET_LOOKUPS, {"offset": -1}, InvalidArgumentError, {"field": "offset"}),
    ("shard True", LOOKUPS, {"shard": True}, InvalidArgumentError, {"field": "shard"}),
    ("shard False", LOOKUPS, {"shard": False}, InvalidArgumentError, {"field": "shard"}),
    ("shard past the last", LOOKUPS, {"shard": 2}, UnknownShardError, {"namespace": "ns", "shard": 2, "shards": 2}),
    ("negative shard", LOOKUPS, {"shard": -1}, UnknownShardError, {"namespace": "ns", "shard": -1, "shards": 2}),
    ("key not bytes", ["read_key"], {"key": "k"}, InvalidArgumentError, {"field": "key"}),
    ("negative timestamp", ["read_time"], {"timestamp": -1}, InvalidArgumentError, {"field": "timestamp"}),
    ("unknown namespace", LOOKUPS, {"ns": "nope"}, UnknownNamespaceError, {"namespace": "nope"}),
    *[
        (f"namespace {name!r}", LOOKUPS, {"ns": name}, UnknownNamespaceError, {"namespace": str(name)})
        for name in NOT_A_NAME
    ],
    # Which of two wrong arguments is named: read and read_tag check their arguments before
    # they look the shard up; read_key and offset_for_timestamp look it up first.
    (
        "unknown namespace, shard True",
        OFFSET_LOOKUPS,
        {"ns": "nope", "shard": True},
        InvalidArgumentError,
        {"field": "shard"},
    ),
    (
        "unknown namespace, shard True",
        ["read_key", "read_time"],
        {"ns": "nope", "shard": True},
        UnknownNamespaceError,
        {"namespace": "nope"},
    ),
    ("unknown namespace, empty tag", ["read_tag"], {"ns": "nope", "tag": ""}, InvalidArgumentError, {"field": "tag"}),
    (
        "unknown namespace, negative offset",
        OFFSET_LOOKUPS,
        {"ns": "nope", "offset": -1},
        InvalidArgumentError,
        {"field": "offset"},
    ),
    (
        "unknown namespace, key not bytes",
        ["read_key"],
        {"ns": "nope", "key": "k"},
        UnknownNamespaceError,
        {"namespace": "nope"},
    ),
    (
        "shard past the last, offset past the end",
        OFFSET_LOOKUPS,
        {"shard": 2, "offset": 4},
        UnknownShardError,
        {"shard": 2},
    ),
    (
        "shard True, offset past the end",
        OFFSET_LOOKUPS,
        {"shard": True, "offset": 4},
        InvalidArgumentError,
        {"field": "shard"},
    ),
    ("shard past the last, empty tag", ["read_tag"], {"shard": 2, "tag": ""}, InvalidArgumentError, {"field": "tag"}),
    ("shard past the last, key not bytes", ["read_key"], {"shard": 2, "key": "k"}, UnknownShardError, {"shard": 2}),
]


def two_shards(adapter: StorageAdapter) -> None:
    """Namespace ``ns`` of two shards; shard 0 holds offsets 0-2, keyed ``k`` and tagged ``t``."""
    make_ns(adapter, "ns", shards=2)
    adapter.append("ns", 0, [NewRecord(value=b"v%d" % i, key=b"k", tags=("t",), timestamp=1000 + i) for i in range(3)])


@pytest.mark.parametrize(
    ("op", "args", "error", "fields"),
    [
        pytest.param(op, args, error, fields, id=f"{op}: {what}")
        for what, ops, args, error, fields in BAD_LOOKUPS
        for op in ops
    ],
)
def test_a_bad_lookup_fails_alike_on_every_adapter(
    adapter: StorageAdapter, op: str, args: dict[str, Any], error: type[Exception], fields: dict[str, Any]
) -> None:
    two_shards(adapter)
    err = refused(lambda: lookup(adapter, op, **args), error)
    assert {name: getattr(err, name) for name in fields} == fields
    assert adapter.shard_stats("ns", 0).end_offset == 3


def test_lookups_at_the_edges_answer_alike_on_every_adapter(adapter: StorageAdapter) -> None:
    """Not errors: the end offset itself, a tag or key nobody carries, an empty shard, a time past the last."""
    two_shards(adapter)

    def page(result: object) -> tuple[list[int], int, int, int]:
        assert isinstance(result, ReadResult)
        return [r.offset for r in result.records], result.next_offset, result.log_start_offset, result.end_offset

    assert page(adapter.read("ns", 0, 3)) == ([], 3, 0, 3)
    assert page(adapter.read_tag("ns", 0, "t", 3)) == ([], 3, 0, 3)
    assert page(adapter.read_tag("ns", 0, "t", 1)) == ([1, 2], 3, 0, 3)
    assert page(adapter.read_tag("ns", 0, "other")) == ([], 3, 0, 3)
    assert page(adapter.read_tag("ns", 0, "t", 0, max_records=1)) == ([0], 1, 0, 3)
    assert page(adapter.read("ns", 1, 0)) == ([], 0, 0, 0)
    assert page(adapter.read_tag("ns", 1, "t")) == ([], 0, 0, 0)
    assert adapter.read_key("ns", 0, b"") is None and adapter.read_key("ns", 0, b"other") is None
    assert adapter.read_key("ns", 1, b"k") is None
    assert adapter.offset_for_timestamp("ns", 0, 1003) is None
    assert adapter.offset_for_timestamp("ns", 0, 1001) == 1
    assert adapter.offset_for_timestamp("ns", 1, 0) is None
    refused(lambda: adapter.read("ns", 1, 1), OffsetOutOfRangeError)


def _on_shard_0(op: str) -> Callable[[StorageAdapter, Any], object]:
    return lambda a, ns: SHARD_OPS[op](a, ns, 0)


NAMESPACE_CALLS: dict[str, Callable[[StorageAdapter, Any], object]] = {
    "get_namespace": lambda a, ns: a.get_namespace(ns),
    "update_namespace": lambda a, ns: a.update_namespace(ns, NamespacePolicy()),
    "delete_namespace": lambda a, ns: a.delete_namespace(ns),
    **{op: _on_shard_0(op) for op in SHARD_OPS},
}


@pytest.mark.parametrize("name", NOT_A_NAME, ids=repr)
@pytest.mark.parametrize("op", NAMESPACE_CALLS)
def test_a_namespace_that_is_not_a_string_is_unknown(adapter: StorageAdapter, op: str, name: Any) -> None:
    """Not a TypeError from a dict lookup (an unhashable name): the same unknown namespace everywhere."""
    two_shards(adapter)
    err = refused(lambda: NAMESPACE_CALLS[op](adapter, name), UnknownNamespaceError)
    assert err.namespace == str(name)
    assert [n.name for n in adapter.list_namespaces()] == ["ns"]


@pytest.mark.parametrize("records", [None, 5, "abc", b"abc", {1: 2}, {NewRecord(value=b"x")}], ids=repr)
def test_records_that_are_not_a_sequence_are_an_invalid_argument(adapter: StorageAdapter, records: Any) -> None:
    two_shards(adapter)
    err = refused(lambda: adapter.append("ns", 0, records))
    assert (err.field, err.rule) == ("records", "must be a sequence of NewRecord")
    assert adapter.shard_stats("ns", 0).end_offset == 3


def test_a_bad_policy_is_refused_before_the_namespace_is_looked_up(adapter: StorageAdapter) -> None:
    two_shards(adapter)
    not_a_policy: Any = "p"
    bad = NamespacePolicy(ttl_ms=-5)
    for name in ["ns", "nope"]:
        err = refused(lambda name=name: adapter.update_namespace(name, not_a_policy))  # type: ignore[misc]
        assert err.field == "policy"
        refused(lambda name=name: adapter.update_namespace(name, bad), PolicyValidationError)  # type: ignore[misc]
    refused(lambda: adapter.update_namespace("nope", NamespacePolicy()), UnknownNamespaceError)
