"""One SparkSession for the whole Spark suite: local[2], two shuffle partitions, no UI, loopback only.

It is built by :func:`spark_jobs.session.build_session`, so every test run also checks that the session
module starts Spark on this machine. Jobs under test get it handed in (``main(argv, spark=spark)``)
instead of starting a JVM of their own.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from spark_jobs.config import JobConfig
from spark_jobs.schema import RECORD_SCHEMA
from spark_jobs.session import build_session
from tests.support.workers import worker_id

TEST_CONFIG = JobConfig(
    app_name="spark-jobs-tests",
    spark_master="local[2]",
    shuffle_partitions=2,
    driver_memory="1g",
    log_level="ERROR",
    extra_conf={
        "spark.default.parallelism": "2",
        # Short-lived test JVM on 2 cores: C1 alone and a serial GC roughly halve its CPU time.
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        # The in-memory catalog's databases (the export's table) go here, not into ./spark-warehouse.
        "spark.sql.warehouse.dir": str(Path(tempfile.gettempdir()) / f"spark-jobs-tests-warehouse-{worker_id()}"),
    },
)

# RECORD_SCHEMA with every field nullable, to feed the transforms rows a real record never has.
NULLABLE_RECORD_SCHEMA = StructType.fromJson(
    {
        "type": "struct",
        "fields": [{**field.jsonValue(), "nullable": True} for field in RECORD_SCHEMA.fields],
    }
)

MakeRecords = Callable[..., DataFrame]


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session(TEST_CONFIG)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def make_records(spark: SparkSession) -> MakeRecords:
    """``make_records(rows, nullable=False)``: a records DataFrame from tuples in schema order (see
    :func:`tests.spark.helpers.record`); ``nullable=True`` lets any field be null."""

    def make(rows: Sequence[Sequence[Any]], nullable: bool = False) -> DataFrame:
        schema = NULLABLE_RECORD_SCHEMA if nullable else RECORD_SCHEMA
        return spark.createDataFrame(list(rows), schema=schema)

    return make
