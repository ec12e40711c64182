"""The lake as a reader's catalog table, across processes: a reader creates ``lifecycle.records`` with ``CREATE
TABLE … USING parquet LOCATION '<lake>'`` in the Derby metastore the export uses, the export runs (its own
JVM, as an operator runs it), and the reader's next session sees the new rows without ``MSCK REPAIR``. Every
process runs with a machine time zone far from UTC; the UTC columns do not care.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_jobs.jobs.lake_export import run_export
from spark_jobs.source import offline_segment_files
from tests.spark.engine_data import write_segments

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
FAR_ZONE = "Pacific/Chatham"  # UTC+12:45 / +13:45: a date or hour off by a zone shows

READER = textwrap.dedent(
    """
    import json, sys
    from spark_jobs.catalog import metastore_conf
    from spark_jobs.config import JobConfig
    from spark_jobs.session import spark_session

    metastore, lake, create = sys.argv[1], sys.argv[2], sys.argv[3] == "create"
    config = JobConfig(spark_master="local[1]", driver_memory="512m", log_level="ERROR",
                       extra_conf=metastore_conf(metastore))
    with spark_session(config) as spark:
        if create:
            spark.sql("CREATE DATABASE IF NOT EXISTS lifecycle")
            spark.sql(f"CREATE TABLE lifecycle.records USING parquet LOCATION '{lake}'")
        rows = spark.sql("SELECT namespace, count(*) FROM lifecycle.records GROUP BY namespace").collect()
        bad = spark.sql(
            "SELECT count(*) FROM lifecycle.records WHERE unix_millis(timestamp_utc) != `timestamp` "
            "OR (expire_at_utc IS NULL) != (expire_at IS NULL) OR unix_millis(expire_at_utc) != expire_at"
        ).first()[0]
        first = spark.sql(
            "SELECT `timestamp`, date_format(timestamp_utc, \\"yyyy-MM-dd'T'HH:mm:ss.SSS\\") AS shown, date "
            "FROM lifecycle.records ORDER BY `timestamp` LIMIT 1"
        ).collect()
        print(json.dumps({
            "counts": {r[0]: r[1] for r in rows},
            "mismatched": bad,
            "first": [first[0][0], first[0][1], str(first[0][2])] if first else None,
        }))
    """
)


def _env() -> dict[str, str]:
    env = {**os.environ, "TZ": FAR_ZONE, "SPARK_MASTER": "local[1]", "SPARK_DRIVER_MEMORY": "512m"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def _run(*args: str, cwd: Path) -> str:
    result = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=240, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout.strip().splitlines()[-1]


def test_a_table_a_reader_created_earlier_sees_new_exports_in_a_new_session(
    spark: SparkSession, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    write_segments(data_dir)
    lake_path = tmp_path / "lake"
    lake = lake_path / "records"
    metastore = lake_path / "_metastore"
    segments = offline_segment_files(data_dir)
    live = {ns: sum(s.live_records for s in segments if s.namespace == ns) for ns in ("audit", "orders")}
    reader = tmp_path / "reader.py"
    reader.write_text(READER)

    # An earlier export (without a catalog) put one namespace in the lake; a reader makes it a table then.
    run_export(spark, [s for s in segments if s.namespace == "audit"], str(lake))
    before = json.loads(_run(str(reader), str(metastore), lake.as_uri(), "create", cwd=tmp_path))
    # Spark's own behaviour, the reason for registering: such a table reads nothing of what it did not list.
    assert before["counts"] == {}

    # The export as an operator runs it, in its own JVM: everything, registered in the reader's table.
    summary = json.loads(
        _run("-m", "spark_jobs", "lake-export", "--data-dir", str(data_dir), "--offline", "--lake-path", str(lake_path),
             cwd=tmp_path)
    )  # fmt: skip
    assert summary["table"]["table"] == "lifecycle.records" and not summary["table"]["created"]
    assert summary["table"]["columns_added"] == [] and summary["table"]["added"] == summary["table"]["partitions"]
    assert summary["segments_new"] == len([s for s in segments if s.namespace == "orders"])

    # A new session of the reader: every row, no MSCK REPAIR; the UTC columns are the integers' instants.
    after = json.loads(_run(str(reader), str(metastore), lake.as_uri(), "query", cwd=tmp_path))
    assert after["counts"] == live and after["mismatched"] == 0
    ts, shown, day = after["first"]
    assert ts == min(r for r in _timestamps(spark, lake))
    assert shown == _iso_utc(ts) and day == shown[:10]
    assert not (tmp_path / "derby.log").exists()  # Derby's log goes under the metastore, not the cwd
    shutil.rmtree(metastore)


def _timestamps(spark: SparkSession, lake: Path) -> list[int]:
    return [r[0] for r in spark.read.parquet(str(lake)).select("timestamp").collect()]


def _iso_utc(ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}"
