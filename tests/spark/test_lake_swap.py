"""Replacing a compacted segment in the lake is never visible half done, and a killed export is repaired.

A real node compacts a sealed segment that spans two UTC days down to part of its first day's records, so
its first day's leaf is replaced and its second day's emptied. The export runs with a hook that, before each
step of putting rows in place, reads the whole lake as a reader would (pyarrow, and Spark's Parquet reader,
which checks Hadoop's checksum files): every leaf of the segment holds exactly its old rows or its new ones,
no record is there twice, every other segment's rows are untouched. A hook that raises in the middle of the
swap stands for a killed export: the lake is consistent as it is left, and the next run finishes the job.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from pyspark.sql import SparkSession

from spark_jobs.jobs.lake_export import pyarrow_partitioning, run_export
from spark_jobs.lake_swap import STAGING_DIR
from spark_jobs.segments import SegmentFile, decode_segment_table
from spark_jobs.source import node_segment_files
from storage_engine.node_api.client import NodeClient
from tests.spark.engine_data import Appended, node_on, write_segments
from tests.spark.lifecycle_expect import utc_day

pytestmark = pytest.mark.spark

Leaf = tuple[str, int, int, object]  # namespace, shard, segment base, date


@dataclass
class Compacted:
    lake: Path
    victim: SegmentFile
    old: dict[Leaf, set[int]]  # the victim's leaves after the first export
    new: dict[Leaf, set[int]]  # the same leaves as the rewritten file has them (empty: emptied)
    others: Counter[tuple[object, ...]]  # every other segment's rows


def _lake_rows(lake: Path) -> list[dict[str, object]]:
    dataset = ds.dataset(str(lake), format="parquet", partitioning=pyarrow_partitioning())
    return dataset.to_table(columns=["namespace", "shard", "offset", "segment_base", "date"]).to_pylist()


def _leaves(rows: list[dict[str, object]], victim: SegmentFile) -> dict[Leaf, set[int]]:
    leaves: dict[Leaf, set[int]] = {}
    for r in rows:
        if (r["namespace"], r["shard"], r["segment_base"]) == (victim.namespace, victim.shard, victim.base_offset):
            leaf = (victim.namespace, victim.shard, victim.base_offset, r["date"])
            leaves.setdefault(leaf, set()).add(r["offset"])  # type: ignore[arg-type]
    return leaves


def _others(rows: list[dict[str, object]], victim: SegmentFile) -> Counter[tuple[object, ...]]:
    key = (victim.namespace, victim.shard, victim.base_offset)
    return Counter(tuple(r.values()) for r in rows if (r["namespace"], r["shard"], r["segment_base"]) != key)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Appended]]:
    data_dir = tmp_path_factory.mktemp("swap") / "data"
    return data_dir, write_segments(data_dir)


@pytest.fixture
def compacted(
    spark: SparkSession, source: tuple[Path, list[Appended]], tmp_path: Path
) -> Iterator[tuple[NodeClient, Path, Compacted]]:
    """First export; then the node compacts a segment spanning two days to half of its first day's records
    (those without an explicit expire_at, which the node's clock has passed: the rewrite drops those)."""
    data_dir = tmp_path / "data"
    shutil.copytree(source[0], data_dir)
    unbounded = {(a.namespace, a.shard, a.offset) for a in source[1] if a.expire_at is None}
    lake = tmp_path / "lake"
    with node_on(data_dir) as node, NodeClient(node.url, node.token) as client:
        run_export(spark, node_segment_files(client, data_dir), str(lake))
        before = _lake_rows(lake)
        for victim in node_segment_files(client, data_dir):
            table = decode_segment_table(victim)
            days = sorted({utc_day(ts) for ts in table.column("timestamp").to_pylist()})
            first_day = [
                o
                for o, ts in zip(table.column("offset").to_pylist(), table.column("timestamp").to_pylist(), strict=True)
                if utc_day(ts) == days[0] and (victim.namespace, victim.shard, o) in unbounded
            ]
            if len(days) == 2 and len(first_day) >= 2:
                break
        else:
            pytest.fail("the data has no segment spanning two days with two unbounded records on the first")
        keep = first_day[::2]
        client.compact_with_plan(victim.namespace, victim.shard, {victim.base_offset: keep})
        old = _leaves(before, victim)
        new = {leaf: (set(keep) if leaf[3] == days[0] else set()) for leaf in old}
        assert len(old) == 2 and all(new[leaf] != old[leaf] for leaf in old)
        yield client, data_dir, Compacted(lake, victim, old, new, _others(before, victim))


def test_a_reader_between_the_steps_sees_each_leaf_old_or_new_never_both_or_neither(
    spark: SparkSession, compacted: tuple[NodeClient, Path, Compacted]
) -> None:
    client, data_dir, c = compacted
    seen: list[tuple[str, tuple[str, ...]]] = []

    def reader(step: str, leaf: str | None) -> None:
        rows = _lake_rows(c.lake)
        assert max(Counter((r["namespace"], r["shard"], r["offset"]) for r in rows).values()) == 1, step
        assert _others(rows, c.victim) == c.others, step
        leaves = _leaves(rows, c.victim)
        states = []
        for key in sorted(c.old, key=str):
            now = leaves.get(key, set())
            assert now in (c.old[key], c.new[key]), (step, leaf, key)
            states.append("old" if now == c.old[key] else "new")
        seen.append((step, tuple(states)))
        assert spark.read.parquet(str(c.lake)).count() == len(rows)  # checksums and footers hold up

    result = run_export(spark, node_segment_files(client, data_dir), str(c.lake), hook=reader)
    assert result.replaced == [c.victim.key]
    assert result.leaves == {"added": 0, "replaced": 1, "emptied": 1}
    steps = [step for step, _ in seen]
    assert steps == ["staged", "swap", "swap", "swapped", "manifest"]
    assert [states for _, states in seen] == [
        ("old", "old"),
        ("old", "old"),
        ("new", "old"),
        ("new", "new"),
        ("new", "new"),
    ]
    assert _leaves(_lake_rows(c.lake), c.victim) == {k: v for k, v in c.new.items() if v}
    assert not (c.lake / STAGING_DIR).exists()
    emptied = next(k for k, v in c.new.items() if not v)
    leaf_dir = f"namespace={emptied[0]}/date={emptied[3]}/shard={emptied[1]}/segment_base={emptied[2]}"
    assert not (c.lake / leaf_dir).exists()  # the emptied leaf's directory went too


class Killed(Exception):
    pass


def test_an_export_killed_in_the_middle_of_the_swap_leaves_a_consistent_lake_and_the_next_run_finishes(
    spark: SparkSession, compacted: tuple[NodeClient, Path, Compacted]
) -> None:
    client, data_dir, c = compacted
    swaps = 0

    def kill_at_second_swap(step: str, leaf: str | None) -> None:
        nonlocal swaps
        swaps += step == "swap"
        if swaps == 2:
            raise Killed(leaf)

    with pytest.raises(Killed):
        run_export(spark, node_segment_files(client, data_dir), str(c.lake), hook=kill_at_second_swap)
    rows = _lake_rows(c.lake)
    assert max(Counter((r["namespace"], r["shard"], r["offset"]) for r in rows).values()) == 1
    leaves = _leaves(rows, c.victim)
    assert all(leaves.get(k, set()) in (c.old[k], c.new[k]) for k in c.old)
    assert (c.lake / STAGING_DIR).is_dir()  # what the killed run left
    manifests = sorted(p.name for p in (c.lake / "_manifest").iterdir() if not p.name.startswith("."))
    assert manifests == ["manifest-0000000001.json"]  # the killed run wrote none

    again = run_export(spark, node_segment_files(client, data_dir), str(c.lake))
    assert again.staging_cleared and again.replaced == [c.victim.key] and again.run == 2
    rows = _lake_rows(c.lake)
    assert max(Counter((r["namespace"], r["shard"], r["offset"]) for r in rows).values()) == 1
    assert _leaves(rows, c.victim) == {k: v for k, v in c.new.items() if v}
    assert _others(rows, c.victim) == c.others
    assert not (c.lake / STAGING_DIR).exists()


def test_a_catalog_table_follows_the_lake_partitions_added_replaced_and_dropped(
    spark: SparkSession, compacted: tuple[NodeClient, Path, Compacted]
) -> None:
    """With the session's catalog (in memory here): the export creates the table, and a query of it after
    the next export sees the rewritten segment, without MSCK REPAIR; the emptied leaf is no partition."""
    client, data_dir, c = compacted
    table = "swap_test.records"
    shutil.rmtree(c.lake)  # export the compacted data from scratch, the table created on the way
    segments = node_segment_files(client, data_dir)
    first = run_export(spark, segments, str(c.lake), table=table)
    assert first.table is not None and first.table.created
    assert spark.table(table).count() == first.records_written
    partitions = {str(r[0]) for r in spark.sql(f"SHOW PARTITIONS {table}").collect()}
    assert partitions == {p.parent.relative_to(c.lake).as_posix() for p in c.lake.rglob("*.parquet")}

    # Reads of the table see what path-based reads see, with the lake's types and the UTC columns.
    assert spark.table(table).schema["segment_base"].dataType.simpleString() == "bigint"
    mismatched = spark.sql(
        f"SELECT count(*) FROM {table} WHERE unix_millis(timestamp_utc) != `timestamp` "
        "OR (expire_at_utc IS NULL) != (expire_at IS NULL) OR unix_millis(expire_at_utc) != expire_at"
    ).first()
    assert mismatched is not None and mismatched[0] == 0

    # The node's TTL scan marks records dead: their segments' leaves are replaced, some emptied.
    for ns in ("orders", "audit"):
        while client.lifecycle_step(ns, "expire-scan", manual=True).more:
            pass
    second = run_export(spark, node_segment_files(client, data_dir), str(c.lake), table=table)
    assert second.table is not None and not second.table.created and second.replaced
    assert spark.table(table).count() == spark.read.parquet(str(c.lake)).count()
    partitions = {str(r[0]) for r in spark.sql(f"SHOW PARTITIONS {table}").collect()}
    assert partitions == {p.parent.relative_to(c.lake).as_posix() for p in c.lake.rglob("*.parquet")}
    assert second.table.partitions == len(partitions)
    assert second.table.added == len(partitions) - first.table.partitions + second.table.dropped
    assert spark.table(table).where("expire_at IS NOT NULL").count() == 0  # every one of those is dead now
