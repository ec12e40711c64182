"""lake-export end to end on segment files written by the real engine and served by a real node, which says
which segments are sealed and which records are dead: read back with Spark SQL and pyarrow, incremental
re-runs, a segment rewritten by compaction replaced exactly, records the node marks dead taken out of the
lake, idle active segments sealed by the node exported, and an interrupted run repaired."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from spark_jobs.config import ConfigError
from spark_jobs.jobs.lake_export import main, pyarrow_partitioning, run_export
from spark_jobs.manifest import MANIFEST_DIR
from spark_jobs.segments import SegmentFile, decode_segment_table
from spark_jobs.source import node_segment_files, offline_segment_files
from storage_engine.api import NewRecord
from storage_engine.node_api.client import NodeClient
from tests.spark.engine_data import Appended, node_on, write_segments
from tests.spark.lifecycle_expect import utc_day
from tests.support.processes import NodeProc

pytestmark = pytest.mark.spark

Row = tuple[object, ...]


def _expected(appended: list[Appended], keys: set[tuple[str, int, int]]) -> set[Row]:
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
        if (a.namespace, a.shard, a.offset) in keys
    }


def _live_offsets(segments: list[SegmentFile]) -> dict[tuple[str, int, int], int]:
    """(namespace, shard, offset) → segment base, for every record of these segments the node does not
    count dead (read with the engine's reader, as an executor does)."""
    out = {}
    for segment in segments:
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


@pytest.fixture
def served(source: tuple[Path, list[Appended]], tmp_path: Path) -> Iterator[tuple[NodeProc, NodeClient, Path]]:
    """A real node on a copy of the written data directory (the node may change it)."""
    data_dir = tmp_path / "data"
    shutil.copytree(source[0], data_dir)
    with node_on(data_dir) as node, NodeClient(node.url, node.token) as client:
        yield node, client, data_dir


def test_export_reads_back_in_spark_sql_and_pyarrow_and_reruns_export_nothing(
    spark: SparkSession,
    source: tuple[Path, list[Appended]],
    served: tuple[NodeProc, NodeClient, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    appended = source[1]
    node, client, data_dir = served
    lake = tmp_path / "lake" / "records"
    segments = node_segment_files(client, data_dir)
    sealed = _live_offsets(segments)
    active_offsets = {(a.namespace, a.shard, a.offset) for a in appended} - set(sealed)
    assert active_offsets, "the active segments hold records that are not exported"

    monkeypatch.setenv("NODE_TOKEN", node.token)
    argv = ["--data-dir", str(data_dir), "--node-url", node.url, "--output", str(lake)]
    assert main(argv, spark=spark) == 0
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
    # The UTC columns: Parquet UTC-adjusted millisecond timestamps (pyarrow: timestamp[ms, tz=UTC]) equal to
    # the integers, which stay; a null expire_at stays null.
    for name in ("timestamp_utc", "expire_at_utc"):
        assert str(one.schema.field(name).type) == "timestamp[ms, tz=UTC]"
    for r in table.to_pylist():
        assert int(r["timestamp_utc"].timestamp() * 1000) == r["timestamp"]
        expire_at = r["expire_at_utc"]
        assert (None if expire_at is None else round(expire_at.timestamp() * 1000)) == r["expire_at"]
    assert "namespace" not in one.column_names  # partition columns live in the path

    # Re-run: nothing to export, no new manifest, same files.
    before = sorted(p.name for p in lake.rglob("*.parquet"))
    assert main(argv, spark=spark) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["segments_exported"] == 0 and again["segments_unchanged"] == len(segments)
    assert again["manifest"] is None and again["run"] == 1
    assert sorted(p.name for p in lake.rglob("*.parquet")) == before
    assert len(list((lake / MANIFEST_DIR).glob("manifest-*.json"))) == 1


def test_dead_records_leave_the_lake_and_idle_segments_sealed_by_the_node_join_it(
    spark: SparkSession, source: tuple[Path, list[Appended]], served: tuple[NodeProc, NodeClient, Path], tmp_path: Path
) -> None:
    """What file names cannot say. The node's TTL scan marks every record with an explicit expire_at dead
    (its clock is past them all) and first seals the idle active segments: the next export replaces the
    segments that gained dead records (their rows leave the lake, though the files did not change) and
    exports the newly sealed ones without their dead records."""
    appended = source[1]
    _, client, data_dir = served
    lake = str(tmp_path / "lake")
    first = run_export(spark, node_segment_files(client, data_dir), lake)
    assert first.records_written == len(_live_offsets(node_segment_files(client, data_dir)))

    for ns in ("orders", "audit"):
        while client.lifecycle_step(ns, "expire-scan", manual=True).more:
            pass
    segments = node_segment_files(client, data_dir)
    with_dead = [s for s in segments if s.dead]
    assert with_dead and len(segments) > first.segments_sealed  # dead records; idle actives sealed

    second = run_export(spark, segments, lake)
    assert set(second.replaced) == {s.key for s in with_dead if s.key in first.exported}
    assert set(second.exported) == {s.key for s in segments} - set(first.exported)
    dead = {(a.namespace, a.shard, a.offset) for a in appended if a.expire_at is not None}
    live = {(a.namespace, a.shard, a.offset) for a in appended} - dead
    rows = _spark_rows(spark, Path(lake))
    assert {(r[0], r[1], r[2]) for r in rows} == live  # every record, the formerly active ones too
    assert {_normalise(r) for r in rows} == _expected(appended, live)
    todo = set(second.exported) | set(second.replaced)
    assert second.records_written == sum(s.live_records for s in segments if s.key in todo)

    manifest = json.loads(sorted((Path(lake) / MANIFEST_DIR).glob("manifest-*.json"))[-1].read_text())
    assert manifest["version"] == 3
    entries = {(e["namespace"], e["shard"], e["base_offset"]): e for e in manifest["segments"]}
    for s in segments:
        entry = entries[(s.namespace, s.shard, s.base_offset)]
        assert (entry["dead_records"], entry["records"]) == (s.dead_records, s.live_records)

    third = run_export(spark, node_segment_files(client, data_dir), lake)
    assert third.exported == [] and third.replaced == [] and third.manifest is None


def test_rewritten_segment_is_replaced_new_ones_added_deleted_ones_kept(
    spark: SparkSession, source: tuple[Path, list[Appended]], served: tuple[NodeProc, NodeClient, Path], tmp_path: Path
) -> None:
    appended = list(source[1])
    _, client, data_dir = served
    lake = str(tmp_path / "lake")
    first = run_export(spark, node_segment_files(client, data_dir), lake)
    segments = [s for s in node_segment_files(client, data_dir) if (s.namespace, s.shard) == ("orders", 1)]
    untouched = segments[0]
    # Compaction keeps every other record of the victim; records whose explicit expire_at has passed on the
    # node's clock go too, so the victim keeps at least one record without one.
    unbounded = {a.offset for a in appended if (a.namespace, a.shard) == ("orders", 1) and a.expire_at is None}
    halves = {s.key: set(decode_segment_table(s).column("offset").to_pylist()[::2]) for s in segments}
    victim = next(s for s in segments[1:] if halves[s.key] & unbounded)
    gone = next(s for s in segments[1:] if s != victim)
    untouched_files = {
        p: p.stat().st_mtime_ns
        for p in Path(lake).rglob(f"namespace=orders/*/shard=1/segment_base={untouched.base_offset}/*.parquet")
    }

    # More appends through the node: the active segment rolls, so new sealed segments appear.
    for _ in range(8):
        result = client.append("audit", 0, [NewRecord(value=b"z" * 200, key=b"late", timestamp=1_704_100_000_000)])
        appended.append(Appended("audit", 0, result.base_offset, 1_704_100_000_000, b"late", (), {}, b"z" * 200, None))
    # The node compacts one sealed segment down to half its records (a whole-file swap) and drops another.
    kept = halves[victim.key]
    client.compact_with_plan("orders", 1, {victim.base_offset: sorted(kept), gone.base_offset: []})

    listed = node_segment_files(client, data_dir)
    rewritten = next(s for s in listed if s.key == victim.key)
    assert rewritten.size < victim.size and gone.key not in {s.key for s in listed}
    second = run_export(spark, listed, lake)
    assert second.replaced == [victim.key]
    assert second.gone == [gone.key]
    assert second.exported and all(k.startswith("audit/0/") for k in second.exported)
    assert second.run == first.run + 1

    rows = _spark_rows(spark, Path(lake))
    victim_rows = sorted(r[2] for r in rows if (r[0], r[1], r[9]) == ("orders", 1, victim.base_offset))
    # The old rows are gone; what the new file holds is there once (the swap also left out records whose
    # explicit expire_at had passed on the node's clock).
    assert victim_rows == decode_segment_table(rewritten).column("offset").to_pylist()
    assert set(victim_rows) <= kept and victim_rows
    assert sum(1 for r in rows if (r[0], r[1], r[9]) == ("orders", 1, gone.base_offset)) > 0  # the lake keeps it
    counts = Counter((r[0], r[1], r[2]) for r in rows)
    assert set(counts.values()) == {1}  # nothing duplicated
    assert {_normalise(r) for r in rows} == _expected(appended, set(counts))
    # Other segments' files were not rewritten.
    assert {p: p.stat().st_mtime_ns for p in untouched_files} == untouched_files

    manifest = json.loads(sorted((Path(lake) / MANIFEST_DIR).glob("manifest-*.json"))[-1].read_text())
    entry = next(
        e
        for e in manifest["segments"]
        if (e["namespace"], e["shard"], e["base_offset"]) == ("orders", 1, victim.base_offset)
    )
    assert entry["size"] == Path(victim.path).stat().st_size == rewritten.size
    assert entry["records"] == len(victim_rows) and entry["run"] == 2

    third = run_export(spark, node_segment_files(client, data_dir), lake)
    assert third.exported == [] and third.replaced == [] and third.manifest is None


def test_interrupted_run_is_repaired_without_duplicates(
    spark: SparkSession, served: tuple[NodeProc, NodeClient, Path], tmp_path: Path
) -> None:
    _, client, data_dir = served
    lake = tmp_path / "lake"
    first = run_export(spark, node_segment_files(client, data_dir), str(lake))
    # A crash after the data was written but before the manifest: as if the manifest were never written.
    for path in (lake / MANIFEST_DIR).iterdir():
        path.unlink()
    second = run_export(spark, node_segment_files(client, data_dir), str(lake))
    assert len(second.exported) == len(first.exported) and second.run == 1
    assert second.records_written == first.records_written
    assert spark.read.parquet(str(lake)).count() == first.records_written


def test_offline_on_a_directory_no_node_runs_on(
    spark: SparkSession, source: tuple[Path, list[Appended]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(source[0], data_dir)
    argv = ["--data-dir", str(data_dir), "--output", str(tmp_path / "lake"), "--namespace", "audit", "--table", ""]
    assert main([*argv, "--offline"], spark=spark) == 0
    summary = json.loads(capsys.readouterr().out)
    audit = [s for s in offline_segment_files(data_dir) if s.namespace == "audit"]
    assert summary["segments_new"] == len(audit) and summary["records_written"] == len(_live_offsets(audit))
    with node_on(data_dir) as node:  # a node holds the directory now: the engine cannot open it here
        with pytest.raises(ConfigError, match="give --node-url instead"):
            main([*argv, "--offline"], spark=spark)
        assert node.popen.poll() is None


def test_the_node_or_offline_is_required(tmp_path: Path, source: tuple[Path, list[Appended]]) -> None:
    argv = ["--data-dir", str(source[0]), "--output", str(tmp_path / "lake")]
    with pytest.raises(ConfigError, match=r"give --node-url .*, or --offline"):
        main(argv)
    with pytest.raises(ConfigError, match="exclude each other"):
        main([*argv, "--offline", "--node-url", "http://127.0.0.1:9"])


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
