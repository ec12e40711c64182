"""The lifecycle transforms on small in-memory DataFrames: byte accounting against the codec, TTLs,
superseded keys, the per namespace/day figures against a hand computation, nulls and empty inputs."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StructType

from spark_jobs.schema import SEGMENT_RECORD_SCHEMA
from spark_jobs.transforms import (
    encoded_record_bytes,
    lifecycle_namespace_totals,
    lifecycle_report,
    namespace_ttl,
    with_superseded,
)
from storage_engine.api import Record
from storage_engine.formats.codec import HEADER_SIZE, encode_batch
from tests.spark.helpers import DAY_MS, JAN1_MS
from tests.spark.lifecycle_expect import Rec, expected_report, report_rows_to_dict

pytestmark = pytest.mark.spark

MIN = 60_000
HOUR = 3_600_000
JAN1 = dt.date(2024, 1, 1)
JAN2 = dt.date(2024, 1, 2)
NULLABLE_SEGMENT_SCHEMA = StructType.fromJson(
    {"type": "struct", "fields": [{**f.jsonValue(), "nullable": True} for f in SEGMENT_RECORD_SCHEMA.fields]}
)


def _df(spark: SparkSession, recs: Sequence[Rec], nullable: bool = False) -> DataFrame:
    rows = [
        (r.namespace, r.shard, r.offset, r.timestamp, r.key, list(r.tags), dict(r.headers), r.value, r.expire_at, 0)
        for r in recs
    ]
    return spark.createDataFrame(rows, NULLABLE_SEGMENT_SCHEMA if nullable else SEGMENT_RECORD_SCHEMA)


def rec(**fields: Any) -> Rec:
    base: dict[str, Any] = {
        "namespace": "orders",
        "shard": 0,
        "offset": 0,
        "timestamp": JAN1_MS,
        "key": None,
        "tags": (),
        "headers": {},
        "value": b"v",
        "expire_at": None,
    }
    base.update(fields)
    return Rec(**base)


class TestEncodedRecordBytes:
    def test_matches_the_codec_byte_for_byte(self, spark: SparkSession) -> None:
        recs = [
            rec(offset=0, key=b"key", tags=("eu", "é"), headers={"trace": b"abcd", "n": b""}, value=b"x" * 50),
            rec(offset=1, key=None, value=None),  # tombstone without key
            rec(offset=2, key=b"", tags=(), value=b""),
            rec(offset=3, key=b"k", tags=("a" * 200,), value=b"y" * 3, expire_at=JAN1_MS + 5),
        ]
        sizes = [r["s"] for r in _df(spark, recs).orderBy("offset").select(encoded_record_bytes().alias("s")).collect()]
        for r, size in zip(recs, sizes, strict=True):
            stored = Record(r.offset, r.timestamp, r.value, r.key, r.tags, tuple(r.headers.items()), r.expire_at)
            assert size == len(encode_batch(r.offset, [stored])) - HEADER_SIZE == r.size

    def test_null_collections_count_nothing(self, spark: SparkSession) -> None:
        df = spark.createDataFrame(
            [("orders", 0, 0, JAN1_MS, None, None, None, b"abc", None, 0)], NULLABLE_SEGMENT_SCHEMA
        )
        assert df.select(encoded_record_bytes().alias("s")).first()["s"] == 33 + 3  # type: ignore[index]
        assert df.drop("headers").select(encoded_record_bytes(with_headers=False).alias("s")).first()["s"] == 36  # type: ignore[index]


class TestNamespaceTtl:
    def test_per_namespace_and_absent(self, spark: SparkSession) -> None:
        df = _df(spark, [rec(namespace="orders"), rec(namespace="audit"), rec(namespace="other")])
        got = {
            r["namespace"]: r["t"]
            for r in df.select("namespace", namespace_ttl({"orders": 5, "audit": 7}).alias("t")).collect()
        }
        assert got == {"orders": 5, "audit": 7, "other": None}
        none = df.select(namespace_ttl({}).alias("t"))
        assert {r["t"] for r in none.collect()} == {None}
        assert isinstance(none.schema["t"].dataType, LongType)


class TestWithSuperseded:
    def test_latest_per_shard_and_key(self, spark: SparkSession) -> None:
        recs = [
            rec(shard=0, offset=0, key=b"a"),
            rec(shard=0, offset=1, key=b"a"),  # latest a in shard 0
            rec(shard=1, offset=0, key=b"a"),  # another shard: its own latest
            rec(shard=0, offset=2, key=None),
            rec(shard=0, offset=3, key=None),  # no key: never superseded
            rec(shard=0, offset=4, key=b"b", value=None),  # a tombstone is the latest too
            rec(namespace="audit", shard=0, offset=0, key=b"a"),
        ]
        out = with_superseded(_df(spark, recs)).collect()
        flags = {(r["namespace"], r["shard"], r["offset"]): r["superseded"] for r in out}
        assert flags == {
            ("orders", 0, 0): True,
            ("orders", 0, 1): False,
            ("orders", 1, 0): False,
            ("orders", 0, 2): False,
            ("orders", 0, 3): False,
            ("orders", 0, 4): False,
            ("audit", 0, 0): False,
        }

    def test_empty(self, spark: SparkSession) -> None:
        out = with_superseded(_df(spark, []))
        assert out.count() == 0 and "superseded" in out.columns


def _sample() -> list[Rec]:
    return [
        # orders, 2024-01-01
        rec(offset=0, timestamp=JAN1_MS, key=b"a", expire_at=JAN1_MS + 30_000, value=b"x" * 10),
        rec(offset=1, timestamp=JAN1_MS + HOUR, key=b"a", expire_at=JAN1_MS + 3 * HOUR, value=b"x" * 20),
        rec(offset=2, timestamp=JAN1_MS + 2 * HOUR, key=None, expire_at=None, tags=("eu",), value=b"x" * 30),
        rec(offset=3, timestamp=JAN1_MS + 3 * HOUR, key=b"b", expire_at=JAN1_MS + 40 * DAY_MS, value=None),
        # orders, 2024-01-02: supersedes offset 3's key on a later day
        rec(
            offset=4,
            timestamp=JAN1_MS + DAY_MS,
            key=b"b",
            headers={"h": b"12"},
            expire_at=JAN1_MS + DAY_MS + 2 * DAY_MS,
        ),
        rec(shard=1, offset=0, timestamp=JAN1_MS + DAY_MS + 1, key=b"a", expire_at=None),
        # audit, 2024-01-01
        rec(namespace="audit", offset=0, timestamp=JAN1_MS + 5, expire_at=JAN1_MS + 5 + 10 * MIN),
    ]


NOW = JAN1_MS + DAY_MS + 12 * HOUR  # 2024-01-02T12:00Z


class TestLifecycleReport:
    def test_against_a_hand_computation(self, spark: SparkSession) -> None:
        recs = _sample()
        rows = [r.asDict(recursive=True) for r in lifecycle_report(_df(spark, recs), now_ms=NOW).collect()]
        got = report_rows_to_dict(rows)
        assert got == expected_report(recs, NOW, {})
        # A few figures spelled out.
        jan1 = got[("orders", JAN1)]
        assert (jan1["records"], jan1["expired_records"], jan1["unbounded_records"]) == (4, 2, 1)
        assert jan1["lifetime_histogram"] == {"le_1m": 1, "le_1h": 0, "le_1d": 1, "le_7d": 0, "le_30d": 0, "gt_30d": 1}
        assert jan1["lifetime_p50_ms"] == 2 * HOUR  # lifetimes 30 s, 2 h, 40 d
        assert jan1["overdue_max_ms"] == NOW - (JAN1_MS + 30_000)
        assert (jan1["keyed_records"], jan1["superseded_records"]) == (3, 2)  # a@0 by a@1; b@3 by b@4 (next day)
        assert jan1["superseded_bytes"] == (33 + 1 + 10) + (33 + 1)
        assert jan1["duplicate_key_ratio"] == pytest.approx(2 / 3)
        jan2 = got[("orders", JAN2)]
        assert (jan2["records"], jan2["expired_records"], jan2["superseded_records"]) == (2, 0, 0)
        assert jan2["overdue_p50_ms"] is None and jan2["expired_ratio"] == 0.0
        assert got[("audit", JAN1)]["expired_ratio"] == 1.0

    def test_namespace_ttl_joins_expire_at(self, spark: SparkSession) -> None:
        recs = _sample()
        ttls = {"orders": 6 * HOUR}
        got = report_rows_to_dict(
            [r.asDict(recursive=True) for r in lifecycle_report(_df(spark, recs), NOW, ttls).collect()]
        )
        assert got == expected_report(recs, NOW, ttls)
        jan2 = got[("orders", JAN2)]
        # Both records of the 2nd are past timestamp + 6 h at noon; the TTL beats offset 4's later expire_at.
        assert (jan2["expired_records"], jan2["unbounded_records"], jan2["lifetime_p99_ms"]) == (2, 0, 6 * HOUR)

    def test_namespace_totals(self, spark: SparkSession) -> None:
        recs = _sample()
        rows = [r.asDict(recursive=True) for r in lifecycle_namespace_totals(_df(spark, recs), NOW).collect()]
        got = report_rows_to_dict(rows, by_day=False)
        assert got == expected_report(recs, NOW, {}, by_day=False)
        assert got[("orders",)]["records"] == 6

    def test_nulls(self, spark: SparkSession) -> None:
        df = spark.createDataFrame(
            [
                ("orders", 0, 0, JAN1_MS, None, None, None, None, None, 0),
                ("orders", 0, 1, JAN1_MS, None, [], {}, b"", JAN1_MS, 0),
            ],
            NULLABLE_SEGMENT_SCHEMA,
        )
        (row,) = lifecycle_report(df, now_ms=JAN1_MS).collect()
        assert (row["records"], row["bytes"], row["expired_records"], row["unbounded_records"]) == (2, 66, 1, 1)
        assert row["keyed_records"] == 0 and row["duplicate_key_ratio"] is None
        assert row["lifetime_p50_ms"] == 0 and row["overdue_max_ms"] == 0

    def test_empty_input_gives_an_empty_typed_report(self, spark: SparkSession) -> None:
        report = lifecycle_report(_df(spark, []), now_ms=NOW, ttls={"orders": 1})
        assert report.count() == 0
        types = {f.name: f.dataType for f in report.schema.fields}
        assert isinstance(types["records"], LongType) and isinstance(types["expired_ratio"], DoubleType)
        assert isinstance(types["lifetime_p50_ms"], LongType)
        assert [f.name for f in types["lifetime_histogram"].fields] == [
            "le_1m",
            "le_1h",
            "le_1d",
            "le_7d",
            "le_30d",
            "gt_30d",
        ]  # type: ignore[attr-defined]

    def test_record_schema_without_headers(self, spark: SparkSession, make_records: Any) -> None:
        from tests.spark.helpers import record

        df = make_records([record(offset=0, key=b"k", value=b"abc", tags=["t"]), record(offset=1, key=b"k")])
        (row,) = lifecycle_report(df, now_ms=NOW).collect()
        assert row["bytes"] == (33 + 1 + 3 + 2) + (33 + 1 + 5)
        assert row["superseded_records"] == 1
        assert df.select(F.lit(1)).count() == 2
