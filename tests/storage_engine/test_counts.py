"""The lifecycle counts are named in a few typed places; they must agree (issue 17).

``LIFECYCLE_COUNTS`` lists the counts of a :class:`LifecycleResult` that add up over steps;
:class:`ShardWork` is what a shard did for one step (those counts plus the bytes of the
files it removed, which results report as ``bytes_reclaimed`` of the cleaner only);
compaction adds ``COMPACTION_COUNTS``, offload (tiered storage) ``OFFLOAD_COUNTS``, recall ``RECALL_COUNTS``. A count
added to one and not the others would be summed in one place and silently dropped in another.
"""

from __future__ import annotations

from dataclasses import fields

from storage_engine.api import COMPACTION_COUNTS, LIFECYCLE_COUNTS, OFFLOAD_COUNTS, RECALL_COUNTS, LifecycleResult
from storage_engine.compaction.cleaner import CompactionTotals
from storage_engine.lifecycle.sweeps import add_results
from storage_engine.rules.work import ShardWork, sum_work


def test_shard_work_has_exactly_the_lifecycle_counts() -> None:
    assert sorted(f.name for f in fields(ShardWork)) == sorted((*LIFECYCLE_COUNTS, "files_removed_bytes"))


def test_every_count_is_an_integer_field_of_a_result_starting_at_zero() -> None:
    result = LifecycleResult(operation="x")
    names = {f.name for f in fields(LifecycleResult)}
    for name in (*LIFECYCLE_COUNTS, *COMPACTION_COUNTS, *OFFLOAD_COUNTS, *RECALL_COUNTS):
        assert name in names
        assert getattr(result, name) == 0


def test_compaction_totals_are_shard_work_plus_the_compaction_counts() -> None:
    names = tuple(f.name for f in fields(CompactionTotals))
    assert names == (*(f.name for f in fields(ShardWork)), *COMPACTION_COUNTS, "more")


def test_summing_work_and_results_keeps_every_count() -> None:
    work = ShardWork(**{name: i + 1 for i, name in enumerate(f.name for f in fields(ShardWork))})
    totals: dict[str, int] = {}
    sum_work(totals, work)
    sum_work(totals, work)
    assert totals == {f.name: 2 * getattr(work, f.name) for f in fields(ShardWork)}
    values = {name: i + 1 for i, name in enumerate((*LIFECYCLE_COUNTS, *COMPACTION_COUNTS))}
    result = LifecycleResult(operation="compact", **values)
    merged: dict[str, int] = {}
    add_results(merged, result, COMPACTION_COUNTS)
    add_results(merged, result, COMPACTION_COUNTS)
    assert merged == {name: 2 * v for name, v in values.items()}
