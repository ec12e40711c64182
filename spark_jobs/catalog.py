"""The lake as a catalog table whose partitions the export keeps registered.

Spark treats a partitioned table created with ``CREATE TABLE … USING parquet LOCATION '<lake>'`` as one
whose partitions live in the catalog ("Partition Provider: Catalog"): it reads no row until the partitions
are registered, and none added later, unless someone runs ``MSCK REPAIR TABLE`` or ``ALTER TABLE … ADD
PARTITION``. So the export does it: after putting rows in place it makes the table's partitions exactly the
lake's leaf directories that hold data (``ALTER TABLE … ADD IF NOT EXISTS PARTITION`` for new ones, ``DROP
IF EXISTS PARTITION`` for emptied ones) and refreshes the table. Every run syncs the whole list, so a run
that failed before registering is made good by the next one.

The table (``--table``, default :data:`DEFAULT_TABLE`) is created by the export when missing, with the
lake's explicit schema and partition columns; one a reader created earlier with ``CREATE TABLE <name> USING
parquet LOCATION '<lake>'`` is adopted as it is (its location must be the lake's; columns the lake gained
since are added to it).

Which catalog: the session's. A job started on its own gets Spark's built-in Hive catalog on an embedded
Derby metastore under ``<lake path>/_metastore`` (:func:`metastore_conf`); readers use the same one
(``spark.sql.catalogImplementation=hive`` and the same ``javax.jdo.option.ConnectionURL``), or point both at
a shared Hive metastore with ``--conf spark.hadoop.hive.metastore.uris=thrift://…``. Embedded Derby admits
one JVM at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from pyspark.sql import SparkSession

from spark_jobs.lake import LakeFileSystem
from spark_jobs.schema import EXPORT_PARTITION_COLUMNS, LAKE_TABLE_SCHEMA

DEFAULT_TABLE = "lifecycle.records"
METASTORE_DIR = "_metastore"
STATEMENT_PARTITIONS = 200  # partitions per ALTER TABLE statement

PartitionValues = tuple[str, ...]  # one value per EXPORT_PARTITION_COLUMNS, as in the directory names


class CatalogError(ValueError):
    """The table cannot hold the lake (another location, other partition columns)."""


@dataclass
class PartitionSync:
    table: str
    created: bool = False
    columns_added: tuple[str, ...] = ()
    added: int = 0
    dropped: int = 0
    partitions: int = 0


def metastore_conf(metastore_dir: str | Path) -> dict[str, str]:
    """Spark settings for the built-in Hive catalog on an embedded Derby metastore in ``metastore_dir``
    (the warehouse, the database and ``derby.log`` all under it)."""
    home = Path(metastore_dir).expanduser().resolve()
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(home / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={home / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={home}",
    }


def with_conf(extra: Mapping[str, str], defaults: Mapping[str, str]) -> dict[str, str]:
    """``defaults`` under the caller's ``extra`` settings (theirs win; JVM options are joined)."""
    merged = {**defaults, **extra}
    key = "spark.driver.extraJavaOptions"
    if key in extra and key in defaults:
        merged[key] = f"{defaults[key]} {extra[key]}"
    return merged


def quote_identifier(name: str) -> str:
    """``db.table`` → ```db`.`table```."""
    parts = name.split(".")
    if not 1 <= len(parts) <= 3 or not all(parts):
        raise CatalogError(f"not a table name: {name!r}")
    return ".".join("`" + part.replace("`", "``") + "`" for part in parts)


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _spec(values: PartitionValues) -> str:
    pairs = ", ".join(f"`{c}` = {_literal(v)}" for c, v in zip(EXPORT_PARTITION_COLUMNS, values, strict=True))
    return f"PARTITION ({pairs})"


def parse_partition(path: str) -> PartitionValues:
    """``namespace=a/date=2024-01-01/shard=0/segment_base=5`` (a leaf directory, or what ``SHOW PARTITIONS``
    says) → its values, unescaped as Spark escapes path names."""
    parts = path.strip("/").split("/")
    names = tuple(part.partition("=")[0] for part in parts)
    if names != EXPORT_PARTITION_COLUMNS:
        raise CatalogError(f"{path!r} is not a partition of the lake's layout {EXPORT_PARTITION_COLUMNS}")
    return tuple(unquote(part.partition("=")[2]) for part in parts)


def table_ddl(table: str, location: str) -> str:
    columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in LAKE_TABLE_SCHEMA.fields)
    partitioned = ", ".join(f"`{c}`" for c in EXPORT_PARTITION_COLUMNS)
    return (
        f"CREATE TABLE {quote_identifier(table)} ({columns}) USING parquet "
        f"PARTITIONED BY ({partitioned}) LOCATION {_literal(location)}"
    )


def _location(spark: SparkSession, table: str) -> str:
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {quote_identifier(table)}").collect():
        if row[0] == "Location":
            return str(row[1])
    raise CatalogError(f"{table} has no location: not a table over the lake")


def ensure_table(spark: SparkSession, table: str, lake: LakeFileSystem, sync: PartitionSync) -> None:
    """Create ``table`` over the lake, or check that an existing one is over it and has every column."""
    ident = quote_identifier(table)
    parts = table.split(".")
    if len(parts) == 2:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote_identifier(parts[0])}")
    if not spark.catalog.tableExists(table):
        spark.sql(table_ddl(table, lake.uri()))
        sync.created = True
        return
    location = _location(spark, table)
    if not lake.same_location(location):
        raise CatalogError(f"table {table} is over {location}, not the lake {lake.uri()}: give another --table")
    columns = spark.catalog.listColumns(table)
    partitioned = tuple(c.name for c in columns if c.isPartition)
    if partitioned != EXPORT_PARTITION_COLUMNS:
        raise CatalogError(f"table {table} is partitioned by {partitioned}, the lake by {EXPORT_PARTITION_COLUMNS}")
    present = {c.name for c in columns}
    missing = [f for f in LAKE_TABLE_SCHEMA.fields if f.name not in present]
    if missing:
        added = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in missing)
        spark.sql(f"ALTER TABLE {ident} ADD COLUMNS ({added})")
        sync.columns_added = tuple(f.name for f in missing)


def registered_partitions(spark: SparkSession, table: str) -> set[PartitionValues]:
    rows = spark.sql(f"SHOW PARTITIONS {quote_identifier(table)}").collect()
    return {parse_partition(str(row[0])) for row in rows}


def _chunks(items: list[PartitionValues]) -> Iterable[list[PartitionValues]]:
    for start in range(0, len(items), STATEMENT_PARTITIONS):
        yield items[start : start + STATEMENT_PARTITIONS]


def sync_partitions(spark: SparkSession, table: str, lake: LakeFileSystem, leaves: Iterable[str]) -> PartitionSync:
    """Make ``table``'s partitions exactly ``leaves`` (the lake's leaf directories holding data), then
    refresh it; creates or adopts the table first (:func:`ensure_table`)."""
    sync = PartitionSync(table=table)
    ensure_table(spark, table, lake, sync)
    wanted = {parse_partition(leaf) for leaf in leaves}
    present = set() if sync.created else registered_partitions(spark, table)
    ident = quote_identifier(table)
    to_add = sorted(wanted - present)
    for chunk in _chunks(to_add):
        spark.sql(f"ALTER TABLE {ident} ADD IF NOT EXISTS " + " ".join(_spec(v) for v in chunk))
    to_drop = sorted(present - wanted)
    for chunk in _chunks(to_drop):
        spark.sql(f"ALTER TABLE {ident} DROP IF EXISTS " + ", ".join(_spec(v) for v in chunk))
    spark.sql(f"REFRESH TABLE {ident}")
    sync.added, sync.dropped, sync.partitions = len(to_add), len(to_drop), len(wanted)
    return sync
