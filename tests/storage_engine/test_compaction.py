"""Key compaction (DESIGN §3): Kafka's cleaner scenarios and RocketMQ's compaction topic,
against every adapter (ManualClock, no sleeping)."""

from __future__ import annotations

from typing import Any

import pytest

from storage_engine.api import NewRecord, Record, SegmentState, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.compaction.checkpoint import CleanerState
from storage_engine.compaction.keymap import KeyMap
from storage_engine.policies.keymap_size import LOAD_FACTOR, SLOT_BYTES
from storage_engine.policies.policy import DAY_MS, NamespacePolicy
from tests.storage_engine.lifecycle_util import assert_verified, read_all

T0 = 1_700_000_000_000


def make_compacted(adapter: StorageAdapter, name: str = "c", shards: int = 1, **policy: Any) -> str:
    values: dict[str, Any] = {"cleanup_policy": "compact", "retention_ms": None, "segment_bytes": 2048}
    values.update(policy)
    adapter.create_namespace(name, shards, NamespacePolicy(**values))
    return name


def put(adapter: StorageAdapter, ns: str, items: list[tuple[bytes, bytes | None]], shard: int = 0, **kw: Any) -> None:
    for key, value in items:
        adapter.append(ns, shard, [NewRecord(value, key=key, **kw)])


def seal(adapter: StorageAdapter, ns: str, shard: int = 0) -> None:
    """Fill the active segment with filler keys so everything before it is sealed."""
    before = len(adapter.list_segments(ns, shard))
    i = 0
    while len(adapter.list_segments(ns, shard)) == before:
        adapter.append(ns, shard, [NewRecord(b"f" * 200, key=b"filler-%d" % i)])
        i += 1


def latest(records: list[Record]) -> dict[bytes, Record]:
    out: dict[bytes, Record] = {}
    for r in records:
        assert r.key is not None
        out[r.key] = r
    return out


def reference(records: list[Record]) -> list[int]:
    """Offsets a full compaction keeps of ``records`` (tombstones within their horizon)."""
    last = {r.key: r.offset for r in records}
    return [r.offset for r in records if last[r.key] == r.offset]


@pytest.fixture
def engine(lc_adapter: StorageAdapter, clock: ManualClock) -> StorageAdapter:
    clock.set(T0)
    return lc_adapter


def test_keymap_budget() -> None:
    m = KeyMap(120 * SLOT_BYTES)
    assert m.slots == 113  # the largest prime within the budget
    assert m.capacity == int(113 * LOAD_FACTOR) == 101
    assert m.memory_bytes == 113 * SLOT_BYTES + 64 <= 120 * SLOT_BYTES  # table + superseded bitmap
    for i in range(m.capacity):
        assert m.put(b"%d" % i, i)
    assert not m.put(b"new", 200)
    assert m.get(b"new") is None
    assert m.put(b"5", 300)  # an existing key still updates
    assert m.get(b"5") == 300 and len(m) == m.capacity
    assert all(m.get(b"%d" % i) == (300 if i == 5 else i) for i in range(m.capacity))
    assert m.superseded(5) and not m.superseded(4) and not m.superseded(300)
    assert m.span == 8 * 64  # the bitmap's bits: a round spans no more offsets
    assert not m.put(b"5", m.span)
    m.clear(10_000)
    assert len(m) == 0 and m.get(b"5") is None and not m.superseded(10_005)
    assert m.put_many([10_000, 10_001, 10_002], [b"a", b"b", b"a"]) == 3
    assert m.latest_many([b"a", b"b", b"c", None]) == [10_002, 10_001, -1, -1]
    assert m.superseded(10_000) and not m.superseded(10_001) and not m.superseded(10_002)


def test_cleaner_state_roundtrip() -> None:
    s = CleanerState()
    s.record_pass(10, 100)
    s.record_pass(20, 200)
    assert CleanerState.unpack(s.pack()) == s
    assert s.clean_time(5) == 100 and s.clean_time(15) == 200 and s.clean_time(25) is None


def test_one_record_per_key_in_several_rounds(engine: StorageAdapter) -> None:
    ns = make_compacted(engine)
    keys = 40
    for rep in range(5):
        put(engine, ns, [(b"k%02d" % k, b"v%d-%d" % (rep, k) + b"x" * 50) for k in range(keys)])
    seal(engine, ns)
    before = read_all(engine, ns)
    sealed_end = engine.list_segments(ns, 0)[-1].base_offset
    expected = [o for o in reference([r for r in before if r.offset < sealed_end])] + [
        r.offset for r in before if r.offset >= sealed_end
    ]
    result = engine.compact(ns, 0, map_budget_bytes=10 * SLOT_BYTES, manual=True)
    assert result.rounds > 3
    assert not result.more
    after = read_all(engine, ns)
    assert [r.offset for r in after] == sorted(expected)
    cleaned = [r for r in after if r.offset < sealed_end and r.key and r.key.startswith(b"k")]
    assert len(cleaned) == keys and {r.key for r in cleaned} == {b"k%02d" % k for k in range(keys)}
    assert all(r.value and r.value.startswith(b"v4-") for r in cleaned)
    by_offset = {r.offset: r for r in before}
    assert all(r == by_offset[r.offset] for r in after)  # offsets and contents unchanged
    assert_verified(engine, ns)
    counters = engine.stats().counters
    assert counters["compaction_runs_total"] == 1
    assert counters["compaction_records_removed_total"] == result.records_removed > 0
    assert counters["compaction_bytes_reclaimed_total"] == result.bytes_reclaimed > 0


def test_fetch_at_removed_offset_returns_next(engine: StorageAdapter) -> None:
    ns = make_compacted(engine)
    put(engine, ns, [(b"a", b"1" * 100), (b"b", b"1" * 100), (b"a", b"2" * 100), (b"c", b"1" * 100)])
    put(engine, ns, [(b"b", b"2" * 100)])
    seal(engine, ns)
    engine.compact(ns, manual=True)
    page = engine.read(ns, 0, 1, max_records=1)  # offset 1 (b=1) was superseded by offset 4
    assert page.records[0].offset == 2
    page = engine.read(ns, 0, 0, max_records=1)  # offset 0 (a=1) too: next is 2
    assert page.records[0].offset == 2
    assert engine.read_key(ns, 0, b"b").offset == 4  # type: ignore[union-attr]
    assert engine.read_key(ns, 0, b"a").offset == 2  # type: ignore[union-attr]
    assert_verified(engine, ns)


def test_tombstones_survive_first_clean_then_go(engine: StorageAdapter, clock: ManualClock) -> None:
    ns = make_compacted(engine, delete_retention_ms=DAY_MS)
    put(engine, ns, [(b"a", b"1" * 100), (b"b", b"1" * 100), (b"a", None)])
    seal(engine, ns)
    engine.compact(ns, manual=True)
    kept = [r for r in read_all(engine, ns) if r.key in (b"a", b"b")]
    assert [(r.key, r.value is None) for r in kept] == [(b"b", False), (b"a", True)]
    assert engine.read_key(ns, 0, b"a").value is None  # type: ignore[union-attr]
    clock.advance(DAY_MS - 1)
    engine.compact(ns, manual=True)
    assert any(r.key == b"a" for r in read_all(engine, ns))
    clock.advance(2)
    engine.compact(ns, manual=True)
    assert [r.key for r in read_all(engine, ns) if r.key in (b"a", b"b")] == [b"b"]
    assert engine.read_key(ns, 0, b"a") is None
    assert_verified(engine, ns)


def test_active_segment_and_min_lag_never_cleaned(engine: StorageAdapter, clock: ManualClock) -> None:
    ns = make_compacted(engine, min_compaction_lag_ms=60_000)
    put(engine, ns, [(b"a", b"%d" % i * 50) for i in range(5)])
    seal(engine, ns)
    clock.advance(120_000)
    put(engine, ns, [(b"a", b"new%d" % i * 50) for i in range(5)])  # recent: within the lag
    seal(engine, ns)
    put(engine, ns, [(b"a", b"active%d" % i) for i in range(3)])  # stays in the active segment
    segs = engine.list_segments(ns, 0)
    recent_base = segs[1].base_offset
    active_base = segs[-1].base_offset
    before = read_all(engine, ns)
    engine.compact(ns, manual=True)
    after = read_all(engine, ns)
    a_offsets = [r.offset for r in after if r.key == b"a"]
    # The map covers only the old segment: its latest "a" stays, the newer ones are untouched.
    assert [o for o in a_offsets if o < recent_base] == [4]
    assert [r.offset for r in before if r.offset >= recent_base] == [r.offset for r in after if r.offset >= recent_base]
    assert any(o >= active_base for o in a_offsets)
    assert_verified(engine, ns)


def test_max_lag_forces_clean(engine: StorageAdapter, clock: ManualClock) -> None:
    ns = make_compacted(engine, min_cleanable_dirty_ratio=0.9, max_compaction_lag_ms=3_600_000)
    put(engine, ns, [(b"k%d" % i, b"v" * 100) for i in range(30)])
    seal(engine, ns)
    assert engine.compact(ns, manual=True).rounds >= 1  # everything clean now
    put(engine, ns, [(b"k0", b"w" * 100)])
    seal(engine, ns)
    r = engine.compact(ns)
    assert r.skipped == "not_due"  # dirty share small
    clock.advance(3_600_001)
    r = engine.compact(ns)
    assert r.skipped is None and r.rounds >= 1 and r.records_removed >= 1
    assert [r.value for r in read_all(engine, ns) if r.key == b"k0"] == [b"w" * 100]
    assert_verified(engine, ns)


def test_dirty_ratio_trigger(engine: StorageAdapter) -> None:
    ns = make_compacted(engine, min_cleanable_dirty_ratio=0.5)
    put(engine, ns, [(b"k%d" % (i % 4), b"v" * 100) for i in range(20)])
    seal(engine, ns)
    r = engine.compact(ns)
    assert r.skipped is None and r.records_removed > 0
    assert engine.compact(ns).skipped == "not_due"  # nothing dirty any more


def test_dirtiest_shard_first(engine: StorageAdapter) -> None:
    ns = make_compacted(engine, shards=2, min_cleanable_dirty_ratio=0.1)
    for shard, reps in ((0, 2), (1, 6)):
        put(engine, ns, [(b"k%d" % i, b"v" * 100) for i in range(10)], shard=shard)
        seal(engine, ns, shard)
        engine.compact(ns, shard, manual=True)
        for _ in range(reps):
            put(engine, ns, [(b"k%d" % i, b"w" * 100) for i in range(10)], shard=shard)
        seal(engine, ns, shard)
    ranges = engine.compaction_ranges(ns)  # type: ignore[attr-defined]
    assert ranges[1]["dirty_ratio"] > ranges[0]["dirty_ratio"]
    first = engine.compact_dirtiest(limit_shards=1)
    assert (first.namespace, first.shard) == (ns, 1) and first.more
    second = engine.compact_dirtiest(limit_shards=1)
    assert (second.namespace, second.shard) == (ns, 0)
    assert engine.compact_dirtiest().skipped == "not_due"


def test_rocketmq_1024_records_mod_10(engine: StorageAdapter) -> None:
    ns = make_compacted(engine, segment_bytes=4096)
    for i in range(0, 1024, 64):
        engine.append(ns, 0, [NewRecord(b"v%d" % o, key=b"%d" % (o % 10)) for o in range(i, i + 64)])
    engine.append(ns, 0, [])
    seal_base = 1024
    seal(engine, ns)
    engine.compact(ns, manual=True, map_budget_bytes=1 << 20)
    kept = [r.offset for r in read_all(engine, ns) if r.offset < seal_base]
    assert kept == list(range(1014, 1024))
    assert_verified(engine, ns)


def test_dry_run_estimate_matches_compact(engine: StorageAdapter) -> None:
    ns = make_compacted(engine)
    put(engine, ns, [(b"k%d" % (i % 7), b"v%d" % i * 20) for i in range(60)])
    put(
        engine,
        ns,
        [
            (b"k1", None),
            (
                b"k2",
                b"x",
            ),
        ],
    )
    seal(engine, ns)
    before = read_all(engine, ns)
    est = engine.compaction_estimate(ns)
    assert read_all(engine, ns) == before  # the estimate changed nothing
    r = engine.compact(ns, manual=True)
    assert est.records_removable == r.records_removed > 0
    assert est.reclaimable_bytes == r.bytes_reclaimed > 0
    assert est.bytes_before == r.bytes_before
    assert est.bytes_after == r.bytes_after == r.bytes_before - r.bytes_reclaimed
    assert engine.compaction_estimate(ns).records_removable == 0


def test_compact_with_plan_equals_compact(engine: StorageAdapter) -> None:
    a, b = make_compacted(engine, "a"), make_compacted(engine, "b")
    for ns in (a, b):
        put(engine, ns, [(b"k%d" % (i % 9), b"v%d" % i * 30) for i in range(80)])
        put(engine, ns, [(b"k3", None)])
        seal(engine, ns)
    engine.compact(a, manual=True)
    segments = [s for s in engine.list_segments(b, 0) if s.state is SegmentState.SEALED]
    records = read_all(engine, b)
    sealed = [r for r in records if r.offset < segments[-1].last_offset + 1]
    keep_set = set(reference(sealed))
    plan = {s.base_offset: [o for o in keep_set if s.base_offset <= o <= s.last_offset] for s in segments}
    r = engine.compact_with_plan(b, 0, plan)
    assert r.records_removed > 0
    assert read_all(engine, a) == read_all(engine, b)
    assert_verified(engine, a, b)
    assert engine.compaction_estimate(b).records_removable == 0


def test_policy_delete_only_skips(engine: StorageAdapter) -> None:
    engine.create_namespace("d", 1, NamespacePolicy(retention_ms=None))
    assert engine.compact("d", manual=True).skipped == "policy"


def test_expired_records_dropped(engine: StorageAdapter, clock: ManualClock) -> None:
    ns = make_compacted(engine)
    put(engine, ns, [(b"a", b"1" * 100)], expire_at=T0 + 1000)
    put(engine, ns, [(b"b", b"1" * 100)])
    seal(engine, ns)
    clock.advance(2000)
    r = engine.compact(ns, manual=True)
    assert r.records_removed >= 1
    assert [x.key for x in read_all(engine, ns) if x.key in (b"a", b"b")] == [b"b"]
    assert_verified(engine, ns)


def test_persistent_checkpoint(persistent_adapter_name: str, open_adapter: Any, clock: ManualClock) -> None:
    clock.set(T0)
    engine = open_adapter(lifecycle_worker=False, disk_capacity_bytes=1 << 40)
    ns = make_compacted(engine)
    put(engine, ns, [(b"k%d" % (i % 5), b"v" * 100) for i in range(30)])
    seal(engine, ns)
    engine.compact(ns, manual=True)
    first_dirty = engine.compaction_ranges(ns)[0]["first_dirty"]
    assert first_dirty > 0
    engine.close()
    engine = open_adapter(lifecycle_worker=False, disk_capacity_bytes=1 << 40)
    assert engine.compaction_ranges(ns)[0]["first_dirty"] == first_dirty
    assert engine.compact(ns).skipped == "not_due"
    assert_verified(engine, ns)
