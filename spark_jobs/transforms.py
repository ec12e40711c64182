"""Pure DataFrame transforms shared by the jobs: DataFrames in, DataFrames out, no I/O, no session.

They are independent of ``spark.sql.session.timeZone``: dates come from integer arithmetic on epoch
milliseconds, so a record's ``date`` is its UTC day whatever the session's zone.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.schema import DATE, EXPIRE_AT, KEY, NAMESPACE, TIMESTAMP, VALUE

MS_PER_DAY = 86_400_000


def utc_date(epoch_ms: Column) -> Column:
    """The UTC calendar date of an epoch-milliseconds column (null stays null; before 1970 works)."""
    return F.date_from_unix_date(F.floor(epoch_ms / F.lit(MS_PER_DAY)).cast("int"))


def effective_expiry(ttl_ms: int | None = None) -> Column:
    """``min(expire_at, timestamp + ttl_ms)``, either side absent = never; null when neither applies."""
    if ttl_ms is None:
        return F.col(EXPIRE_AT)
    # least() skips nulls: it is null only when both sides are.
    return F.least(F.col(EXPIRE_AT), F.col(TIMESTAMP) + F.lit(ttl_ms))


def is_expired(now_ms: int, ttl_ms: int | None = None) -> Column:
    """True when the record's effective expiry is at or before ``now_ms`` (DESIGN §3); never null."""
    expiry = effective_expiry(ttl_ms)
    return F.coalesce(expiry <= F.lit(now_ms), F.lit(False))


def payload_bytes() -> Column:
    """Key plus value length in bytes; a missing key or a tombstone's value counts 0."""
    return F.coalesce(F.length(F.col(KEY)), F.lit(0)) + F.coalesce(F.length(F.col(VALUE)), F.lit(0))


def with_partition_columns(df: DataFrame) -> DataFrame:
    """Add ``date``, the UTC date of ``timestamp``; ``namespace`` stays an ordinary column."""
    return df.withColumn(DATE, utc_date(F.col(TIMESTAMP)))


def summarize_by_namespace_day(df: DataFrame, now_ms: int, ttl_ms: int | None = None) -> DataFrame:
    """Per namespace and UTC day: ``records``, ``bytes`` (key + value) and ``expired`` as of ``now_ms``.

    Takes records with or without the ``date`` column (it is derived when missing). Unordered; an empty
    input gives an empty summary.
    """
    if DATE not in df.columns:
        df = with_partition_columns(df)
    return df.groupBy(NAMESPACE, DATE).agg(
        F.count(F.lit(1)).alias("records"),
        F.coalesce(F.sum(payload_bytes()), F.lit(0)).cast("long").alias("bytes"),
        F.count_if(is_expired(now_ms, ttl_ms)).cast("long").alias("expired"),
    )
