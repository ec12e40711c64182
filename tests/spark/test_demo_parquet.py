"""The demo-parquet job: its generator (pure Python), and main end to end, read back with Spark and pyarrow."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from spark_jobs.jobs.demo_parquet import DemoSpec, demo_dataframe, generate_records, main
from spark_jobs.schema import RECORD_SCHEMA
from spark_jobs.transforms import MS_PER_DAY

SMALL = DemoSpec(rows=300, seed=7, namespaces=("audit-log", "orders"), shards=3, days=2)
SMALL_ARGS = ["--rows", "300", "--seed", "7", "--namespaces", "audit-log,orders", "--shards", "3", "--days", "2"]


def _utc_day(epoch_ms: int) -> str:
    return dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.UTC).date().isoformat()


def _run(capsys: pytest.CaptureFixture[str], spark: SparkSession, argv: list[str]) -> dict[str, object]:
    assert main(argv, spark=spark) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1, lines
    summary: dict[str, object] = json.loads(lines[0])
    return summary


class TestGenerateRecords:
    def test_same_seed_same_rows_other_seed_other_rows(self) -> None:
        assert generate_records(SMALL) == generate_records(SMALL)
        assert generate_records(SMALL) != generate_records(DemoSpec(rows=300, seed=8))

    def test_rows_are_message_like(self) -> None:
        rows = generate_records(SMALL)
        assert len(rows) == SMALL.rows
        by_shard: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
        for namespace, shard, offset, timestamp, key, tags, value, expire_at in rows:
            assert namespace in SMALL.namespaces and 0 <= shard < SMALL.shards
            assert SMALL.start_ms <= timestamp < SMALL.end_ms
            assert key is None or isinstance(key, bytes)
            assert value is None or isinstance(value, bytes)
            assert all(isinstance(tag, str) for tag in tags) and len(tags) <= 2
            assert expire_at is None or expire_at > timestamp
            by_shard[(namespace, shard)].append((offset, timestamp))
        for entries in by_shard.values():
            entries.sort()
            assert [offset for offset, _ in entries] == list(range(len(entries)))  # dense from 0
            stamps = [timestamp for _, timestamp in entries]
            assert stamps == sorted(stamps)  # offsets follow time
        # Every nullable field is sometimes null, so the lake sees real nulls.
        assert any(r[4] is None for r in rows) and any(r[6] is None for r in rows) and any(r[7] is None for r in rows)
        assert any(r[7] is not None for r in rows) and any(not r[5] for r in rows) and any(r[5] for r in rows)

    def test_no_rows(self) -> None:
        assert generate_records(DemoSpec(rows=0)) == []

    @pytest.mark.parametrize("bad", [{"rows": -1}, {"namespaces": ()}, {"shards": 0}, {"days": 0}])
    def test_bad_spec(self, bad: dict[str, object]) -> None:
        with pytest.raises(ValueError):
            DemoSpec(**bad)  # type: ignore[arg-type]


@pytest.mark.spark
class TestDemoDataFrame:
    def test_explicit_schema_and_same_rows(self, spark: SparkSession) -> None:
        df = demo_dataframe(spark, SMALL)
        assert df.schema == RECORD_SCHEMA
        collected = [
            (r.namespace, r.shard, r.offset, r.timestamp, r.key, list(r.tags), r.value, r.expire_at)
            for r in df.collect()
        ]
        assert sorted(collected, key=lambda r: (r[0], r[1], r[2])) == sorted(
            generate_records(SMALL), key=lambda r: (r[0], r[1], r[2])
        )


@pytest.mark.spark
class TestMainEndToEnd:
    def test_writes_partitioned_parquet_readable_by_spark_and_pyarrow(
        self, spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        out = tmp_path / "lake" / "demo"
        summary = _run(capsys, spark, [*SMALL_ARGS, "--output", str(out)])

        expected_rows = generate_records(SMALL)
        per_partition = Counter((r[0], _utc_day(r[3])) for r in expected_rows)
        assert summary["job"] == "demo-parquet"
        assert summary["output"] == str(out.resolve())
        assert summary["rows_written"] == 300
        assert summary["partitions"] == len(per_partition) == 4  # 2 namespaces × 2 days
        assert summary["bytes"] == sum(len(r[4] or b"") + len(r[6] or b"") for r in expected_rows)
        now = SMALL.end_ms  # default "now": the end of the window
        assert summary["now_ms"] == now
        assert summary["expired"] == sum(1 for r in expected_rows if r[7] is not None and r[7] <= now)

        # Layout: Hive-style directories, one data file each, and a _SUCCESS marker.
        assert (out / "_SUCCESS").is_file()
        partition_dirs = sorted(p.relative_to(out).as_posix() for p in out.glob("namespace=*/date=*"))
        assert partition_dirs == sorted(f"namespace={ns}/date={day}" for ns, day in per_partition)
        for directory in partition_dirs:
            assert len(list((out / directory).glob("*.parquet"))) == 1

        # Spark: partition columns come back as columns, row for row what was generated.
        back = spark.read.parquet(str(out))
        assert back.count() == 300
        assert {f.name for f in back.schema.fields} == {*RECORD_SCHEMA.fieldNames(), "date"}
        spark_rows = {
            (r.namespace, r.shard, r.offset): (r.timestamp, r.key, list(r.tags), r.value, r.expire_at, str(r.date))
            for r in back.collect()
        }
        assert spark_rows == {(r[0], r[1], r[2]): (r[3], r[4], r[5], r[6], r[7], _utc_day(r[3])) for r in expected_rows}

        # pyarrow.dataset with Hive partitioning: same rows per partition.
        dataset = ds.dataset(str(out), format="parquet", partitioning="hive")
        assert dataset.count_rows() == 300
        table = dataset.to_table()
        counts = Counter(zip(table["namespace"].to_pylist(), table["date"].to_pylist(), strict=True))
        assert counts == per_partition
        for namespace, day in per_partition:
            n = dataset.count_rows(filter=(ds.field("namespace") == namespace) & (ds.field("date") == day))
            assert n == per_partition[(namespace, day)]

        # pyarrow.parquet on one file: the record columns with their types and nulls; no partition columns.
        ns, day = sorted(per_partition)[0]
        (data_file,) = (out / f"namespace={ns}" / f"date={day}").glob("*.parquet")
        file_table = pq.read_table(data_file)
        assert file_table.column_names == [n for n in RECORD_SCHEMA.fieldNames() if n != "namespace"]
        assert file_table.schema.field("key").type == pa.binary()
        assert file_table.schema.field("tags").type.value_type == pa.string()
        assert file_table.schema.field("expire_at").type == pa.int64()
        assert file_table.num_rows == per_partition[(ns, day)]
        in_file = sorted(zip(file_table["shard"].to_pylist(), file_table["offset"].to_pylist(), strict=True))
        assert in_file == sorted((r[1], r[2]) for r in expected_rows if r[0] == ns and _utc_day(r[3]) == day)
        # Sorted within the file by shard, offset; timestamps all fall on the partition's day.
        assert list(zip(file_table["shard"].to_pylist(), file_table["offset"].to_pylist(), strict=True)) == in_file
        assert {_utc_day(ts) for ts in file_table["timestamp"].to_pylist()} == {day}
        assert file_table["value"].null_count == sum(
            1 for r in expected_rows if r[0] == ns and _utc_day(r[3]) == day and r[6] is None
        )

    def test_overwrites_and_defaults_to_lake_path(
        self,
        spark: SparkSession,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        monkeypatch.setenv("LAKE_PATH", str(tmp_path / "lake"))
        out = tmp_path / "lake" / "demo"
        first = _run(capsys, spark, ["--rows", "50", "--namespaces", "orders,payments", "--days", "2"])
        assert first["output"] == str(out.resolve())
        assert {p.name for p in out.glob("namespace=*")} == {"namespace=orders", "namespace=payments"}

        second = _run(capsys, spark, ["--rows", "20", "--namespaces", "audit-log", "--days", "1", "--now-ms", "0"])
        # Overwrite: the earlier namespaces are gone, only the new run's rows remain.
        assert {p.name for p in out.glob("namespace=*")} == {"namespace=audit-log"}
        assert second["rows_written"] == 20 and second["expired"] == 0
        assert ds.dataset(str(out), format="parquet", partitioning="hive").count_rows() == 20
        assert spark.read.parquet(str(out)).count() == 20

    def test_window_is_utc_days(self) -> None:
        assert SMALL.end_ms - SMALL.start_ms == 2 * MS_PER_DAY
        assert _utc_day(SMALL.start_ms) == "2024-01-01"
