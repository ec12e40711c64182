"""The compaction key map's memory budget is honoured, never silently enlarged: a budget
below the smallest map is refused (per call and in the node policy, and by the node with
400), and a budget that fits one key cleans one key per round."""

from __future__ import annotations

import pytest

from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.compaction.keymap import KeyMap
from storage_engine.errors import InvalidArgumentError, PolicyValidationError
from storage_engine.node_api.client import NodeClient
from storage_engine.policies.keymap_size import MIN_MAP_BUDGET_BYTES, SLOT_BYTES
from storage_engine.policies.policy import NodePolicy, node_policy_from, validate_node_policy
from tests.storage_engine.lifecycle_util import assert_verified, make_ns, read_all

KEYS = 6
VERSIONS = 3
TWO_KEYS = MIN_MAP_BUDGET_BYTES + SLOT_BYTES  # 3 slots: int(3 × 0.9) = 2 keys


def test_the_smallest_map_holds_one_key_within_its_budget() -> None:
    m = KeyMap(MIN_MAP_BUDGET_BYTES)
    assert (m.capacity, m.memory_bytes) == (1, MIN_MAP_BUDGET_BYTES)
    assert m.put(b"a", 0) and m.put(b"a", 1)  # the key it holds still updates
    assert not m.put(b"b", 2)
    assert KeyMap(TWO_KEYS).capacity == 2
    with pytest.raises(ValueError, match=str(MIN_MAP_BUDGET_BYTES)):
        KeyMap(MIN_MAP_BUDGET_BYTES - 1)
    for budget in range(MIN_MAP_BUDGET_BYTES, 8_192, 7):  # the table and bitmap never exceed the budget
        assert KeyMap(budget).memory_bytes <= budget


@pytest.fixture
def ns(lc_adapter: StorageAdapter, clock: ManualClock) -> str:
    """KEYS keys, each written VERSIONS times in a row, all sealed: one key per group of offsets."""
    name = make_ns(lc_adapter, "c", cleanup_policy="compact")
    for k in range(KEYS):
        lc_adapter.append(name, 0, [NewRecord(b"v%d" % v, key=b"k%d" % k) for v in range(VERSIONS)])
    _, shards = lc_adapter.lifecycle_namespace(name)  # type: ignore[attr-defined]
    assert shards[0].roll_empty(clock.now_ms())
    return name


def latest_only(adapter: StorageAdapter, ns: str) -> None:
    kept = read_all(adapter, ns)
    assert [(r.key, r.value) for r in kept] == [(b"k%d" % k, b"v%d" % (VERSIONS - 1)) for k in range(KEYS)]
    assert_verified(adapter, ns)


@pytest.mark.parametrize("budget", [0, 1, MIN_MAP_BUDGET_BYTES - 1])
def test_a_budget_below_the_smallest_map_is_refused(lc_adapter: StorageAdapter, ns: str, budget: int) -> None:
    for call in (
        lambda: lc_adapter.compact(ns, manual=True, map_budget_bytes=budget),
        lambda: lc_adapter.compact(ns, manual=True, dry_run=True, map_budget_bytes=budget),
        lambda: lc_adapter.compact_dirtiest(map_budget_bytes=budget),
    ):
        with pytest.raises(InvalidArgumentError) as err:
            call()
        assert err.value.field == "map_budget_bytes"
        assert str(MIN_MAP_BUDGET_BYTES) in err.value.rule
    assert len(read_all(lc_adapter, ns)) == KEYS * VERSIONS  # nothing was touched


def test_a_one_key_budget_cleans_one_key_per_round(lc_adapter: StorageAdapter, ns: str) -> None:
    estimate = lc_adapter.compact(ns, manual=True, dry_run=True, map_budget_bytes=MIN_MAP_BUDGET_BYTES)
    assert estimate.rounds == KEYS
    result = lc_adapter.compact(ns, manual=True, map_budget_bytes=MIN_MAP_BUDGET_BYTES)
    assert (result.rounds, result.more, result.records_removed) == (KEYS, False, KEYS * (VERSIONS - 1))
    latest_only(lc_adapter, ns)


def test_max_rounds_stops_a_one_key_budget_and_the_next_call_resumes(lc_adapter: StorageAdapter, ns: str) -> None:
    first = lc_adapter.compact(ns, manual=True, map_budget_bytes=MIN_MAP_BUDGET_BYTES, max_rounds=KEYS - 2)
    assert (first.rounds, first.more, first.records_removed) == (KEYS - 2, True, (KEYS - 2) * (VERSIONS - 1))
    second = lc_adapter.compact(ns, manual=True, map_budget_bytes=MIN_MAP_BUDGET_BYTES)
    assert (second.rounds, second.more, second.records_removed) == (2, False, 2 * (VERSIONS - 1))
    latest_only(lc_adapter, ns)


def test_a_two_key_budget_takes_half_the_rounds(lc_adapter: StorageAdapter, ns: str) -> None:
    result = lc_adapter.compact(ns, manual=True, map_budget_bytes=TWO_KEYS)
    assert (result.rounds, result.more) == (KEYS // 2, False)
    latest_only(lc_adapter, ns)


def test_the_node_budget_has_the_same_minimum(lc_adapter: StorageAdapter, ns: str) -> None:
    with pytest.raises(PolicyValidationError) as err:
        validate_node_policy(NodePolicy(compaction_map_budget_bytes=MIN_MAP_BUDGET_BYTES - 1))
    assert str(MIN_MAP_BUDGET_BYTES) in err.value.errors["compaction_map_budget_bytes"]
    with pytest.raises(PolicyValidationError):
        lc_adapter.set_node_policy(NodePolicy(compaction_map_budget_bytes=MIN_MAP_BUDGET_BYTES - 1))
    assert lc_adapter.node_policy().compaction_map_budget_bytes == NodePolicy().compaction_map_budget_bytes
    lc_adapter.set_node_policy(node_policy_from({"compaction_map_budget_bytes": MIN_MAP_BUDGET_BYTES}))
    result = lc_adapter.compact(ns, manual=True)  # the node's budget, honoured as given
    assert (result.rounds, result.more) == (KEYS, False)
    latest_only(lc_adapter, ns)


def test_the_node_answers_400_for_a_budget_below_the_minimum(node) -> None:  # type: ignore[no-untyped-def]
    with NodeClient(node.url, node.token) as client:
        with pytest.raises(PolicyValidationError) as err:  # the client rebuilds the node's 400 answer
            client.set_node_policy({"compaction_map_budget_bytes": MIN_MAP_BUDGET_BYTES - 1})
        assert str(MIN_MAP_BUDGET_BYTES) in err.value.errors["compaction_map_budget_bytes"]
        client.set_node_policy({"compaction_map_budget_bytes": MIN_MAP_BUDGET_BYTES})  # the minimum itself is fine
