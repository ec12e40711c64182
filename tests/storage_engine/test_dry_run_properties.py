"""Property tests of every dry run (DESIGN §3 "Dry runs"): on any state, a dry run changes nothing,
answers in one call (``more`` false), and its counts equal the sums the real operation then reports,
called again while ``more``, on the same state.

One test per operation that changes data — TTL scan, retention, reclamation, file cleaning (on its
hour, and the manual trigger), compaction, the background cleaner (``compact_dirtiest``), message
TTL, backlog quota (each policy), offload and recall (a ``file://`` tier) — per namespace and
node-wide where it takes both. Hypothesis draws the state: namespaces and shards, policies,
batches of records with and without TTLs and keys, the clock moving between them, subscriptions
with cursors, and for the tier operations offloaded segments. Everything is read back before and
after the dry run (:func:`fingerprint`): records, segments with their figures, shard bounds,
cursors, the segment files and the objects in the tier. The real runs take small budgets
(``limit``) so they need several calls, which the dry run must add up to.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage_engine import open_engine
from storage_engine.api import LifecycleResult, NewRecord, SegmentTier, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.config import Durability, EngineConfig
from storage_engine.policies.policy import HOUR_MS, NamespacePolicy, NodePolicy
from tests.storage_engine.lifecycle_util import assert_verified, read_all

T0 = 1_700_000_000_000
# What a dry run predicts (DESIGN §3 "Dry runs": records, segments deleted and rewritten, bytes,
# cursors moved, segments offloaded or recalled). ``scanned`` (what a call looked at) and
# ``files_removed`` (``.deleted`` files of earlier calls a real step removes on its way) are not
# the operation's effect; compaction's own figures (records_written, bytes_before/after, rounds)
# are the compaction estimate's.
COUNTS = (
    "expired_records",
    "segments_deleted",
    "segments_rewritten",
    "records_removed",
    "bytes_reclaimed",
    "forced_deletes",
    "rolled",
    "cursors_moved",
    "messages_acknowledged",
    "segments_offloaded",
    "bytes_offloaded",
    "local_copies_dropped",
    "local_bytes_dropped",
    "segments_recalled",
    "bytes_recalled",
)
EXAMPLES = settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
NODE = NodePolicy(
    file_reserved_ms=2_000,
    file_delete_delay_ms=0,
    delete_interval_ms=0,
    delete_batch_max=2,
    delete_when="04",
)


# -- the state ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Batch:
    namespace: int
    shard: int
    count: int
    size: int
    keys: int | None  # records get one of this many keys (None: no key)
    ttl_ms: int | None  # an explicit expire_at this far from now
    advance_ms: int  # the clock moves on after the batch


@dataclass(frozen=True)
class State:
    policies: tuple[NamespacePolicy, ...]
    shards: tuple[int, ...]
    batches: tuple[Batch, ...]
    subscriptions: tuple[tuple[tuple[str, float], ...], ...]  # per namespace: (name, acknowledged share)
    final_advance_ms: int
    extra: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def names(self) -> list[str]:
        return [f"n{i}" for i in range(len(self.policies))]


def policies(*, compact: bool = False, tiered: bool = False) -> st.SearchStrategy[NamespacePolicy]:
    cleanup = st.just("compact") if compact else st.sampled_from(["delete", "delete", "compact,delete"])
    return st.builds(
        NamespacePolicy,
        cleanup_policy=cleanup,
        ttl_ms=st.sampled_from([None, 1_500, 6_000]),
        retention_ms=st.none() if tiered else st.sampled_from([None, 4_000, 20_000]),  # local ≤ total retention
        retention_bytes=st.sampled_from([None, 3_000]),
        segment_bytes=st.sampled_from([1_024, 2_048]),
        segment_ms=st.sampled_from([1_000, 60_000]),
        reclaim_dead_ratio=st.sampled_from([0.2, 0.5]),
        min_cleanable_dirty_ratio=st.sampled_from([0.01, 0.3]),
        min_compaction_lag_ms=st.just(0),
        delete_retention_ms=st.sampled_from([0, 5_000]),
        max_delete_per_scan=st.just(100_000),
        remote_storage_enabled=st.just(tiered),
        local_retention_ms=st.sampled_from([None, 0, 5_000]) if tiered else st.none(),
        local_retention_bytes=st.sampled_from([None, 2_500]) if tiered else st.none(),
    )


@st.composite
def states(draw: st.DrawFn, *, compact: bool = False, tiered: bool = False) -> State:
    n = draw(st.integers(1, 2))
    pols = tuple(draw(policies(compact=compact, tiered=tiered)) for _ in range(n))
    shards = tuple(draw(st.integers(1, 2)) for _ in range(n))
    batch = st.builds(
        Batch,
        namespace=st.integers(0, n - 1),
        shard=st.integers(0, 1),
        count=st.integers(1, 6),
        size=st.integers(10, 300),
        keys=st.sampled_from([None, 2, 5]),
        ttl_ms=st.sampled_from([None, None, 500, 3_000, 30_000]),
        advance_ms=st.sampled_from([0, 0, 300, 1_200, 4_000]),
    )
    batches = tuple(draw(st.lists(batch, min_size=1, max_size=14)))
    subs = tuple(
        tuple(
            draw(
                st.lists(st.tuples(st.sampled_from(["a", "b"]), st.floats(0, 1)), max_size=2, unique_by=lambda t: t[0])
            )
        )
        for _ in range(n)
    )
    return State(pols, shards, batches, subs, draw(st.sampled_from([0, 1_000, 5_000, 25_000])))


def build(adapter: StorageAdapter, clock: ManualClock, state: State) -> None:
    names = state.names()
    for name, policy, shards in zip(names, state.policies, state.shards, strict=True):
        adapter.create_namespace(name, shards, policy)
    for name, subs in zip(names, state.subscriptions, strict=True):
        for sub, _ in subs:
            adapter.create_subscription(name, sub)
    for b in state.batches:
        name, policy = names[b.namespace], state.policies[b.namespace]
        shard = b.shard % state.shards[b.namespace]
        keys = b.keys or (3 if policy.compacts else None)  # a compacted namespace takes keyed records only
        now = clock.now_ms()
        records = [
            NewRecord(
                b"%d:" % i + b"v" * b.size,
                key=None if keys is None else b"k%d" % ((i * 7 + b.size) % keys),
                expire_at=None if b.ttl_ms is None else now + b.ttl_ms,
            )
            for i in range(b.count)
        ]
        adapter.append(name, shard, records)
        clock.advance(b.advance_ms)
    for name, subs, shards in zip(names, state.subscriptions, state.shards, strict=True):
        for sub, share in subs:
            for shard in range(shards):
                end = adapter.shard_stats(name, shard).end_offset
                if int(end * share) - 1 >= 0:
                    adapter.acknowledge(name, sub, shard, int(end * share) - 1)
    clock.advance(state.final_advance_ms)


# -- running it ---------------------------------------------------------------------------------------
@contextmanager
def engine_on(
    state: State, clock: ManualClock, adapter: str = "segment", node: NodePolicy = NODE
) -> Iterator[tuple[StorageAdapter, Path]]:
    with tempfile.TemporaryDirectory(prefix="dry-run-") as tmp:
        root = Path(tmp)
        config = EngineConfig(
            data_dir=root / "data",
            adapter=adapter,
            durability=Durability.NONE,
            lifecycle_worker=False,
            disk_capacity_bytes=1 << 40,
            node_policy=node,
            tier_uri=(root / "tier").as_uri(),
        )
        engine = open_engine(config, clock)  # NODE's delete_interval_ms is 0: the cleaner never sleeps
        try:
            build(engine, clock, state)
            yield engine, root
        finally:
            engine.close()


def fingerprint(adapter: StorageAdapter, root: Path) -> tuple[Any, ...]:
    """Everything a dry run must leave as it was."""
    shards: list[Any] = []
    cursors: list[Any] = []
    for info in adapter.list_namespaces():
        for s in range(info.shards):
            records = [(r.offset, r.key, r.value, r.expire_at) for r in read_all(adapter, info.name, s)]
            shards.append(
                (info.name, s, records, adapter.list_segments(info.name, s), adapter.shard_stats(info.name, s))
            )
        cursors.append([(sub.name, sub.cursors) for sub in adapter.list_subscriptions(info.name)])
    files = sorted((str(p.relative_to(root)), p.stat().st_size) for p in (root / "data").rglob("*.log*"))
    objects = sorted((str(p.relative_to(root)), p.stat().st_size) for p in (root / "tier").rglob("*") if p.is_file())
    return shards, cursors, files, objects


def counts(results: list[LifecycleResult]) -> dict[str, int]:
    return {name: sum(getattr(r, name) for r in results) for name in COUNTS}


def to_completion(step: Callable[[], LifecycleResult]) -> list[LifecycleResult]:
    """The real operation as a control-plane run drives it: again while ``more``."""
    results = [step()]
    while results[-1].more:
        assert len(results) < 500, results[-1]
        results.append(step())
    return results


def check(
    adapter: StorageAdapter,
    root: Path,
    dry_step: Callable[[], LifecycleResult],
    real_step: Callable[[], LifecycleResult],
) -> tuple[LifecycleResult, list[LifecycleResult]]:
    before = fingerprint(adapter, root)
    dry = dry_step()
    assert fingerprint(adapter, root) == before, "a dry run changed the store"
    assert not dry.more, dry
    real = to_completion(real_step)
    assert counts([dry]) == counts(real), (dry, real)
    assert_verified(adapter)
    return dry, real


ADAPTERS = ["segment", "memory", "rocksdb"]


# -- the operations -----------------------------------------------------------------------------------
@pytest.mark.parametrize("adapter_name", ADAPTERS)
@pytest.mark.parametrize("node_wide", [False, True])
@EXAMPLES
@given(state=states())
def test_expire_scan(adapter_name: str, node_wide: bool, state: State) -> None:
    clock = ManualClock(T0)
    with engine_on(state, clock, adapter_name) as (adapter, root):
        ns = None if node_wide else "n0"
        check(
            adapter,
            root,
            lambda: adapter.expire_scan(ns, manual=True, dry_run=True),
            lambda: adapter.expire_scan(ns, limit=3, manual=True),
        )


@pytest.mark.parametrize("adapter_name", ADAPTERS)
@pytest.mark.parametrize("node_wide", [False, True])
@EXAMPLES
@given(state=states())
def test_retention(adapter_name: str, node_wide: bool, state: State) -> None:
    clock = ManualClock(T0)
    with engine_on(state, clock, adapter_name) as (adapter, root):
        ns = None if node_wide else "n0"
        check(adapter, root, lambda: adapter.apply_retention(ns, dry_run=True), lambda: adapter.apply_retention(ns))


@pytest.mark.parametrize("adapter_name", ADAPTERS)
@pytest.mark.parametrize("node_wide", [False, True])
@EXAMPLES
@given(state=states(), scan_first=st.booleans())
def test_reclaim(adapter_name: str, node_wide: bool, state: State, scan_first: bool) -> None:
    clock = ManualClock(T0)
    with engine_on(state, clock, adapter_name) as (adapter, root):
        if scan_first:  # records marked dead make segments worth rewriting
            to_completion(lambda: adapter.expire_scan(None, manual=True))
        ns = None if node_wide else "n0"
        check(
            adapter,
            root,
            lambda: adapter.reclaim(ns, manual=True, dry_run=True),
            lambda: adapter.reclaim(ns, limit=1, manual=True),
        )


@pytest.mark.parametrize("adapter_name", ADAPTERS)
@pytest.mark.parametrize("manual", [False, True])
@EXAMPLES
@given(state=states())
def test_clean_files(adapter_name: str, manual: bool, state: State) -> None:
    """On its hour (``delete_when``) and by the manual trigger (force delete), ``delete_batch_max``
    files a real call."""
    clock = ManualClock(T0)
    hour = f"{(T0 + sum(b.advance_ms for b in state.batches) + state.final_advance_ms) // HOUR_MS % 24:02d}"
    node = replace(NODE, delete_when="04" if manual else hour)
    with engine_on(state, clock, adapter_name, node) as (adapter, root):
        check(adapter, root, lambda: adapter.clean_files(manual, dry_run=True), lambda: adapter.clean_files(manual))


@pytest.mark.parametrize("adapter_name", ADAPTERS)
@EXAMPLES
@given(state=states(compact=True))
def test_compact(adapter_name: str, state: State) -> None:
    clock = ManualClock(T0)
    with engine_on(state, clock, adapter_name) as (adapter, root):
        check(
            adapter,
            root,
            lambda: adapter.compact("n0", manual=True, dry_run=True),
            lambda: adapter.compact("n0", manual=True),
        )


@pytest.mark.parametrize("adapter_name", ADAPTERS)
@EXAMPLES
@given(state=states(compact=True))
def test_compact_dirtiest(adapter_name: str, state: State) -> None:
    """The background cleaner: one shard a real call, every due shard in the dry run."""
    clock = ManualClock(T0)
    with engine_on(state, clock, adapter_name) as (adapter, root):
        check(adapter, root, lambda: adapter.compact_dirtiest(1, dry_run=True), lambda: adapter.compact_dirtiest(1))


@pytest.mark.parametrize("adapter_name", ADAPTERS)
@pytest.mark.parametrize("node_wide", [False, True])
@EXAMPLES
@given(state=states())
def test_subscription_ttl(adapter_name: str, node_wide: bool, state: State) -> None:
    clock = ManualClock(T0)
    with engine_on(state, clock, adapter_name) as (adapter, root):
        ns = None if node_wide else "n0"
        dry, _ = check(
            adapter,
            root,
            lambda: adapter.expire_subscriptions(ns, dry_run=True),
            lambda: adapter.expire_subscriptions(ns),
        )
        assert dry.expired_records == 0  # cursors move: nothing is marked dead


@pytest.mark.parametrize("adapter_name", ADAPTERS)
@pytest.mark.parametrize("quota_policy", ["consumer_backlog_eviction", "producer_request_hold", "producer_exception"])
@EXAMPLES
@given(state=states(), quota=st.sampled_from([("bytes", 400), ("bytes", 2_000), ("seconds", 2), ("seconds", 10)]))
def test_backlog_quota(adapter_name: str, quota_policy: str, state: State, quota: tuple[str, int]) -> None:
    """The periodic check; the quota is set once the state is built (so appends are not held)."""
    clock = ManualClock(T0)
    with engine_on(state, clock, adapter_name) as (adapter, root):
        kind, limit = quota
        base = adapter.get_namespace("n0").policy
        adapter.update_namespace(
            "n0",
            replace(
                base,
                retention_ms=None,
                retention_bytes=None,
                backlog_quota_bytes=limit if kind == "bytes" else None,
                backlog_quota_seconds=limit if kind == "seconds" else None,
                backlog_quota_policy=quota_policy,
            ),
        )
        dry, real = check(
            adapter,
            root,
            lambda: adapter.enforce_backlog_quota("n0", dry_run=True),
            lambda: adapter.enforce_backlog_quota("n0"),
        )
        if quota_policy != "consumer_backlog_eviction":  # the append path's policies move nothing here
            assert counts([dry]) == counts(real) == dict.fromkeys(COUNTS, 0) | {"rolled": 0}


@pytest.mark.parametrize("node_wide", [False, True])
@EXAMPLES
@given(state=states(tiered=True), first=st.integers(0, 3))
def test_offload(node_wide: bool, state: State, first: int) -> None:
    """Against a ``file://`` tier; ``first`` segments are offloaded before (some state is BOTH or
    REMOTE already), then the dry run and the real steps (one segment a call)."""
    clock = ManualClock(T0)
    with engine_on(state, clock) as (adapter, root):
        if first:
            adapter.offload(None, limit=first)
        ns = None if node_wide else "n0"
        check(adapter, root, lambda: adapter.offload(ns, dry_run=True), lambda: adapter.offload(ns, limit=1))


@pytest.mark.parametrize("node_wide", [False, True])
@EXAMPLES
@given(state=states(tiered=True), keep=st.sampled_from(["all", "time", "bytes"]))
def test_recall(node_wide: bool, state: State, keep: str) -> None:
    """Segments offloaded with their local copies dropped, then a policy that keeps all, or some
    (by local time or size), local again; real steps recall one segment a call."""
    clock = ManualClock(T0)
    with engine_on(state, clock) as (adapter, root):
        names = state.names()
        for name in names:
            adapter.update_namespace(name, replace(adapter.get_namespace(name).policy, local_retention_ms=0))
        to_completion(lambda: adapter.offload(None))
        for name in names:
            policy = adapter.get_namespace(name).policy
            if keep == "all":
                policy = replace(policy, remote_storage_enabled=False, local_retention_ms=None)
            elif keep == "time":
                policy = replace(policy, local_retention_ms=10_000)
            else:
                policy = replace(policy, local_retention_ms=None, local_retention_bytes=3_000)
            adapter.update_namespace(name, policy)
        ns = None if node_wide else "n0"
        remote = sum(
            seg.tier is SegmentTier.REMOTE
            for name in ([ns] if ns else names)
            for s in range(adapter.get_namespace(name).shards)
            for seg in adapter.list_segments(name, s)
        )
        dry, _ = check(adapter, root, lambda: adapter.recall(ns, dry_run=True), lambda: adapter.recall(ns, limit=1))
        assert dry.segments_recalled <= remote  # never more than there is (the looping dry run counted 1,651 of 19)
