"""Pure DataFrame transforms shared by the jobs: DataFrames in, DataFrames out, no I/O, no session.

They are independent of ``spark.sql.session.timeZone`` and of the machine's zone: dates come from integer
arithmetic on epoch milliseconds, so a record's ``date`` is its UTC day whatever the session's zone, and
timestamps come from ``timestamp_millis`` (an instant built from the epoch count, no zone involved).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark_jobs.schema import (
    DATE,
    DEAD,
    EXPIRE_AT,
    EXPIRE_AT_UTC,
    HEADERS,
    KEY,
    NAMESPACE,
    OFFSET,
    SEGMENT_BASE,
    SHARD,
    TAGS,
    TIMESTAMP,
    TIMESTAMP_UTC,
    VALUE,
)

SUPERSEDED = "superseded"

MS_PER_DAY = 86_400_000


def utc_date(epoch_ms: Column) -> Column:
    """The UTC calendar date of an epoch-milliseconds column (null stays null; before 1970 works)."""
    return F.date_from_unix_date(F.floor(epoch_ms / F.lit(MS_PER_DAY)).cast("int"))


def utc_timestamp(epoch_ms: Column) -> Column:
    """An epoch-milliseconds column as a Spark timestamp (an instant: shown in the session's zone, UTC in
    every session the jobs build); exact to the millisecond, null stays null."""
    return F.timestamp_millis(epoch_ms)


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


def with_utc_timestamps(df: DataFrame) -> DataFrame:
    """Add ``timestamp_utc`` and ``expire_at_utc``: the millisecond integers as timestamps, which stay."""
    return df.withColumn(TIMESTAMP_UTC, utc_timestamp(F.col(TIMESTAMP))).withColumn(
        EXPIRE_AT_UTC, utc_timestamp(F.col(EXPIRE_AT))
    )


def lake_rows(df: DataFrame) -> DataFrame:
    """Records as the lake stores them: the UTC timestamp columns and the partition ``date`` added."""
    return with_partition_columns(with_utc_timestamps(df))


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


# -- lifecycle report (issue 10) ---------------------------------------------------------------------------

RECORD_FIXED_BYTES = 33  # storage_engine.formats.codec.RECORD_FIXED_SIZE: size, attributes, delta, times, lengths
MINUTE_MS = 60_000
HOUR_MS = 3_600_000
PERCENTILES: tuple[float, ...] = (0.5, 0.9, 0.99)
PERCENTILE_ACCURACY = 10_000
# Upper bounds (inclusive) of the lifetime histogram's buckets; the last bucket takes everything longer.
LIFETIME_BUCKETS: tuple[tuple[str, int | None], ...] = (
    ("le_1m", MINUTE_MS),
    ("le_1h", HOUR_MS),
    ("le_1d", MS_PER_DAY),
    ("le_7d", 7 * MS_PER_DAY),
    ("le_30d", 30 * MS_PER_DAY),
    ("gt_30d", None),
)


def encoded_record_bytes(with_headers: bool = True) -> Column:
    """Bytes a record takes in a segment file (the codec's record layout, batch headers aside):
    33 fixed + key + per tag (1 + UTF-8 bytes) + per header (6 + name + value) + value."""
    tags = F.aggregate(
        F.coalesce(F.col(TAGS), F.array().cast("array<string>")),
        F.lit(0).cast("long"),
        lambda acc, tag: acc + 1 + F.octet_length(tag),
    )
    size = F.lit(RECORD_FIXED_BYTES).cast("long") + payload_bytes() + tags
    if with_headers:
        entries = F.map_entries(F.coalesce(F.col(HEADERS), F.create_map().cast("map<string,binary>")))
        headers = F.aggregate(
            entries,
            F.lit(0).cast("long"),
            lambda acc, e: acc + 6 + F.octet_length(e["key"]) + F.length(e["value"]),
        )
        size = size + headers
    return size


def namespace_ttl(ttls: Mapping[str, int]) -> Column:
    """The namespace's ``ttl_ms`` from ``ttls`` (null for a namespace without one)."""
    if not ttls:
        return F.lit(None).cast("long")
    pairs = [item for name, ttl in sorted(ttls.items()) for item in (F.lit(name), F.lit(int(ttl)).cast("long"))]
    return F.create_map(*pairs)[F.col(NAMESPACE)]


def effective_expiry_for(ttl: Column) -> Column:
    """``min(expire_at, timestamp + ttl)`` with a per-row TTL column; null when neither side applies."""
    return F.least(F.col(EXPIRE_AT), F.col(TIMESTAMP) + ttl)


def with_superseded(df: DataFrame) -> DataFrame:
    """Add ``superseded``: the record has a key and a later offset in its shard has the same key, so
    compaction would drop it (DESIGN §3: keep a record iff it is the latest for its key). Never null."""
    latest = F.max(F.col(OFFSET)).over(Window.partitionBy(NAMESPACE, SHARD, KEY))
    return df.withColumn(SUPERSEDED, F.coalesce(F.col(KEY).isNotNull() & (F.col(OFFSET) < latest), F.lit(False)))


def _expired_or_dead(expired: Column, has_dead: bool) -> Column:
    flag = F.coalesce(expired, F.lit(False))
    return flag | F.coalesce(F.col(DEAD), F.lit(False)) if has_dead else flag


def _ratio(part: Column, whole: Column) -> Column:
    return F.when(whole > 0, part.cast("double") / whole.cast("double"))


def _percentiles(column: Column, prefix: str) -> list[Column]:
    values = F.percentile_approx(column, list(PERCENTILES), PERCENTILE_ACCURACY)
    return [values[i].alias(f"{prefix}_p{round(p * 100)}_ms") for i, p in enumerate(PERCENTILES)]


def lifecycle_aggregates(df: DataFrame, group_by: Sequence[str], now_ms: int, ttls: Mapping[str, int]) -> DataFrame:
    """The lifecycle figures of ``df`` (records, lake or segment schema) grouped by ``group_by``.

    Per group: ``records``, ``bytes`` (encoded record bytes); ``expired_records`` / ``expired_bytes`` and
    their ratios at ``now_ms`` (effective expiry ≤ now, DESIGN §3, with the namespace TTLs of ``ttls``);
    ``unbounded_records`` (no effective expiry); record lifetimes (effective expiry − timestamp) as
    p50/p90/p99 and a histogram over :data:`LIFETIME_BUCKETS`; for expired records, how long they have
    outlived their expiry (now − expiry) as p50/p90/p99/max; ``keyed_records``, ``superseded_records`` and
    ``superseded_bytes`` (not the latest for their key in their shard: what compaction would reclaim) and
    ``duplicate_key_ratio`` = superseded ÷ keyed. Ratios and percentiles are null for an empty base.

    Records with ``dead`` true (segment records read with ``dead="mark"``: marked dead by the node, not yet
    reclaimed) count as expired, as in the engine's figures, whatever their own fields say; lifetimes and
    the time past expiry come from the fields alone (a dead record not expired by its fields has none).
    """
    if DATE not in df.columns:
        df = with_partition_columns(df)
    if SUPERSEDED not in df.columns:
        df = with_superseded(df)
    expiry = effective_expiry_for(namespace_ttl(ttls))
    rows = df.select(
        *group_by,
        encoded_record_bytes(with_headers=HEADERS in df.columns).alias("_bytes"),
        (expiry - F.col(TIMESTAMP)).alias("_lifetime"),
        _expired_or_dead(expiry <= F.lit(now_ms), DEAD in df.columns).alias("_expired"),
        F.when(expiry <= F.lit(now_ms), F.lit(now_ms) - expiry).alias("_overdue"),  # expired by its fields
        F.col(KEY).isNotNull().alias("_keyed"),
        F.col(SUPERSEDED).alias("_superseded"),
    )
    lifetime = F.col("_lifetime")
    expired = F.col("_expired")
    size = F.col("_bytes")
    buckets = []
    lower: int | None = None
    for name, upper in LIFETIME_BUCKETS:
        condition = lifetime.isNotNull()
        if lower is not None:
            condition = condition & (lifetime > lower)
        if upper is not None:
            condition = condition & (lifetime <= upper)
        buckets.append(F.count_if(condition).cast("long").alias(name))
        lower = upper
    zero = F.lit(0).cast("long")
    summary = rows.groupBy(*group_by).agg(
        F.count(F.lit(1)).alias("records"),
        F.coalesce(F.sum(size), zero).alias("bytes"),
        F.count_if(expired).cast("long").alias("expired_records"),
        F.coalesce(F.sum(F.when(expired, size)), zero).alias("expired_bytes"),
        F.count_if(lifetime.isNull()).cast("long").alias("unbounded_records"),
        *_percentiles(lifetime, "lifetime"),
        F.struct(*buckets).alias("lifetime_histogram"),
        *_percentiles(F.col("_overdue"), "overdue"),
        F.max(F.col("_overdue")).alias("overdue_max_ms"),
        F.count_if(F.col("_keyed")).cast("long").alias("keyed_records"),
        F.count_if(F.col("_superseded")).cast("long").alias("superseded_records"),
        F.coalesce(F.sum(F.when(F.col("_superseded"), size)), zero).alias("superseded_bytes"),
    )
    return summary.select(
        *group_by,
        "records",
        "bytes",
        "expired_records",
        "expired_bytes",
        _ratio(F.col("expired_records"), F.col("records")).alias("expired_ratio"),
        _ratio(F.col("expired_bytes"), F.col("bytes")).alias("expired_bytes_ratio"),
        "unbounded_records",
        *(f"lifetime_p{round(p * 100)}_ms" for p in PERCENTILES),
        "lifetime_histogram",
        *(f"overdue_p{round(p * 100)}_ms" for p in PERCENTILES),
        "overdue_max_ms",
        "keyed_records",
        "superseded_records",
        "superseded_bytes",
        _ratio(F.col("superseded_records"), F.col("keyed_records")).alias("duplicate_key_ratio"),
    )


def lifecycle_report(df: DataFrame, now_ms: int, ttls: Mapping[str, int] | None = None) -> DataFrame:
    """:func:`lifecycle_aggregates` per namespace and UTC day (superseded is judged over the whole input,
    so a record superseded by one written on a later day counts on its own day)."""
    return lifecycle_aggregates(df, (NAMESPACE, DATE), now_ms, ttls or {})


def lifecycle_namespace_totals(df: DataFrame, now_ms: int, ttls: Mapping[str, int] | None = None) -> DataFrame:
    """:func:`lifecycle_aggregates` per namespace (percentiles over all its days)."""
    return lifecycle_aggregates(df, (NAMESPACE,), now_ms, ttls or {})


# -- compaction plan and TTL backfill (issue 10) -----------------------------------------------------------

KEEP = "keep"  # compaction plan: the record survives the keep rule
KEPT_OFFSETS = "keep_offsets"  # compaction plan: per segment, the offsets to keep, ascending


def with_compaction_keep(df: DataFrame, now_ms: int, ttl_ms: int | None = None) -> DataFrame:
    """Add ``keep``: the engine's compaction keep rule (DESIGN §3, ``storage_engine.compaction``) for a
    record, judged over every record of ``df`` (all the sealed segments of the shards it holds).

    A record is kept iff it is not expired at ``now_ms`` (effective expiry with the namespace
    ``ttl_ms``), not marked dead by the node (the ``dead`` column, when ``df`` has it: a dead record
    still counts as its key's latest, as in the engine's key map, but is never kept) and it is the
    latest for its key in its shard (records without a key are always the latest). A latest tombstone
    is kept: its delete horizon starts at the time the node first cleans it, which the segment files do
    not say, so the node's own compaction drops it later. Never null: a row without an offset is not
    kept.
    """
    if SUPERSEDED not in df.columns:
        df = with_superseded(df)
    keep = ~is_expired(now_ms, ttl_ms) & ~F.col(SUPERSEDED) & F.col(OFFSET).isNotNull()
    if DEAD in df.columns:
        keep = keep & ~F.coalesce(F.col(DEAD), F.lit(False))
    return df.withColumn(KEEP, F.coalesce(keep, F.lit(False)))


def compaction_plan(df: DataFrame, now_ms: int, ttl_ms: int | None = None) -> DataFrame:
    """Per ``namespace``, ``shard`` and ``segment_base``: ``keep_offsets`` (ascending offsets to keep,
    empty when nothing survives), ``records`` and ``kept``. Input: segment records
    (:data:`~spark_jobs.schema.SEGMENT_RECORD_SCHEMA`, at least its record columns and
    ``segment_base``); every segment present in the input has a row. Unordered."""
    kept = with_compaction_keep(df, now_ms, ttl_ms)
    return kept.groupBy(NAMESPACE, SHARD, SEGMENT_BASE).agg(
        F.sort_array(F.collect_list(F.when(F.col(KEEP), F.col(OFFSET)))).alias(KEPT_OFFSETS),
        F.count(F.lit(1)).alias("records"),
        F.count_if(F.col(KEEP)).cast("long").alias("kept"),
    )


def backfill_match(tag: str | None = None, key_prefix: bytes | None = None) -> Column:
    """The TTL-backfill rule as a condition: records carrying ``tag``, or whose key starts with
    ``key_prefix`` (exactly one of them). Never null: no tags / no key do not match."""
    if (tag is None) == (key_prefix is None):
        raise ValueError("give exactly one of tag and key_prefix")
    if tag is not None:
        return F.coalesce(F.array_contains(F.col(TAGS), F.lit(tag)), F.lit(False))
    assert key_prefix is not None
    head = F.substring(F.col(KEY), 1, len(key_prefix)) if key_prefix else F.col(KEY)
    matched = head == F.lit(key_prefix) if key_prefix else F.col(KEY).isNotNull()
    return F.coalesce(matched, F.lit(False))


def ttl_backfill(
    df: DataFrame,
    ttl_ms: int,
    *,
    tag: str | None = None,
    key_prefix: bytes | None = None,
    namespace_ttl_ms: int | None = None,
) -> DataFrame:
    """TTL-index entries to add when a rule gives records an explicit TTL after they were written:
    ``namespace``, ``shard``, ``offset``, ``expire_at`` = ``timestamp + ttl_ms`` for every record that
    matches the rule (:func:`backfill_match`) and has no earlier effective expiry.

    Left out: records with an explicit ``expire_at`` (they have their one TTL-index entry already; a
    second would have the scan count the record dead twice), every record when the namespace TTL
    already expires it no later (``namespace_ttl_ms ≤ ttl_ms``), and rows without a timestamp, shard
    or offset. Unordered.
    """
    if ttl_ms < 1:
        raise ValueError(f"ttl_ms must be a positive integer, got {ttl_ms}")
    if namespace_ttl_ms is not None and namespace_ttl_ms <= ttl_ms:
        return df.select(NAMESPACE, SHARD, OFFSET, (F.col(TIMESTAMP) + F.lit(ttl_ms)).alias(EXPIRE_AT)).limit(0)
    wanted = (
        backfill_match(tag, key_prefix)
        & F.col(EXPIRE_AT).isNull()
        & F.col(TIMESTAMP).isNotNull()
        & F.col(SHARD).isNotNull()
        & F.col(OFFSET).isNotNull()
    )
    return df.where(wanted).select(
        NAMESPACE, SHARD, OFFSET, (F.col(TIMESTAMP) + F.lit(ttl_ms)).cast("long").alias(EXPIRE_AT)
    )
