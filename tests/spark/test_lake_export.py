"""lake-export end to end on segment files written by the real engine: read back with Spark SQL and pyarrow,
incremental re-runs, a segment rewritten by compaction replaced exactly, and an interrupted run repaired."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from spark_jobs.jobs.lake_export import main, pyarrow_partitioning, run_export
from spark_jobs.manifest import MANIFEST_DIR
from spark_jobs.segments import decode_segment_table, list_segment_files
from storage_engine import open_engine
from storage_engine.api import NewRecord
from storage_engine.clock import ManualClock
from storage_engine.config import EngineConfig
from tests.spark.engine_data import Appended, rewrite_segment, write_segments
from tests.spark.lifecycle_expect import utc_day

pytestmark = pytest.mark.spark

Row = tuple[object, ...]


def _expected(appended: list[Appended], sealed_keys: set[tuple[str, int, int]]) -> set[Row]:
    return {
        (
            a.namespace,
            a.shard,
            a.offset,
            a.timestamp,
            a.key,
            a.tags,
            tuple(sorted(a.headers.items())),
            a.value,
            a.expire_at,
        )
        for a in appended
        if (a.namespace, a.shard, a.offset) in sealed_keys
    }


def _sealed_offsets(data_dir: Path) -> dict[tuple[str, int, int], int]:
    """(namespace, shard, offset) → segment base, for every record in a sealed segment."""
    out = {}
    for segment in list_segment_files(data_dir):
        for offset in decode_segment_table(segment).column("offset").to_pylist():
            out[(segment.namespace, segment.shard, offset)] = segment.base_offset
    return out


def _spark_rows(spark: SparkSession, lake: Path) -> list[Row]:
    spark.read.parquet(str(lake)).createOrReplaceTempView("lake_records")
    rows = spark.sql(
        "SELECT namespace, shard, `offset`, `timestamp`, key, tags, headers, value, expire_at, segment_base, date "
        "FROM lake_records"
    ).collect()
    return [tuple(r) for r in rows]


def _normalise(row: Row) -> Row:
    ns, shard, offset, ts, key, tags, headers, value, expire_at = row[:9]
    pairs = headers.items() if isinstance(headers, dict) else headers
    return (
        ns,
        shard,
        offset,
        ts,
        None if key is None else bytes(key),  # type: ignore[arg-type]
        tuple(tags),  # type: ignore[arg-type]
        tuple(sorted((k, bytes(v)) for k, v in pairs)),  # type: ignore[union-attr]
        None if value is None else bytes(value),  # type: ignore[arg-type]
        expire_at,
    )


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Appended]]:
    data_dir = tmp_path_factory.mktemp("export") / "data"
    return data_dir, write_segments(data_dir)


def _copy(source: tuple[Path, list[Appended]], tmp_path: Path) -> Path:
    data_dir = tmp_path / "data"
    shutil.copytree(source[0], data_dir)
    (data_dir / "LOCK").unlink(missing_ok=True)
    return data_dir


def test_export_reads_back_in_spark_sql_and_pyarrow_and_reruns_export_nothing(
    spark: SparkSession, source: tuple[Path, list[Appended]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir, appended = source
    lake = tmp_path / "lake" / "records"
    sealed = _sealed_offsets(data_dir)
    segments = list_segment_files(data_dir)
    active_offsets = {(a.namespace, a.shard, a.offset) for a in appended} - set(sealed)
    assert active_offsets, "the active segments hold records that are not exported"

    assert main(["--data-dir", str(data_dir), "--output", str(lake)], spark=spark) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["segments_new"] == summary["segments_sealed"] == len(segments)
    assert summary["records_written"] == len(sealed)
    assert summary["bytes_read"] == sum(s.size for s in segments)
    assert summary["run"] == 1 and summary["manifest"].endswith("_manifest/manifest-0000000001.json")

    # Spark SQL: every sealed record once, field for field, with its segment and UTC date.
    rows = _spark_rows(spark, lake)
    assert len(rows) == len(sealed)
    assert {_normalise(r) for r in rows} == _expected(appended, set(sealed))
    for r in rows:
        assert r[9] == sealed[(r[0], r[1], r[2])]  # type: ignore[index]
        assert r[10] == utc_day(r[3])  # type: ignore[arg-type]

    # Layout: namespace/date/shard/segment_base, exactly one data file per directory.
    files = [p for p in lake.rglob("*.parquet")]
    dirs = Counter(p.parent.relative_to(lake).as_posix() for p in files)
    assert set(dirs.values()) == {1}
    assert all(d.count("/") == 3 and d.startswith("namespace=") and "/date=" in d for d in dirs)
    days = {(r[0], r[10], r[1], r[9]) for r in rows}
    assert len(dirs) == len(days)
    assert {d.split("/")[1] for d in dirs} == {"date=2023-12-31", "date=2024-01-01"}

    # pyarrow.dataset with the lake's partitioning: the same rows; the manifest is not data.
    dataset = ds.dataset(str(lake), format="parquet", partitioning=pyarrow_partitioning())
    table = dataset.to_table()
    assert table.num_rows == len(sealed)
    arrow_rows = {
        _normalise(
            tuple(
                r[c]
                for c in ("namespace", "shard", "offset", "timestamp", "key", "tags", "headers", "value", "expire_at")
            )
        )
        for r in table.to_pylist()
    }
    assert arrow_rows == _expected(appended, set(sealed))
    one = pq.read_table(files[0])
    assert one.schema.field("headers").type.key_type.equals(__import__("pyarrow").string())
    assert "namespace" not in one.column_names  # partition columns live in the path

    # Re-run: nothing to export, no new manifest, same files.
    before = sorted(p.name for p in lake.rglob("*.parquet"))
    assert main(["--data-dir", str(data_dir), "--output", str(lake)], spark=spark) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["segments_exported"] == 0 and again["segments_unchanged"] == len(segments)
    assert again["manifest"] is None and again["run"] == 1
    assert sorted(p.name for p in lake.rglob("*.parquet")) == before
    assert len(list((lake / MANIFEST_DIR).glob("manifest-*.json"))) == 1


def test_rewritten_segment_is_replaced_new_ones_added_deleted_ones_kept(
    spark: SparkSession, source: tuple[Path, list[Appended]], tmp_path: Path
) -> None:
    data_dir = _copy(source, tmp_path)
    appended = list(source[1])
    lake = str(tmp_path / "lake")
    first = run_export(spark, data_dir, lake)
    segments = list_segment_files(data_dir)
    victim, gone, untouched = segments[1], segments[2], segments[0]
    untouched_files = {
        p: p.stat().st_mtime_ns for p in Path(lake).rglob(f"segment_base={untouched.base_offset}/*.parquet")
    }

    # More appends: the active segments roll, so new sealed segments appear.
    engine = open_engine(EngineConfig(data_dir=data_dir, adapter="segment"), clock=ManualClock(1_704_100_000_000))
    try:
        for _ in range(8):
            result = engine.append("audit", 0, [NewRecord(value=b"z" * 200, key=b"late", timestamp=1_704_100_000_000)])
            appended.append(
                Appended("audit", 0, result.base_offset, 1_704_100_000_000, b"late", (), {}, b"z" * 200, None)
            )
    finally:
        engine.close()
    # Compaction rewrites one sealed segment with half its records; retention deletes another.
    victim_offsets = decode_segment_table(victim).column("offset").to_pylist()
    kept = set(victim_offsets[::2])
    rewrite_segment(victim.path, kept)
    Path(gone.path).rename(gone.path + ".deleted")

    second = run_export(spark, data_dir, lake)
    assert second.replaced == [victim.key]
    assert second.gone == [gone.key]
    assert second.exported and all(k.startswith("audit/0/") for k in second.exported)
    assert second.run == first.run + 1

    rows = _spark_rows(spark, Path(lake))
    victim_rows = sorted(
        r[2] for r in rows if (r[0], r[1], r[9]) == (victim.namespace, victim.shard, victim.base_offset)
    )
    assert victim_rows == sorted(kept)  # the old rows are gone, the kept ones are there once
    assert sum(1 for r in rows if (r[0], r[1], r[9]) == (gone.namespace, gone.shard, gone.base_offset)) > 0
    counts = Counter((r[0], r[1], r[2]) for r in rows)
    assert set(counts.values()) == {1}  # nothing duplicated
    # Rows are what was appended, for whatever the lake now holds.
    assert {_normalise(r) for r in rows} == _expected(appended, set(counts))
    # Other segments' files were not rewritten.
    assert {p: p.stat().st_mtime_ns for p in untouched_files} == untouched_files

    manifest = json.loads(sorted((Path(lake) / MANIFEST_DIR).glob("manifest-*.json"))[-1].read_text())
    entry = next(
        e
        for e in manifest["segments"]
        if (e["namespace"], e["shard"], e["base_offset"]) == (victim.namespace, victim.shard, victim.base_offset)
    )
    assert entry["size"] == Path(victim.path).stat().st_size and entry["records"] == len(kept) and entry["run"] == 2

    third = run_export(spark, data_dir, lake)
    assert third.exported == [] and third.replaced == [] and third.manifest is None


def test_interrupted_run_is_repaired_without_duplicates(
    spark: SparkSession, source: tuple[Path, list[Appended]], tmp_path: Path
) -> None:
    data_dir = source[0]
    lake = tmp_path / "lake"
    first = run_export(spark, data_dir, str(lake))
    # A crash after the data was written but before the manifest: as if the manifest were never written.
    for path in (lake / MANIFEST_DIR).iterdir():
        path.unlink()
    second = run_export(spark, data_dir, str(lake))
    assert len(second.exported) == len(first.exported) and second.run == 1
    assert second.records_written == first.records_written
    assert spark.read.parquet(str(lake)).count() == first.records_written


def test_missing_data_dir_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data-dir", str(tmp_path / "nope"), "--output", str(tmp_path / "lake")]) == 2
    assert "no segments/ directory" in capsys.readouterr().err


def test_jobs_are_registered_for_the_cli() -> None:
    from spark_jobs.__main__ import help_text
    from spark_jobs.registry import get_job, load_jobs

    load_jobs()
    assert get_job("lake-export").main is main
    text = help_text()
    assert "lake-export" in text and "lifecycle-report" in text
