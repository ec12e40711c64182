"""Column names and schemas shared by the jobs; record fields follow :class:`storage_engine.api.Record`.

Times are epoch milliseconds (``timestamp``, ``expire_at``), as in the engine; ``date`` is the UTC day
of ``timestamp`` and, with ``namespace``, partitions the lake. The exported lake also has the same two times
as Spark timestamps (``timestamp_utc``, ``expire_at_utc``: instants, stored in Parquet as UTC-adjusted
millisecond timestamps), next to the integers.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DateType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

NAMESPACE = "namespace"
SHARD = "shard"
OFFSET = "offset"
TIMESTAMP = "timestamp"  # ms since the epoch
KEY = "key"
TAGS = "tags"
VALUE = "value"  # null = tombstone
EXPIRE_AT = "expire_at"  # ms since the epoch; null = no explicit expiry
DATE = "date"  # UTC date of TIMESTAMP

PARTITION_COLUMNS: tuple[str, ...] = (NAMESPACE, DATE)

RECORD_SCHEMA = StructType(
    [
        StructField(NAMESPACE, StringType(), nullable=False),
        StructField(SHARD, IntegerType(), nullable=False),
        StructField(OFFSET, LongType(), nullable=False),
        StructField(TIMESTAMP, LongType(), nullable=False),
        StructField(KEY, BinaryType(), nullable=True),
        StructField(TAGS, ArrayType(StringType(), containsNull=False), nullable=False),
        StructField(VALUE, BinaryType(), nullable=True),
        StructField(EXPIRE_AT, LongType(), nullable=True),
    ]
)

# Records as laid out in the lake: the record columns plus the partition date.
LAKE_RECORD_SCHEMA = StructType([*RECORD_SCHEMA.fields, StructField(DATE, DateType(), nullable=False)])

SUMMARY_SCHEMA = StructType(
    [
        StructField(NAMESPACE, StringType(), nullable=False),
        StructField(DATE, DateType(), nullable=True),
        StructField("records", LongType(), nullable=False),
        StructField("bytes", LongType(), nullable=False),
        StructField("expired", LongType(), nullable=False),
    ]
)

# -- lake export (issue 10) ---------------------------------------------------------------------------------
HEADERS = "headers"  # map<string, binary>; a name repeated in one record keeps its last value
SEGMENT_BASE = "segment_base"  # base offset of the segment file the record was read from

# Exported records are laid out namespace=…/date=…/shard=…/segment_base=…/part-*.parquet: partitioned by
# namespace and date, then by the segment the rows came from, so that one segment's rows can be replaced
# exactly (its directories are deleted and rewritten) when compaction rewrites the segment file.
EXPORT_PARTITION_COLUMNS: tuple[str, ...] = (NAMESPACE, DATE, SHARD, SEGMENT_BASE)

# Records as decoded from segment files (one row per stored record, in offset order per segment).
SEGMENT_RECORD_SCHEMA = StructType(
    [
        StructField(NAMESPACE, StringType(), nullable=False),
        StructField(SHARD, IntegerType(), nullable=False),
        StructField(OFFSET, LongType(), nullable=False),
        StructField(TIMESTAMP, LongType(), nullable=False),
        StructField(KEY, BinaryType(), nullable=True),
        StructField(TAGS, ArrayType(StringType(), containsNull=False), nullable=False),
        StructField(HEADERS, MapType(StringType(), BinaryType(), valueContainsNull=False), nullable=False),
        StructField(VALUE, BinaryType(), nullable=True),
        StructField(EXPIRE_AT, LongType(), nullable=True),
        StructField(SEGMENT_BASE, LongType(), nullable=False),
    ]
)

# Segment records with ``dead``: the record is marked dead by the node (the TTL scan, a bulk-loaded TTL entry)
# and still in its file. For jobs that must see dead records to judge the others as the engine does (a dead
# record is still its key's latest for compaction) or to count them (expired, not yet reclaimed); the lake
# never holds them.
DEAD = "dead"
MARKED_SEGMENT_RECORD_SCHEMA = StructType(
    [*SEGMENT_RECORD_SCHEMA.fields, StructField(DEAD, BooleanType(), nullable=False)]
)

# The lake's UTC timestamp columns: ``timestamp`` and ``expire_at`` as instants (Spark TimestampType, Parquet
# TIMESTAMP(MILLIS, isAdjustedToUTC=true)); the millisecond integers stay. Null expire_at → null.
TIMESTAMP_UTC = "timestamp_utc"
EXPIRE_AT_UTC = "expire_at_utc"
UTC_TIMESTAMP_FIELDS = (
    StructField(TIMESTAMP_UTC, TimestampType(), nullable=False),
    StructField(EXPIRE_AT_UTC, TimestampType(), nullable=True),
)

# The exported lake as read back (partition columns included), for readers that want stable types
# rather than Spark's partition-type inference (a namespace named "2024" would otherwise read as an int).
EXPORT_LAKE_SCHEMA = StructType(
    [*SEGMENT_RECORD_SCHEMA.fields, *UTC_TIMESTAMP_FIELDS, StructField(DATE, DateType(), nullable=False)]
)

# The same columns as a catalog table declares them: data columns, then the partition columns in layout order.
LAKE_TABLE_SCHEMA = StructType(
    [f for f in EXPORT_LAKE_SCHEMA.fields if f.name not in EXPORT_PARTITION_COLUMNS]
    + [EXPORT_LAKE_SCHEMA[name] for name in EXPORT_PARTITION_COLUMNS]
)
