"""The pure transforms, on small in-memory DataFrames: boundaries, nulls, empty inputs, time zones."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, LongType, TimestampType

from spark_jobs.transforms import (
    effective_expiry,
    is_expired,
    lake_rows,
    summarize_by_namespace_day,
    utc_date,
    with_partition_columns,
    with_utc_timestamps,
)
from tests.spark.conftest import MakeRecords
from tests.spark.helpers import DAY_MS, JAN1_MS, record

pytestmark = pytest.mark.spark

HOUR_MS = 3_600_000
NOW_MS = JAN1_MS + DAY_MS + 12 * HOUR_MS  # 2024-01-02T12:00:00Z
JAN1 = dt.date(2024, 1, 1)
JAN2 = dt.date(2024, 1, 2)


@pytest.fixture
def utc_session(spark: SparkSession) -> Iterator[SparkSession]:
    """The shared session; restores its time zone after a test that changes it."""
    before = spark.conf.get("spark.sql.session.timeZone") or "UTC"
    try:
        yield spark
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


def _sample_rows() -> list[tuple[object, ...]]:
    return [
        # 2024-01-01
        record(offset=0, timestamp=JAN1_MS, key=b"k1", value=b"abcd", expire_at=JAN1_MS + 1_000),
        record(offset=1, timestamp=JAN1_MS + DAY_MS - 1, key=None, value=b"xy", expire_at=None),
        # 2024-01-02
        record(offset=2, timestamp=JAN1_MS + DAY_MS, key=b"k", value=None, expire_at=NOW_MS),  # tombstone
        record(offset=3, timestamp=JAN1_MS + DAY_MS + 1, key=b"k", value=b"v", expire_at=NOW_MS + 1),
        record(namespace="payments", timestamp=JAN1_MS + 5, key=None, value=None, expire_at=None),
    ]


def _by_group(rows: list[Row]) -> dict[tuple[str, dt.date], tuple[int, int, int]]:
    return {(r["namespace"], r["date"]): (r["records"], r["bytes"], r["expired"]) for r in rows}


class TestUtcDate:
    @pytest.mark.parametrize(
        ("epoch_ms", "expected"),
        [
            (JAN1_MS, JAN1),
            (JAN1_MS + DAY_MS - 1, JAN1),
            (JAN1_MS + DAY_MS, JAN2),
            (0, dt.date(1970, 1, 1)),
            (-1, dt.date(1969, 12, 31)),
            (None, None),
        ],
    )
    def test_boundaries_and_null(self, spark: SparkSession, epoch_ms: int | None, expected: dt.date | None) -> None:
        df = spark.createDataFrame([(epoch_ms,)], "ts long")
        assert df.select(utc_date(F.col("ts")).alias("d")).first()["d"] == expected  # type: ignore[index]


class TestWithPartitionColumns:
    def test_adds_utc_date_and_keeps_every_column(self, make_records: MakeRecords) -> None:
        df = make_records(_sample_rows())
        out = with_partition_columns(df)

        assert out.columns == [*df.columns, "date"]
        assert isinstance(out.schema["date"].dataType, DateType)
        rows = out.orderBy("namespace", "offset").collect()
        assert [(r["namespace"], r["offset"], r["date"]) for r in rows] == [
            ("orders", 0, JAN1),
            ("orders", 1, JAN1),
            ("orders", 2, JAN2),
            ("orders", 3, JAN2),
            ("payments", 0, JAN1),
        ]
        # Nothing else changed: nulls stay null, bytes stay bytes.
        assert rows[1]["key"] is None and rows[2]["value"] is None and rows[4]["expire_at"] is None
        assert bytes(rows[0]["value"]) == b"abcd"

    def test_null_timestamp_gives_null_date(self, make_records: MakeRecords) -> None:
        df = make_records([record(timestamp=None, key=None, value=None, tags=None)], nullable=True)
        assert with_partition_columns(df).first()["date"] is None  # type: ignore[index]

    def test_empty_input(self, make_records: MakeRecords) -> None:
        out = with_partition_columns(make_records([]))
        assert out.count() == 0
        assert isinstance(out.schema["date"].dataType, DateType)

    @pytest.mark.parametrize("zone", ["Pacific/Kiritimati", "America/Los_Angeles"])
    def test_date_is_utc_whatever_the_session_time_zone(
        self, utc_session: SparkSession, make_records: MakeRecords, zone: str
    ) -> None:
        df = make_records([record(offset=0, timestamp=JAN1_MS), record(offset=1, timestamp=JAN1_MS + DAY_MS - 1)])
        utc_session.conf.set("spark.sql.session.timeZone", zone)
        dates = [r["date"] for r in with_partition_columns(df).orderBy("offset").collect()]
        assert dates == [JAN1, JAN1]


class TestUtcTimestamps:
    """``timestamp_utc``/``expire_at_utc``: the instants of the millisecond integers, which stay."""

    @pytest.mark.parametrize("zone", ["UTC", "Pacific/Chatham", "America/Los_Angeles"])
    def test_the_same_instant_to_the_millisecond_whatever_the_session_time_zone(
        self, utc_session: SparkSession, make_records: MakeRecords, zone: str
    ) -> None:
        rows = [
            record(offset=0, timestamp=JAN1_MS + 1, expire_at=JAN1_MS + DAY_MS - 1),
            record(offset=1, timestamp=-1, expire_at=None),  # 1969-12-31T23:59:59.999Z
            record(offset=2, timestamp=1_700_000_000_123, expire_at=253_402_300_799_999),  # 9999-12-31T23:59:59.999Z
        ]
        utc_session.conf.set("spark.sql.session.timeZone", zone)
        out = with_utc_timestamps(make_records(rows))
        assert out.columns == [*RECORD_COLUMNS, "timestamp_utc", "expire_at_utc"]
        assert isinstance(out.schema["timestamp_utc"].dataType, TimestampType)
        assert isinstance(out.schema["expire_at_utc"].dataType, TimestampType)
        got = out.orderBy("offset").select(
            "timestamp",
            "expire_at",
            F.unix_millis("timestamp_utc").alias("ts_ms"),
            F.unix_millis("expire_at_utc").alias("exp_ms"),
            F.col("expire_at_utc").isNull().alias("no_expiry"),
        )
        assert [tuple(r) for r in got.collect()] == [
            (JAN1_MS + 1, JAN1_MS + DAY_MS - 1, JAN1_MS + 1, JAN1_MS + DAY_MS - 1, False),
            (-1, None, -1, None, True),
            (1_700_000_000_123, 253_402_300_799_999, 1_700_000_000_123, 253_402_300_799_999, False),
        ]
        utc_session.conf.set("spark.sql.session.timeZone", "UTC")
        shown = out.orderBy("offset").select(F.date_format("timestamp_utc", "yyyy-MM-dd'T'HH:mm:ss.SSS")).collect()
        assert [r[0] for r in shown] == [
            "2024-01-01T00:00:00.001",
            "1969-12-31T23:59:59.999",
            "2023-11-14T22:13:20.123",
        ]

    def test_lake_rows_adds_both_timestamps_and_the_date(self, make_records: MakeRecords) -> None:
        out = lake_rows(make_records([record(timestamp=JAN1_MS + DAY_MS - 1)]))
        assert out.columns == [*RECORD_COLUMNS, "timestamp_utc", "expire_at_utc", "date"]
        assert out.first()["date"] == JAN1  # type: ignore[index]


RECORD_COLUMNS = ["namespace", "shard", "offset", "timestamp", "key", "tags", "value", "expire_at"]


class TestExpiry:
    def test_is_expired_is_never_null(self, make_records: MakeRecords) -> None:
        df = make_records(
            [
                record(offset=0, expire_at=None),
                record(offset=1, expire_at=NOW_MS),
                record(offset=2, expire_at=NOW_MS + 1),
            ]
        )
        flags = [r["x"] for r in df.orderBy("offset").select(is_expired(NOW_MS).alias("x")).collect()]
        assert flags == [False, True, False]

    def test_effective_expiry_takes_the_earlier_deadline(self, make_records: MakeRecords) -> None:
        df = make_records(
            [
                record(offset=0, timestamp=100, expire_at=None),
                record(offset=1, timestamp=100, expire_at=150),
                record(offset=2, timestamp=100, expire_at=500),
            ]
        )
        no_ttl = [r["e"] for r in df.orderBy("offset").select(effective_expiry().alias("e")).collect()]
        ttl = [r["e"] for r in df.orderBy("offset").select(effective_expiry(ttl_ms=200).alias("e")).collect()]
        assert no_ttl == [None, 150, 500]
        assert ttl == [300, 150, 300]


class TestSummarizeByNamespaceDay:
    def test_counts_bytes_and_expired(self, make_records: MakeRecords) -> None:
        summary = summarize_by_namespace_day(make_records(_sample_rows()), now_ms=NOW_MS)

        assert summary.columns == ["namespace", "date", "records", "bytes", "expired"]
        assert _by_group(summary.collect()) == {
            # bytes = key + value; a null key or a tombstone counts 0. expire_at == now is expired.
            ("orders", JAN1): (2, 2 + 4 + 0 + 2, 1),
            ("orders", JAN2): (2, 1 + 0 + 1 + 1, 1),
            ("payments", JAN1): (1, 0, 0),
        }

    def test_namespace_ttl_applies_alongside_expire_at(self, make_records: MakeRecords) -> None:
        summary = summarize_by_namespace_day(make_records(_sample_rows()), now_ms=NOW_MS, ttl_ms=6 * HOUR_MS)
        expired = {key: value[2] for key, value in _by_group(summary.collect()).items()}
        # Every record is past timestamp + 6 h; offset 3's TTL beats its later explicit expire_at.
        assert expired == {("orders", JAN1): 2, ("orders", JAN2): 2, ("payments", JAN1): 1}

    def test_nothing_expired_before_any_deadline(self, make_records: MakeRecords) -> None:
        summary = summarize_by_namespace_day(make_records(_sample_rows()), now_ms=JAN1_MS)
        assert {row["expired"] for row in summary.collect()} == {0}

    def test_uses_an_existing_date_column(self, make_records: MakeRecords) -> None:
        df = with_partition_columns(make_records(_sample_rows()))
        relabelled = df.withColumn("date", F.lit(dt.date(2030, 1, 1)))
        groups = _by_group(summarize_by_namespace_day(relabelled, now_ms=NOW_MS).collect())
        assert set(groups) == {("orders", dt.date(2030, 1, 1)), ("payments", dt.date(2030, 1, 1))}
        assert groups[("orders", dt.date(2030, 1, 1))][0] == 4

    def test_nulls_everywhere_but_namespace(self, make_records: MakeRecords) -> None:
        df = make_records(
            [record(timestamp=None, key=None, value=None, tags=None, expire_at=None, shard=None, offset=None)],
            nullable=True,
        )
        rows = summarize_by_namespace_day(df, now_ms=NOW_MS).collect()
        assert _by_group(rows) == {("orders", None): (1, 0, 0)}

    def test_empty_input_gives_an_empty_typed_summary(self, make_records: MakeRecords) -> None:
        summary = summarize_by_namespace_day(make_records([]), now_ms=NOW_MS)
        assert summary.count() == 0
        assert isinstance(summary.schema["date"].dataType, DateType)
        for name in ("records", "bytes", "expired"):
            assert isinstance(summary.schema[name].dataType, LongType)
