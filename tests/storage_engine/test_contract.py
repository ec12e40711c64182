"""The shared contract suite: every adapter against the docstrings of
``storage_engine/api.py`` (fixtures in ``conftest.py``)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage_engine.api import NewRecord, Record, SegmentState, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.config import Durability
from storage_engine.errors import (
    EngineClosedError,
    InvalidArgumentError,
    InvalidRecordError,
    NamespaceExistsError,
    OffsetOutOfRangeError,
    PolicyValidationError,
    RecordTooLargeError,
    UnknownNamespaceError,
    UnknownShardError,
)
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.validation import RECORD_OVERHEAD_BYTES, record_size

SMALL_SEGMENTS = NamespacePolicy(segment_bytes=1024, retention_ms=None)
FAR_FUTURE = 4_000_000_000_000  # an expire_at no test clock reaches


def make_ns(adapter: StorageAdapter, name: str = "ns", shards: int = 1, **policy: Any) -> str:
    # Tests use producer timestamps far in the past: keep retention away from them.
    adapter.create_namespace(name, shards, NamespacePolicy(**{"retention_ms": None, **policy}))
    return name


def rec(value: bytes | None = b"v", **fields: Any) -> NewRecord:
    return NewRecord(value, **fields)


def read_all(adapter: StorageAdapter, ns: str, shard: int = 0, max_records: int = 500) -> list[Record]:
    out: list[Record] = []
    offset = adapter.shard_stats(ns, shard).log_start_offset
    while True:
        result = adapter.read(ns, shard, offset, max_records=max_records)
        if not result.records:
            return out
        out.extend(result.records)
        offset = result.next_offset


def append_singles(adapter: StorageAdapter, ns: str, count: int, value_bytes: int = 300) -> None:
    for i in range(count):
        adapter.append(ns, 0, [rec(bytes([i % 256]) * value_bytes)])


# -- namespaces ------------------------------------------------------------------------------------


def test_create_namespace_returns_its_info(adapter: StorageAdapter, clock: ManualClock) -> None:
    policy = NamespacePolicy(ttl_ms=60_000, segment_bytes=4096)
    info = adapter.create_namespace("orders", 3, policy)
    assert (info.name, info.shards, info.policy, info.created_at) == ("orders", 3, policy, clock.now_ms())
    assert adapter.get_namespace("orders") == info
    assert adapter.create_namespace("plain", 1).policy == NamespacePolicy()


def test_create_existing_namespace_is_rejected(adapter: StorageAdapter) -> None:
    make_ns(adapter, "dup", shards=2)
    with pytest.raises(NamespaceExistsError) as err:
        adapter.create_namespace("dup", 1)
    assert err.value.namespace == "dup"
    assert adapter.get_namespace("dup").shards == 2


@pytest.mark.parametrize("name", ["", "a/b", "has space", "x" * 201, ".", "..", "ü", "tab\t", None, 7])
def test_bad_namespace_names_are_rejected(adapter: StorageAdapter, name: Any) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        adapter.create_namespace(name, 1)
    assert err.value.field == "name"
    assert adapter.list_namespaces() == []


@pytest.mark.parametrize("name", ["x" * 200, "a.b_c-D9", "7"])
def test_edge_namespace_names_are_accepted(adapter: StorageAdapter, name: str) -> None:
    assert adapter.create_namespace(name, 1).name == name


@pytest.mark.parametrize("shards", [0, -1, 1025, True, "2", 1.5])
def test_shard_count_out_of_bounds_is_rejected(adapter: StorageAdapter, shards: Any) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        adapter.create_namespace("ns", shards)
    assert err.value.field == "shards"
    assert adapter.list_namespaces() == []


@pytest.mark.parametrize("shards", [1, 1024])
def test_shard_count_bounds_are_inclusive(adapter: StorageAdapter, shards: int) -> None:
    assert adapter.create_namespace("ns", shards).shards == shards
    assert adapter.shard_stats("ns", shards - 1).end_offset == 0


def test_invalid_policy_is_rejected(adapter: StorageAdapter) -> None:
    with pytest.raises(PolicyValidationError) as err:
        adapter.create_namespace("ns", 1, NamespacePolicy(segment_bytes=10))
    assert "segment_bytes" in err.value.errors
    make_ns(adapter)
    with pytest.raises(PolicyValidationError):
        adapter.update_namespace("ns", NamespacePolicy(cleanup_policy="sometimes"))
    assert adapter.get_namespace("ns").policy == NamespacePolicy(retention_ms=None)


def test_list_namespaces_is_sorted_by_name(adapter: StorageAdapter) -> None:
    for name in ["b", "C", "a", "a.1"]:
        make_ns(adapter, name)
    assert [n.name for n in adapter.list_namespaces()] == sorted(["b", "C", "a", "a.1"])


def test_update_namespace_replaces_the_policy(adapter: StorageAdapter) -> None:
    created = adapter.create_namespace("ns", 2)
    policy = NamespacePolicy(retention_ms=1000, segment_bytes=2048)
    updated = adapter.update_namespace("ns", policy)
    assert updated == replace(created, policy=policy)
    assert adapter.get_namespace("ns") == updated


def test_policy_update_takes_effect_for_the_next_roll(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter)
    append_singles(adapter, ns, 4)  # ≥ 1200 bytes in any accounting, one segment with the 1 GiB default
    assert len(adapter.list_segments(ns, 0)) == 1
    adapter.update_namespace(ns, SMALL_SEGMENTS)
    adapter.append(ns, 0, [rec()])
    assert [s.base_offset for s in adapter.list_segments(ns, 0)] == [0, 4]


def test_policy_update_takes_effect_for_the_next_append(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter)
    adapter.update_namespace(ns, NamespacePolicy(max_record_bytes=100))
    with pytest.raises(RecordTooLargeError):
        adapter.append(ns, 0, [rec(b"x" * 100)])


def test_delete_namespace_removes_it_and_its_data(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter, shards=2)
    adapter.append(ns, 1, [rec(key=b"k", tags=("t",)) for _ in range(5)])
    make_ns(adapter, "other")
    adapter.delete_namespace(ns)
    assert [n.name for n in adapter.list_namespaces()] == ["other"]
    with pytest.raises(UnknownNamespaceError):
        adapter.get_namespace(ns)
    # A namespace created again under the same name starts empty.
    make_ns(adapter, ns, shards=2)
    assert adapter.shard_stats(ns, 1).end_offset == 0
    assert adapter.read(ns, 1, 0).records == ()
    assert adapter.read_key(ns, 1, b"k") is None
    assert adapter.read_tag(ns, 1, "t").records == ()


# Every operation that names a namespace, and every one that names a shard.
NAMESPACE_OPS: dict[str, Callable[[StorageAdapter, str], object]] = {
    "update_namespace": lambda a, ns: a.update_namespace(ns, NamespacePolicy()),
    "delete_namespace": lambda a, ns: a.delete_namespace(ns),
    "get_namespace": lambda a, ns: a.get_namespace(ns),
}
SHARD_OPS: dict[str, Callable[[StorageAdapter, str, int], object]] = {
    "append": lambda a, ns, s: a.append(ns, s, [rec()]),
    "append_empty": lambda a, ns, s: a.append(ns, s, []),
    "read": lambda a, ns, s: a.read(ns, s, 0),
    "offset_for_timestamp": lambda a, ns, s: a.offset_for_timestamp(ns, s, 0),
    "read_key": lambda a, ns, s: a.read_key(ns, s, b"k"),
    "read_tag": lambda a, ns, s: a.read_tag(ns, s, "t"),
    "list_segments": lambda a, ns, s: a.list_segments(ns, s),
    "shard_stats": lambda a, ns, s: a.shard_stats(ns, s),
}
ALL_OPS: dict[str, Callable[[StorageAdapter], object]] = {
    "create_namespace": lambda a: a.create_namespace("fresh", 1),
    "list_namespaces": lambda a: a.list_namespaces(),
    "stats": lambda a: a.stats(),
    **{name: (lambda a, op=op: op(a, "ns")) for name, op in NAMESPACE_OPS.items()},
    **{name: (lambda a, op=op: op(a, "ns", 0)) for name, op in SHARD_OPS.items()},
}


@pytest.mark.parametrize("deleted", [False, True], ids=["never-created", "deleted"])
@pytest.mark.parametrize("op", [*NAMESPACE_OPS, *SHARD_OPS])
def test_unknown_namespace_is_rejected_by_every_op(adapter: StorageAdapter, op: str, deleted: bool) -> None:
    if deleted:
        make_ns(adapter, "gone")
        adapter.delete_namespace("gone")
    call = NAMESPACE_OPS.get(op) or (lambda a, ns: SHARD_OPS[op](a, ns, 0))
    with pytest.raises(UnknownNamespaceError) as err:
        call(adapter, "gone")
    assert err.value.namespace == "gone"


@pytest.mark.parametrize("shard", [2, -1, 1024])
@pytest.mark.parametrize("op", SHARD_OPS)
def test_unknown_shard_is_rejected_by_every_op(adapter: StorageAdapter, op: str, shard: int) -> None:
    ns = make_ns(adapter, shards=2)
    with pytest.raises(UnknownShardError) as err:
        SHARD_OPS[op](adapter, ns, shard)
    assert (err.value.namespace, err.value.shard, err.value.shards) == (ns, shard, 2)
    assert adapter.shard_stats(ns, 0).end_offset == adapter.shard_stats(ns, 1).end_offset == 0


# -- append ----------------------------------------------------------------------------------------


def test_append_returns_consecutive_offsets_per_shard(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter, shards=2)
    first = adapter.append(ns, 0, [rec(), rec(), rec()])
    second = adapter.append(ns, 0, [rec(), rec()])
    other = adapter.append(ns, 1, [rec()])
    assert (first.base_offset, first.count, first.offsets) == (0, 3, range(0, 3))
    assert (second.base_offset, second.count, second.offsets) == (3, 2, range(3, 5))
    assert (other.base_offset, other.count) == (0, 1)
    assert adapter.shard_stats(ns, 0).end_offset == 5


def test_records_round_trip_every_field(adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(adapter)
    sent = [
        rec(
            b"full",
            key=b"k1",
            timestamp=1_000,
            tags=("a", "b"),
            headers=(("h", b"1"), ("h", b"2")),
            expire_at=FAR_FUTURE,
        ),
        rec(None, key=b"k1"),  # tombstone, broker time
        rec(b"", timestamp=0),  # empty value and the smallest timestamp are values, not absences
        rec(b"\x00\xff" * 100, headers=(("", b""),)),
    ]
    adapter.append(ns, 0, sent)
    got = adapter.read(ns, 0, 0).records
    now = clock.now_ms()
    assert list(got) == [
        Record(0, 1_000, b"full", b"k1", ("a", "b"), (("h", b"1"), ("h", b"2")), FAR_FUTURE),
        Record(1, now, None, b"k1"),
        Record(2, 0, b""),
        Record(3, now, b"\x00\xff" * 100, headers=(("", b""),)),
    ]


def test_broker_time_comes_from_the_clock(adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(adapter)
    adapter.append(ns, 0, [rec()])
    clock.advance(1234)
    adapter.append(ns, 0, [rec(), rec(timestamp=42)])
    stamps = [r.timestamp for r in adapter.read(ns, 0, 0).records]
    assert stamps == [clock.now_ms() - 1234, clock.now_ms(), 42]


def test_empty_append_writes_nothing_and_never_rolls(adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(adapter, segment_bytes=1024, segment_ms=1000)
    empty = adapter.append(ns, 0, [])
    assert (empty.base_offset, empty.count) == (0, 0)
    assert adapter.list_segments(ns, 0)[0].record_count == 0
    append_singles(adapter, ns, 3)
    before = adapter.list_segments(ns, 0)
    clock.advance(10_000)  # the active segment is now old enough to roll
    result = adapter.append(ns, 0, [])
    assert (result.base_offset, result.count, result.offsets) == (3, 0, range(3, 3))
    assert adapter.list_segments(ns, 0) == before
    assert adapter.shard_stats(ns, 0).end_offset == 3


INVALID_RECORDS: dict[str, tuple[NewRecord, str]] = {
    "negative timestamp": (rec(timestamp=-1), "timestamp"),
    "float timestamp": (rec(timestamp=1.5), "timestamp"),  # type: ignore[arg-type]
    "negative expire_at": (rec(expire_at=-5), "expire_at"),
    "str value": (rec("text"), "value"),  # type: ignore[arg-type]
    "str key": (rec(key="k"), "key"),  # type: ignore[arg-type]
    "non-string tag": (rec(tags=(1,)), "tags"),  # type: ignore[arg-type]
    "empty tag": (rec(tags=("",)), "tags"),
    "too many tags": (rec(tags=tuple(f"t{i}" for i in range(65))), "tags"),
    "tags as list": (rec(tags=["a"]), "tags"),  # type: ignore[arg-type]
    "bad header": (rec(headers=(("h", "str"),)), "headers"),  # type: ignore[arg-type]
    "not a record": ("plain bytes", "record"),  # type: ignore[dict-item]
}


@pytest.mark.parametrize("case", INVALID_RECORDS)
def test_invalid_record_rejects_the_whole_batch(adapter: StorageAdapter, case: str) -> None:
    bad, field = INVALID_RECORDS[case]
    ns = make_ns(adapter)
    adapter.append(ns, 0, [rec(b"before")])
    with pytest.raises(InvalidRecordError) as err:
        adapter.append(ns, 0, [rec(key=b"k", tags=("t",)), rec(), bad, rec()])
    assert err.value.index == 2
    assert err.value.field == f"records[2].{field}"
    assert field in str(err.value)
    # Nothing of the batch was written: no offsets, no index entries.
    assert [r.value for r in read_all(adapter, ns)] == [b"before"]
    assert adapter.read_key(ns, 0, b"k") is None
    assert adapter.read_tag(ns, 0, "t").records == ()
    assert adapter.append(ns, 0, [rec()]).base_offset == 1


def test_compacted_namespace_requires_keys(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter, cleanup_policy="compact")
    with pytest.raises(InvalidRecordError) as err:
        adapter.append(ns, 0, [rec(key=b"k"), rec()])
    assert err.value.field == "records[1].key"
    assert adapter.append(ns, 0, [rec(key=b"k")]).base_offset == 0


def test_record_too_large_rejects_the_whole_batch(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter, max_record_bytes=1024)
    at_limit = rec(b"x" * (1024 - RECORD_OVERHEAD_BYTES))
    over = rec(b"x" * (1024 - RECORD_OVERHEAD_BYTES + 1))
    assert record_size(at_limit) == 1024
    with pytest.raises(RecordTooLargeError) as err:
        adapter.append(ns, 0, [at_limit, over])
    assert (err.value.size, err.value.limit, err.value.index) == (1025, 1024, 1)
    assert adapter.shard_stats(ns, 0).end_offset == 0
    assert adapter.append(ns, 0, [at_limit]).count == 1


# -- read ------------------------------------------------------------------------------------------


def test_read_from_an_offset_with_max_records(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter)
    adapter.append(ns, 0, [rec(str(i).encode()) for i in range(10)])
    result = adapter.read(ns, 0, 3, max_records=4)
    assert [r.offset for r in result.records] == [3, 4, 5, 6]
    assert [r.value for r in result.records] == [b"3", b"4", b"5", b"6"]
    assert (result.next_offset, result.log_start_offset, result.end_offset) == (7, 0, 10)
    tail = adapter.read(ns, 0, 7)
    assert [r.offset for r in tail.records] == [7, 8, 9]
    assert tail.next_offset == 10


def test_read_stops_before_max_bytes(adapter: StorageAdapter) -> None:
    # Bytes are counted with record_size(), the accounting shared by every adapter.
    ns = make_ns(adapter)
    records = [rec(b"x" * 100, key=b"key", tags=("t",)) for _ in range(10)]
    size = record_size(records[0])
    adapter.append(ns, 0, records)
    assert len(adapter.read(ns, 0, 0, max_bytes=3 * size).records) == 3
    assert len(adapter.read(ns, 0, 0, max_bytes=3 * size - 1).records) == 2
    assert len(adapter.read(ns, 0, 0, max_bytes=100 * size, max_records=5).records) == 5


def test_read_returns_one_record_even_over_max_bytes(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter)
    adapter.append(ns, 0, [rec(b"x" * 5000), rec(b"y")])
    result = adapter.read(ns, 0, 0, max_bytes=1)
    assert [r.offset for r in result.records] == [0]
    assert result.next_offset == 1


def test_read_at_end_offset_is_empty_not_an_error(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter)
    empty = adapter.read(ns, 0, 0)
    assert (empty.records, empty.next_offset, empty.log_start_offset, empty.end_offset) == ((), 0, 0, 0)
    adapter.append(ns, 0, [rec(), rec()])
    caught_up = adapter.read(ns, 0, 2)
    assert (caught_up.records, caught_up.next_offset, caught_up.end_offset) == ((), 2, 2)


@pytest.mark.parametrize("offset", [3, 100])  # a negative offset is an invalid argument (test_bad_arguments)
def test_read_outside_the_log_is_out_of_range(adapter: StorageAdapter, offset: int) -> None:
    ns = make_ns(adapter)
    adapter.append(ns, 0, [rec(), rec()])
    with pytest.raises(OffsetOutOfRangeError) as err:
        adapter.read(ns, 0, offset)
    e = err.value
    assert (e.namespace, e.shard, e.offset, e.log_start_offset, e.end_offset) == (ns, 0, offset, 0, 2)
    assert "log_start_offset=0" in str(e) and "end_offset=2" in str(e)


@pytest.mark.parametrize("limits", [{"max_records": 0}, {"max_bytes": 0}, {"max_records": True}, {"max_bytes": -1}])
def test_read_rejects_bad_limits(adapter: StorageAdapter, limits: dict[str, Any]) -> None:
    ns = make_ns(adapter)
    adapter.append(ns, 0, [rec()])
    with pytest.raises(InvalidArgumentError) as err:
        adapter.read(ns, 0, 0, **limits)
    assert err.value.field == next(iter(limits))


def test_read_spans_segments(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter, segment_bytes=1024)
    append_singles(adapter, ns, 20)
    assert len(adapter.list_segments(ns, 0)) > 2
    for start in (0, 5, 19):
        result = adapter.read(ns, 0, start, max_records=100)
        assert [r.offset for r in result.records] == list(range(start, 20))
        assert [r.value for r in result.records] == [bytes([i]) * 300 for i in range(start, 20)]


# -- offset_for_timestamp, read_key, read_tag ------------------------------------------------------


def test_offset_for_timestamp_finds_the_first_record_at_or_after(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter)
    assert adapter.offset_for_timestamp(ns, 0, 0) is None
    # Producer timestamps need not be ordered: the answer is the first offset with ts ≥ target.
    adapter.append(ns, 0, [rec(timestamp=t) for t in (100, 300, 200, 400)])
    expected = {0: 0, 100: 0, 101: 1, 250: 1, 300: 1, 301: 3, 400: 3, 401: None}
    assert {t: adapter.offset_for_timestamp(ns, 0, t) for t in expected} == expected


def test_offset_for_timestamp_across_segments(adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(adapter, segment_bytes=1024)
    start = clock.now_ms()
    for _ in range(12):
        adapter.append(ns, 0, [rec(b"x" * 300)])
        clock.advance(10)
    assert len(adapter.list_segments(ns, 0)) > 2
    assert adapter.offset_for_timestamp(ns, 0, start + 75) == 8
    assert adapter.offset_for_timestamp(ns, 0, start + 110) == 11
    assert adapter.offset_for_timestamp(ns, 0, start + 111) is None


def test_read_key_returns_the_latest_record_tombstones_included(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter, shards=2)
    adapter.append(ns, 0, [rec(b"v1", key=b"k1"), rec(b"v2", key=b"k2"), rec(b"v3", key=b"k1")])
    latest = adapter.read_key(ns, 0, b"k1")
    assert latest is not None and (latest.offset, latest.value) == (2, b"v3")
    adapter.append(ns, 0, [rec(None, key=b"k1")])
    tombstone = adapter.read_key(ns, 0, b"k1")
    assert tombstone is not None and (tombstone.offset, tombstone.value, tombstone.key) == (3, None, b"k1")
    assert adapter.read_key(ns, 0, b"missing") is None
    assert adapter.read_key(ns, 1, b"k1") is None  # keys are per shard


def test_read_key_across_segments(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter, segment_bytes=1024)
    for i in range(12):
        adapter.append(ns, 0, [rec(bytes([i]) * 300, key=b"k%d" % (i % 3))])
    assert len(adapter.list_segments(ns, 0)) > 2
    found = [adapter.read_key(ns, 0, b"k%d" % k) for k in range(3)]
    assert [r.offset if r else None for r in found] == [9, 10, 11]


def test_read_tag_from_an_offset(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter)
    adapter.append(ns, 0, [rec(tags=("a",)), rec(tags=("b",)), rec(tags=("a", "b")), rec(), rec(tags=("a",))])

    def offsets(tag: str, offset: int = 0, max_records: int = 500) -> tuple[list[int], int]:
        result = adapter.read_tag(ns, 0, tag, offset, max_records)
        assert (result.log_start_offset, result.end_offset) == (0, 5)
        assert all(tag in r.tags for r in result.records)
        return [r.offset for r in result.records], result.next_offset

    assert offsets("a") == ([0, 2, 4], 5)
    assert offsets("b") == ([1, 2], 3)
    assert offsets("a", 1) == ([2, 4], 5)
    assert offsets("a", 1, max_records=1) == ([2], 3)
    assert offsets("a", 3, max_records=1) == ([4], 5)
    assert offsets("b", 3) == ([], 5)  # no further records: next_offset is end_offset
    assert offsets("a", 5) == ([], 5)
    assert offsets("missing") == ([], 5)
    with pytest.raises(InvalidArgumentError):  # below 0 is no offset at all (test_bad_arguments)
        offsets("a", -10)


def test_read_tag_returns_a_record_once_however_often_it_carries_the_tag(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter)
    adapter.append(ns, 0, [rec(tags=("a", "a")), rec(tags=("a",))])
    assert [r.offset for r in adapter.read_tag(ns, 0, "a").records] == [0, 1]


def test_read_tag_pages_across_segments(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter, segment_bytes=1024)
    for i in range(15):
        adapter.append(ns, 0, [rec(b"x" * 300, tags=("even",) if i % 2 == 0 else ("odd",))])
    seen: list[int] = []
    offset = 0
    while True:
        page = adapter.read_tag(ns, 0, "even", offset, max_records=3)
        if not page.records:
            break
        seen += [r.offset for r in page.records]
        offset = page.next_offset
    assert seen == list(range(0, 15, 2))


# -- segments and stats ----------------------------------------------------------------------------


def test_an_empty_shard_has_one_empty_active_segment(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter)
    [segment] = adapter.list_segments(ns, 0)
    assert (segment.namespace, segment.shard, segment.base_offset, segment.last_offset) == (ns, 0, 0, -1)
    assert (segment.record_count, segment.live_count, segment.state) == (0, 0, SegmentState.ACTIVE)
    assert (segment.min_timestamp, segment.max_timestamp, segment.max_expire_at) == (None, None, None)
    assert segment.has_unbounded is False


def test_segment_metadata(adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(adapter, shards=2)
    far = FAR_FUTURE
    adapter.append(ns, 1, [rec(timestamp=500, expire_at=far + 9), rec(timestamp=100, expire_at=far + 7)])
    clock.advance(50)
    adapter.append(ns, 1, [rec(timestamp=300, expire_at=far + 8)])
    [segment] = adapter.list_segments(ns, 1)
    assert (segment.namespace, segment.shard, segment.base_offset, segment.last_offset) == (ns, 1, 0, 2)
    assert (segment.record_count, segment.live_count) == (3, 3)
    assert (segment.min_timestamp, segment.max_timestamp) == (100, 500)
    assert (segment.max_expire_at, segment.has_unbounded) == (far + 9, False)
    assert segment.state == SegmentState.ACTIVE
    assert segment.size_bytes > 0
    assert segment.created_at <= clock.now_ms() - 50
    assert segment.modified_at == clock.now_ms()
    adapter.append(ns, 1, [rec(timestamp=200)])  # no explicit expire_at
    [segment] = adapter.list_segments(ns, 1)
    assert (segment.max_expire_at, segment.has_unbounded, segment.record_count) == (far + 9, True, 4)


def assert_contiguous(segments: list[Any], end_offset: int) -> None:
    assert segments[0].base_offset == 0
    for prev, nxt in itertools.pairwise(segments):
        assert nxt.base_offset == prev.last_offset + 1
    assert segments[-1].last_offset == end_offset - 1
    assert sum(s.record_count for s in segments) == end_offset
    assert [s.state for s in segments] == [SegmentState.SEALED] * (len(segments) - 1) + [SegmentState.ACTIVE]


def test_segments_roll_by_size(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter, segment_bytes=1024)
    append_singles(adapter, ns, 12)  # 12 × ≥ 332 bytes
    segments = adapter.list_segments(ns, 0)
    assert 12 * 332 // 1024 <= len(segments) <= 12
    assert_contiguous(segments, 12)
    for s in segments[:-1]:
        assert s.record_count >= 1 and s.size_bytes <= 1024


def test_a_batch_is_never_split_across_segments(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter, segment_bytes=1024)
    adapter.append(ns, 0, [rec(b"a" * 300)])
    adapter.append(ns, 0, [rec(b"b" * 300) for _ in range(5)])  # bigger than a whole segment
    adapter.append(ns, 0, [rec(b"c" * 300)])
    segments = adapter.list_segments(ns, 0)
    assert [(s.base_offset, s.last_offset) for s in segments] == [(0, 0), (1, 5), (6, 6)]
    assert_contiguous(segments, 7)


def test_segments_roll_by_time(adapter: StorageAdapter, clock: ManualClock) -> None:
    ns = make_ns(adapter, segment_ms=1000)
    clock.advance(5000)  # an empty active segment does not roll however old it is
    first = clock.now_ms()
    adapter.append(ns, 0, [rec()])
    clock.advance(999)
    adapter.append(ns, 0, [rec()])
    assert len(adapter.list_segments(ns, 0)) == 1
    clock.advance(2)  # now 1001 ms after the segment's first record
    adapter.append(ns, 0, [rec(), rec()])
    sealed, active = adapter.list_segments(ns, 0)
    assert (sealed.base_offset, sealed.last_offset, sealed.state) == (0, 1, SegmentState.SEALED)
    assert (sealed.min_timestamp, sealed.max_timestamp) == (first, first + 999)
    assert (active.base_offset, active.last_offset, active.state) == (2, 3, SegmentState.ACTIVE)
    assert active.created_at == active.modified_at == first + 1001
    # The roll clock restarts at the new segment's first record.
    clock.advance(1000)
    adapter.append(ns, 0, [rec()])
    assert len(adapter.list_segments(ns, 0)) == 2
    clock.advance(1)
    adapter.append(ns, 0, [rec()])
    assert [s.base_offset for s in adapter.list_segments(ns, 0)] == [0, 2, 5]


def test_segment_age_is_measured_in_record_time(adapter: StorageAdapter) -> None:
    # Kafka's rule: the incoming batch's largest timestamp minus the segment's first
    # timestamp, so replaying old producer timestamps does not roll on every append.
    ns = make_ns(adapter, segment_ms=1000)
    adapter.append(ns, 0, [rec(timestamp=100)])
    adapter.append(ns, 0, [rec(timestamp=1100), rec(timestamp=50)])
    assert len(adapter.list_segments(ns, 0)) == 1
    adapter.append(ns, 0, [rec(timestamp=20), rec(timestamp=1101)])
    assert [s.base_offset for s in adapter.list_segments(ns, 0)] == [0, 3]
    adapter.append(ns, 0, [rec()])  # broker time, ages after the segment's first record (20)
    assert [s.base_offset for s in adapter.list_segments(ns, 0)] == [0, 3, 5]


def test_shard_stats(adapter: StorageAdapter) -> None:
    ns = make_ns(adapter, shards=2, segment_bytes=1024)
    empty = adapter.shard_stats(ns, 1)
    assert (empty.namespace, empty.shard, empty.log_start_offset, empty.end_offset) == (ns, 1, 0, 0)
    assert (empty.record_count, empty.live_count) == (0, 0)
    append_singles(adapter, ns, 10)
    stats = adapter.shard_stats(ns, 0)
    segments = adapter.list_segments(ns, 0)
    assert (stats.namespace, stats.shard, stats.log_start_offset, stats.end_offset) == (ns, 0, 0, 10)
    assert (stats.record_count, stats.live_count) == (10, 10)
    assert stats.size_bytes == sum(s.size_bytes for s in segments) >= 10 * 332
    assert stats.segment_count == len(segments) > 1


def test_engine_stats(adapter: StorageAdapter, adapter_name: str) -> None:
    make_ns(adapter, "b", shards=2)
    make_ns(adapter, "a")
    adapter.append("b", 1, [rec(), rec()])
    adapter.append("a", 0, [rec()])
    stats = adapter.stats()
    assert (stats.adapter, stats.namespaces) == (adapter_name, 2)
    assert list(stats.shards) == [adapter.shard_stats(ns, s) for ns, s in [("a", 0), ("b", 0), ("b", 1)]]
    assert all(isinstance(k, str) and isinstance(v, int | float) for k, v in stats.counters.items())


# -- persistence and lifecycle ---------------------------------------------------------------------


@pytest.mark.parametrize("durability", list(Durability))
def test_data_survives_close_and_reopen(
    open_adapter: Callable[..., StorageAdapter], persistent_adapter_name: str, durability: Durability
) -> None:
    first = open_adapter(durability)
    policy = NamespacePolicy(segment_bytes=1024, retention_ms=None, cleanup_policy="compact,delete")
    info = first.create_namespace("kept", 2, policy)
    for i in range(12):
        record = rec(bytes([i]) * 300, key=b"k%d" % (i % 4), tags=(f"t{i % 2}",), expire_at=FAR_FUTURE + i)
        first.append("kept", 1, [record])
    first.append("kept", 1, [rec(None, key=b"k0", timestamp=7, headers=(("h", b"v"),))])
    records = read_all(first, "kept", 1)
    segments = first.list_segments("kept", 1)
    stats = first.shard_stats("kept", 1)
    first.close()

    second = open_adapter(durability)
    assert second.list_namespaces() == [info]
    assert read_all(second, "kept", 1) == records
    assert second.shard_stats("kept", 1) == stats
    # created_at/modified_at may be re-derived on open; everything else must match exactly.
    strip = [replace(s, created_at=0, modified_at=0) for s in segments]
    assert [replace(s, created_at=0, modified_at=0) for s in second.list_segments("kept", 1)] == strip
    key = second.read_key("kept", 1, b"k0")
    assert key is not None and (key.offset, key.value) == (12, None)
    assert [r.offset for r in second.read_tag("kept", 1, "t1").records] == [1, 3, 5, 7, 9, 11]
    assert second.offset_for_timestamp("kept", 1, records[0].timestamp) == 0
    assert second.append("kept", 1, [rec(key=b"k9")]).base_offset == 13
    assert second.shard_stats("kept", 0).end_offset == 0


@pytest.mark.parametrize("op", ALL_OPS)
def test_close_is_idempotent_and_later_calls_fail(adapter: StorageAdapter, op: str) -> None:
    make_ns(adapter)
    adapter.close()
    adapter.close()
    with pytest.raises(EngineClosedError):
        ALL_OPS[op](adapter)


# -- properties --------------------------------------------------------------------------------------

_examples = iter(range(1 << 30))  # a fresh namespace per hypothesis example


@pytest.fixture
def fsync_adapter(open_adapter: Callable[..., StorageAdapter]) -> StorageAdapter:
    return open_adapter(Durability.FSYNC)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(producers=st.lists(st.lists(st.integers(1, 25), min_size=1, max_size=6), min_size=2, max_size=4))
def test_concurrent_producers_get_dense_offsets(fsync_adapter: StorageAdapter, producers: list[list[int]]) -> None:
    adapter = fsync_adapter
    ns = make_ns(adapter, f"p{next(_examples)}", segment_bytes=1024)
    start = threading.Barrier(len(producers))
    results: dict[tuple[int, int], range] = {}
    errors: list[BaseException] = []

    def produce(p: int, sizes: list[int]) -> None:
        try:
            start.wait()
            for b, size in enumerate(sizes):
                batch = [rec(b"%d/%d/%d" % (p, b, i) + b"." * 40) for i in range(size)]
                result = adapter.append(ns, 0, batch)
                assert result.count == size
                results[p, b] = result.offsets
        except BaseException as exc:  # surfaced in the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=produce, args=(p, sizes)) for p, sizes in enumerate(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    total = sum(map(sum, producers))
    assert sorted(o for offsets in results.values() for o in offsets) == list(range(total))
    for p, sizes in enumerate(producers):  # one producer's batches land in its order
        bases = [results[p, b].start for b in range(len(sizes))]
        assert bases == sorted(bases)
    stored = read_all(adapter, ns, max_records=7)
    assert [r.offset for r in stored] == list(range(total))
    for (p, b), offsets in results.items():
        assert [stored[o].value for o in offsets] == [b"%d/%d/%d" % (p, b, i) + b"." * 40 for i in range(len(offsets))]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(st.lists(st.binary(max_size=400), min_size=0, max_size=6), min_size=1, max_size=8),
    max_records=st.integers(1, 7),
    max_bytes=st.integers(1, 2000),
)
def test_paged_reads_return_every_record_once_in_order(
    adapter: StorageAdapter, batches: list[list[bytes]], max_records: int, max_bytes: int
) -> None:
    ns = make_ns(adapter, f"r{next(_examples)}", segment_bytes=1024)
    for batch in batches:
        adapter.append(ns, 0, [rec(v) for v in batch])
    got: list[Record] = []
    offset = 0
    while True:
        page = adapter.read(ns, 0, offset, max_records=max_records, max_bytes=max_bytes)
        assert len(page.records) <= max_records
        sizes = [record_size(rec(r.value)) for r in page.records]
        assert len(sizes) <= 1 or sum(sizes) <= max_bytes
        got.extend(page.records)
        if not page.records:
            break
        offset = page.next_offset
    assert [(r.offset, r.value) for r in got] == list(enumerate(v for batch in batches for v in batch))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stamps=st.lists(st.integers(0, 50), min_size=1, max_size=30), target=st.integers(0, 52))
def test_offset_for_timestamp_matches_a_linear_scan(adapter: StorageAdapter, stamps: list[int], target: int) -> None:
    ns = make_ns(adapter, f"t{next(_examples)}", segment_bytes=1024)
    for ts in stamps:
        adapter.append(ns, 0, [rec(b"x" * 200, timestamp=ts)])
    expected = next((o for o, ts in enumerate(stamps) if ts >= target), None)
    assert adapter.offset_for_timestamp(ns, 0, target) == expected


def test_append_counters_count_records_and_bytes(adapter: StorageAdapter, adapter_name: str) -> None:
    """Every adapter that counts appends counts them in the same units: records, not batches."""
    adapter.create_namespace("counted", 1, NamespacePolicy(retention_ms=None))
    adapter.append("counted", 0, [NewRecord(b"a" * 10)] * 3)
    adapter.append("counted", 0, [NewRecord(b"b" * 10)] * 4)
    counters = adapter.stats().counters
    if "appended_records_total" not in counters:
        pytest.skip(f"the {adapter_name} adapter keeps no append counters")
    assert counters["appended_records_total"] == 7
    assert counters["appended_bytes_total"] >= 70
