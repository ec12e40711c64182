"""Bad arguments get the same typed error, naming the same field, on every adapter (memory,
segment, rocksdb): the checks live once in ``storage_engine.validation``.

Offsets and timestamps are signed 64-bit on disk and in the index keys; a larger number
must be refused at the boundary, not fail inside ``struct``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.errors import (
    InvalidArgumentError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    PolicyValidationError,
)
from storage_engine.policy import NamespacePolicy
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
    assert err.field == "offset" and err.rule == "must be an integer from 0 to 2^63-1"


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
    assert "from 0 to 2^63-1" in err.rule
    assert adapter.shard_stats(ns, 0).end_offset == 3  # the whole batch is refused


def test_the_largest_timestamp_is_accepted(adapter: StorageAdapter) -> None:
    ns = filled(adapter)
    offset = adapter.append(ns, 0, [NewRecord(value=b"late", timestamp=INT64_MAX, expire_at=INT64_MAX)]).base_offset
    assert adapter.read(ns, 0, offset).records[0].timestamp == INT64_MAX


@pytest.mark.parametrize("timestamp", [*BEYOND_64_BITS, -1, True, 2.0, None], ids=repr)
def test_offset_for_timestamp_outside_0_to_int64_is_refused(adapter: StorageAdapter, timestamp: object) -> None:
    ns = filled(adapter)
    err = refused(lambda: adapter.offset_for_timestamp(ns, 0, timestamp))  # type: ignore[arg-type]
    assert err.field == "timestamp" and err.rule == "must be an integer from 0 to 2^63-1"
    assert adapter.offset_for_timestamp(ns, 0, INT64_MAX) is None  # the largest one is a fine question


@pytest.mark.parametrize("limit", ["max_records", "max_bytes"])
@pytest.mark.parametrize("value", [*BEYOND_64_BITS, 0, -5, True, 10.0], ids=repr)
def test_read_limits_outside_1_to_int64_are_refused(adapter: StorageAdapter, limit: str, value: object) -> None:
    ns = filled(adapter)
    err = refused(lambda: adapter.read(ns, 0, 0, **{limit: value}))  # type: ignore[arg-type]
    assert err.field == limit and err.rule == "must be an integer from 1 to 2^63-1"
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
