"""``lake-export``: sealed segment files → the Parquet lake, incrementally and idempotently.

The driver asks the node for its sealed segments and the records in them it counts dead (``--node-url``,
or ``--offline`` on a directory no node runs on: :mod:`spark_jobs.source`) and fingerprints them, the
manifest says which were already exported, and the rest are read on the executors straight from the files
under ``--data-dir`` with the engine's own reader (:mod:`spark_jobs.segments`), dead records left out, and
written with Spark's Parquet writer. Record data never goes through the node's API, and Spark never opens
its RocksDB.

Layout (under ``--output``, default ``<lake path>/records``)::

    namespace=<ns>/date=<UTC day>/shard=<n>/segment_base=<base offset>/part-….parquet   (one file per leaf)
    _manifest/manifest-<run>.json
    _staging/run-<run>/…        (only while a run puts its rows in place, or after one was killed)

Columns: the record's fields (``offset``, ``timestamp`` and ``expire_at`` in epoch milliseconds, ``key``,
``tags``, ``headers``, ``value``), ``timestamp_utc`` and ``expire_at_utc`` (the same instants as Spark
timestamps, written as Parquet ``TIMESTAMP(MILLIS, isAdjustedToUTC=true)``), and the partition columns.

Why the segment is part of the layout: a sealed segment changes only by a whole-file swap (compaction
rewrites it without its dead, expired and superseded records), and the lake must then hold the new rows and
none of the old; likewise when the TTL scan marks more of its records dead (the manifest's fingerprint
counts them), so the lake never keeps a record the engine counts dead. With the segment in the path, its
rows are exactly the leaves ``namespace=<ns>/date=*/shard=<n>/segment_base=<base>``, and a replacement
touches no other segment's rows and no other file. (Per-run files under ``namespace/date`` would mix many
segments in one file, so replacing one segment would mean rewriting its neighbours.) Readers still get
``namespace`` and ``date`` as the leading partition columns, prune on them, and see ``shard`` and
``segment_base`` as ordinary columns.

File sizes: each task decodes one whole segment and writes one file per UTC day it spans, so a file is as
large as a segment's rows for one day: with the default 1 GiB segments, hundreds of MiB; smaller only when
the partition itself is (a segment sealed by time, or the part of a segment on either side of midnight).
No shuffle, no sort: rows stay in offset order.

Tiered storage (issue 19): a segment the node has offloaded and no longer keeps locally (``remote``), or any
segment in the store with ``--prefer-tier``, is read by the executors from its object through the engine's
reader (:mod:`spark_jobs.tier_reads`), fingerprinted from the object (two ranged GETs); ``--node-url`` may be
repeated so that a namespace whose shards are on several nodes is exported whole (:mod:`spark_jobs.source`).
A segment that is only on the disk of a node whose data directory is not here is left for a later run and
counted in ``segments_unreadable`` (the summary names them).

The lake itself may be in an object store (``--lake-path s3://bucket/prefix``, or ``--output s3://…``): the rows
are written by Spark to a local staging directory and uploaded with obstore, each leaf replaced by one PUT
(:mod:`spark_jobs.lake_store`); the catalog table is not kept there (no S3 connector in Hadoop here).

A run: (1) deletes what a killed run left in ``_staging``; (2) writes the segments to export into
``_staging/run-<n>``; (3) swaps their leaves into the lake one rename at a time, so a reader sees each leaf
whole, old or new (:mod:`spark_jobs.lake_swap`); (4) replaces the manifest; (5) makes the catalog table's
partitions the lake's leaves (:mod:`spark_jobs.catalog`), so a table created with ``CREATE TABLE … USING
parquet LOCATION`` reads new data without ``MSCK REPAIR``; (6) removes emptied leaf directories. A crash
anywhere before (4) leaves the previous manifest, so the same segments are exported again, swapping the same
rows in once more; a crash in (5) is made good by the next run's sync. Not for two exporters at once on the
same lake.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from spark_jobs.catalog import DEFAULT_TABLE, METASTORE_DIR, PartitionSync, metastore_conf, sync_partitions, with_conf
from spark_jobs.config import DEFAULT_APP_NAME_PREFIX, ConfigError, JobConfig, add_common_arguments, is_store_uri
from spark_jobs.lake import LakeFileSystem, check_overwrite_target, resolve_output
from spark_jobs.lake_store import ObjectLake, swap_in_store
from spark_jobs.lake_swap import LEAF_DEPTH, StepHook, clear_staging, leaves_of, no_hook, staging_dir, swap_in
from spark_jobs.manifest import (
    LAKE_SCHEMA,
    UNKNOWN_MTIME,
    ExportedSegment,
    ExportPlan,
    Fingerprint,
    load_manifest,
    plan_export,
    save_manifest,
)
from spark_jobs.registry import register
from spark_jobs.schema import EXPORT_PARTITION_COLUMNS, NAMESPACE, SEGMENT_BASE, SHARD
from spark_jobs.segments import DEAD_DROP, READERS, SegmentFile, sample_hash, segment_records
from spark_jobs.session import session_for
from spark_jobs.source import add_source_arguments, source_of, unreadable_message
from spark_jobs.tier_reads import object_sample_hash, object_tier
from spark_jobs.transforms import lake_rows
from storage_engine.errors import ObjectMissingError

JOB_NAME = "lake-export"

DATASET = "records"
# Snappy: cheap to write and read everywhere. Values and keys are rarely repeated: no dictionary for them.
WRITE_OPTIONS = {
    "compression": "snappy",
    "parquet.enable.dictionary#value": "false",
    "parquet.enable.dictionary#key": "false",
}
# A task holds one segment, whose rows span one or two days: keep a writer open per day rather than have
# Spark sort the whole segment by its partition columns first (the planned write's sort costs ~15 %).
# Timestamps as Parquet TIMESTAMP(MILLIS, isAdjustedToUTC=true) (exact for epoch milliseconds, and read as
# UTC instants by pyarrow, Trino, DuckDB…), not Spark's legacy INT96; proleptic Gregorian as everyone else.
WRITE_SQL_CONF = {
    "spark.sql.optimizer.plannedWrite.enabled": "false",
    "spark.sql.maxConcurrentOutputFileWriters": "16",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
}


@dataclass
class ExportResult:
    output: str
    run: int
    segments_sealed: int
    exported: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: int = 0
    gone: list[str] = field(default_factory=list)
    records_written: int = 0
    bytes_read: int = 0
    seconds: float = 0.0
    manifest: str | None = None
    staging_cleared: bool = False  # a killed run's staging directory was deleted
    leaves: dict[str, int] = field(default_factory=dict)  # added / replaced / emptied leaf directories
    table: PartitionSync | None = None
    read_from_tier: int = 0  # segments of this run read from the object store
    bytes_uploaded: int = 0  # Parquet bytes uploaded to an object-store lake
    unreadable: list[str] = field(default_factory=list)  # listed, not readable here (left for a later run)
    vanished: list[str] = field(default_factory=list)  # objects gone while read: left for the next run

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": JOB_NAME,
            "output": self.output,
            "run": self.run,
            "segments_sealed": self.segments_sealed,
            "segments_exported": len(self.exported) + len(self.replaced),
            "segments_new": len(self.exported),
            "segments_replaced": len(self.replaced),
            "segments_unchanged": self.unchanged,
            "segments_gone": len(self.gone),
            "replaced": self.replaced,
            "records_written": self.records_written,
            "bytes_read": self.bytes_read,
            "seconds": round(self.seconds, 3),
            "manifest": self.manifest,
            "staging_cleared": self.staging_cleared,
            "leaves": self.leaves,
            "table": None if self.table is None else asdict(self.table),
            "segments_from_tier": self.read_from_tier,
            "bytes_uploaded": self.bytes_uploaded,
            "segments_unreadable": len(self.unreadable),
            "unreadable": self.unreadable[:100],
            "segments_vanished": len(self.vanished),
        }


def pyarrow_partitioning() -> Any:
    """The lake's Hive partitioning for ``pyarrow.dataset``, with the same types Spark reads
    (``ds.dataset(path, format="parquet", partitioning=pyarrow_partitioning())``)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    return ds.partitioning(
        pa.schema(
            [
                (NAMESPACE, pa.string()),
                ("date", pa.date32()),
                (SHARD, pa.int32()),
                (SEGMENT_BASE, pa.int64()),
            ]
        ),
        flavor="hive",
    )


def segment_glob(segment: SegmentFile) -> str:
    """The directories holding one segment's rows, as a glob relative to the dataset root."""
    return f"{NAMESPACE}={segment.namespace}/date=*/{SHARD}={segment.shard}/{SEGMENT_BASE}={segment.base_offset}"


@contextmanager
def sql_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Set runtime SQL settings for the duration of a block, then put back what was there."""
    before: dict[str, str | None] = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, previous in before.items():
            if previous is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, previous)


def segment_directories(lake: LakeFileSystem, segments: Sequence[SegmentFile]) -> list[str]:
    """The lake directories holding rows of ``segments`` (one listing of the layout, not one per segment)."""
    wanted = {(s.namespace, str(s.shard), str(s.base_offset)) for s in segments}
    found = []
    for uri in lake.glob(f"{NAMESPACE}=*/date=*/{SHARD}=*/{SEGMENT_BASE}=*"):
        parts = uri.rstrip("/").split("/")[-4:]
        values = [part.partition("=")[2] for part in parts]
        if (values[0], values[2], values[3]) in wanted:
            found.append(uri)
    return found


def fingerprint(segment: SegmentFile) -> Fingerprint:
    """The segment's size as listed, its file's mtime and sampled content, and its dead records; for a segment
    read from the object store, the object's sampled content (the same digest as of the file: the object is
    the file byte for byte) and no mtime. Raises :class:`FileNotFoundError` for a segment gone since the
    listing."""
    if not segment.from_tier:
        try:
            mtime_ns = os.stat(segment.path).st_mtime_ns
            return Fingerprint(segment.size, mtime_ns, sample_hash(segment.path, segment.size), segment.dead_records)
        except FileNotFoundError:
            if not (segment.object_key and segment.tier_uri):
                raise  # deleted by retention since the listing
            # its local copy dropped since the listing: the executors read the object (segments._read)
    assert segment.object_key and segment.tier_uri
    digest = object_sample_hash(segment.tier_uri, segment.object_key, segment.size)
    if digest is None:
        raise FileNotFoundError(f"{segment.where} is gone")
    return Fingerprint(segment.size, UNKNOWN_MTIME, digest, segment.dead_records)


FINGERPRINT_THREADS = 8  # object-store fingerprints are two ranged GETs each: a few at a time


def fingerprints_of(segments: Sequence[SegmentFile]) -> dict[SegmentFile, Fingerprint]:
    """:func:`fingerprint` of every segment still there (those in the store a few at a time)."""

    def one(segment: SegmentFile) -> tuple[SegmentFile, Fingerprint | None]:
        try:
            return segment, fingerprint(segment)
        except FileNotFoundError:  # deleted by retention since the listing
            return segment, None

    remote = [s for s in segments if s.from_tier]
    found = [one(s) for s in segments if not s.from_tier]
    if remote:
        with ThreadPoolExecutor(max_workers=min(FINGERPRINT_THREADS, len(remote))) as pool:
            found += list(pool.map(one, remote))
    return {segment: fp for segment, fp in found if fp is not None}


def store_leaves(lake: ObjectLake, segments: Sequence[SegmentFile]) -> dict[str, list[str]]:
    """As :func:`current_leaves`, for a lake in an object store (one listing of the dataset)."""
    wanted = {(s.namespace, str(s.shard), str(s.base_offset)) for s in segments}
    leaves: dict[str, list[str]] = {}
    for leaf, names in leaves_of(lake.data_files()).items():
        values = [part.partition("=")[2] for part in leaf.split("/")]
        if (values[0], values[2], values[3]) in wanted:
            leaves[leaf] = names
    return leaves


def current_leaves(lake: LakeFileSystem, segments: Sequence[SegmentFile]) -> dict[str, list[str]]:
    """Leaf directory (relative) → its data file names, for the leaves of ``segments`` now in the lake."""
    leaves = {}
    for uri in segment_directories(lake, segments):
        leaf = lake.relative(uri)
        leaves[leaf] = [name for name in lake.list_names(leaf) if not name.startswith(("_", "."))]
    return leaves


def prune_empty_leaves(lake: LakeFileSystem, leaves: set[str]) -> int:
    """Delete leaf directories without data (rows all gone) and the parents they leave empty."""
    pruned = 0
    for uri in lake.glob("/".join(["*=*"] * LEAF_DEPTH)):
        leaf = lake.relative(uri)
        if leaf in leaves or not leaf.startswith(f"{NAMESPACE}="):
            continue
        lake.delete(leaf)
        pruned += 1
        parent = leaf
        while "/" in parent:
            parent = parent.rsplit("/", 1)[0]
            if lake.list_names(parent):
                break
            lake.delete(parent)
    return pruned


def run_export(
    spark: SparkSession,
    segments: Sequence[SegmentFile],
    output: str,
    *,
    now_ms: int | None = None,
    reader: str = "arrow",
    table: str | None = None,
    hook: StepHook = no_hook,
    local_staging: str | Path | None = None,
) -> ExportResult:
    """Export the sealed ``segments`` (as the node listed them, :mod:`spark_jobs.source`) not yet in the lake
    at ``output``, or changed since (rewritten, or more of their records dead); dead records are left out.

    With ``table``, that catalog table's partitions are then made the lake's (:mod:`spark_jobs.catalog`).
    ``hook`` is called before each step of putting rows in place (tests look at the lake there).

    ``output`` may be an object store (``s3://bucket/prefix``, :mod:`spark_jobs.lake_store`): the rows are then
    staged in a local temporary directory under ``local_staging`` (default: the temp directory; on a cluster, a
    directory the driver and every executor see) and uploaded; ``table`` does not apply there."""
    started = time.perf_counter()
    in_store = is_store_uri(output)
    lake: LakeFileSystem | ObjectLake = ObjectLake(output) if in_store else LakeFileSystem(spark, output)
    if in_store:
        table = None
    if table:
        # Open the catalog first: a metastore that is locked (embedded Derby held by a reader) or unreachable
        # fails the run before it writes anything.
        spark.catalog.tableExists(table)
    active = [s.key for s in segments if not s.sealed]
    if active:
        raise ValueError(f"only sealed segments are exported; active: {', '.join(active)}")
    fingerprints = fingerprints_of(list(segments))
    manifest = load_manifest(lake)
    plan: ExportPlan = plan_export(manifest, fingerprints)
    result = ExportResult(
        output=lake.uri(),
        run=manifest.run,
        segments_sealed=len(fingerprints),
        unchanged=len(plan.unchanged),
        gone=list(plan.gone),
        staging_cleared=False if isinstance(lake, ObjectLake) else clear_staging(lake),
    )
    todo = plan.to_export
    if todo:
        counts = {segment: segment.live_records for segment in todo}
        run = manifest.run + 1
        staged = staging_dir(run)
        records = lake_rows(segment_records(spark, todo, dead=DEAD_DROP, reader=reader))
        result.read_from_tier = sum(1 for s in todo if s.from_tier)
        if isinstance(lake, ObjectLake):
            with tempfile.TemporaryDirectory(prefix="lake-export-", dir=local_staging) as tmp:
                local = Path(tmp) / staged
                _write_staged(spark, records, local.as_uri())
                todo = _drop_vanished(todo, result, lambda s: _drop_local(local, s))
                hook("staged", None)
                swapped, result.bytes_uploaded = swap_in_store(lake, local, store_leaves(lake, todo), hook)
        else:
            _write_staged(spark, records, lake.uri(staged))
            todo = _drop_vanished(todo, result, lambda s: _drop_staged(lake, staged, s))
            hook("staged", None)
            swapped = swap_in(lake, staged, current_leaves(lake, todo), hook)
        result.leaves = {"added": swapped.added, "replaced": swapped.replaced, "emptied": swapped.emptied}
        exported_at = int(time.time() * 1000) if now_ms is None else now_ms
        entries = [
            ExportedSegment(
                namespace=s.namespace,
                shard=s.shard,
                base_offset=s.base_offset,
                size=fingerprints[s].size,
                mtime_ns=fingerprints[s].mtime_ns,
                sample_hash=fingerprints[s].sample_hash,
                records=counts[s],
                exported_at_ms=exported_at,
                run=run,
                source_path=s.where,
                dead_records=fingerprints[s].dead_records,
                lake_schema=LAKE_SCHEMA,
            )
            for s in todo
        ]
        hook("manifest", None)
        result.manifest = lake.uri(save_manifest(lake, manifest.updated(run, entries)))
        if isinstance(lake, LakeFileSystem):
            clear_staging(lake)
        result.run = run
        result.exported = [s.key for s in plan.new if s in todo]
        result.replaced = [s.key for s in plan.changed if s in todo]
        result.records_written = sum(counts[s] for s in todo)
        result.bytes_read = sum(s.size for s in todo)
    if isinstance(lake, LakeFileSystem):  # an object store has no directories to sync or prune
        leaves = set(leaves_of(lake.data_files()))
        if table:
            hook("register", None)
            result.table = sync_partitions(spark, table, lake, leaves)
        prune_empty_leaves(lake, leaves)
    result.seconds = time.perf_counter() - started
    return result


def _object_gone(segment: SegmentFile) -> bool:
    """Whether a segment the executors may have read from its object (no local file now) has no object either."""
    if not (segment.object_key and segment.tier_uri):
        return False
    if not segment.from_tier and segment.path and os.path.exists(segment.path):
        return False
    try:
        object_tier(segment.tier_uri).head(segment.object_key)
    except ObjectMissingError:
        return True
    return False


def _drop_vanished(
    todo: tuple[SegmentFile, ...], result: ExportResult, drop: Callable[[SegmentFile], None]
) -> tuple[SegmentFile, ...]:
    """Leave out of this run the segments whose object vanished while it read them (deleted by retention, or
    rewritten under a new generation: an executor then read nothing): their staged rows (``drop``) are not
    swapped in and the manifest keeps their previous version, so the lake keeps their exported rows and the
    next run, listing them again, exports what is there then. Checked after the write: an object never comes
    back under the same key, so a read that found it missing is always caught."""
    vanished = [s for s in todo if _object_gone(s)]
    for segment in vanished:
        drop(segment)
    result.vanished = [s.key for s in vanished]
    return tuple(s for s in todo if s not in vanished)


def _drop_staged(lake: LakeFileSystem, staged: str, segment: SegmentFile) -> None:
    for uri in lake.glob(f"{staged}/{segment_glob(segment)}"):
        lake.delete(uri)


def _drop_local(local: Path, segment: SegmentFile) -> None:
    for path in local.glob(segment_glob(segment)):
        shutil.rmtree(path, ignore_errors=True)


def _write_staged(spark: SparkSession, records: Any, uri: str) -> None:
    with sql_conf(spark, WRITE_SQL_CONF):
        (
            records.write.mode("errorifexists")
            .options(**WRITE_OPTIONS)
            .partitionBy(*EXPORT_PARTITION_COLUMNS)
            .parquet(uri)
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m spark_jobs {JOB_NAME}",
        description="Export the sealed segment files of a storage node's data directory to the Parquet lake, "
        "partitioned by namespace and UTC date (then shard and segment), without the records the node counts "
        "dead. Which segments are sealed and which records are dead comes from the node (--node-url), or "
        "from the engine opened here with --offline. Incremental: segments already exported are skipped, "
        "segments rewritten since (compaction) or with more dead records are replaced, each day's rows of a "
        "segment with one rename; the catalog table's partitions are kept registered. Prints a JSON summary.",
    )
    add_source_arguments(parser, several_nodes=True)
    parser.add_argument(
        "--output",
        help=f"dataset directory, Hadoop URI or object store s3://bucket/prefix (default <lake path>/{DATASET})",
    )
    parser.add_argument(
        "--staging-dir",
        help="for a lake in an object store: where the rows are written before they are uploaded (default: the "
        "temp directory; on a cluster, a directory the driver and every executor see)",
    )
    parser.add_argument(
        "--namespace",
        action="append",
        default=[],
        help="export only this namespace (repeatable; default all)",
    )
    parser.add_argument(
        "--table",
        default=DEFAULT_TABLE,
        help=f"catalog table over the lake whose partitions the export keeps registered (default {DEFAULT_TABLE}; "
        "created when missing, adopted when a reader created it with CREATE TABLE … USING parquet LOCATION; "
        "'' for none)",
    )
    parser.add_argument(
        "--metastore",
        help=f"directory of the embedded Derby metastore behind that table (default <lake path>/{METASTORE_DIR}); "
        "ignored when the job is given a session, or with --conf spark.hadoop.hive.metastore.uris=…",
    )
    parser.add_argument(
        "--reader",
        choices=READERS,
        default="arrow",
        help="how executors hand decoded rows to Spark: arrow batches from a Python data source (default) "
        "or pickled rows from an RDD flatMap",
    )
    add_common_arguments(parser)
    return parser


@register(JOB_NAME, "Export sealed segments to the Parquet lake (incremental, idempotent).")
def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    args = build_parser().parse_args(argv)
    config = JobConfig.from_args(args, app_name=f"{DEFAULT_APP_NAME_PREFIX}-{JOB_NAME}")
    default_output = f"{config.lake_store}/{DATASET}" if config.lake_store else config.lake_path / DATASET
    output = resolve_output(args.output or default_output)
    check_overwrite_target(output, config.lake_path)
    in_store = is_store_uri(output)
    if in_store and args.staging_dir is None and not config.is_local:
        raise ConfigError(
            "a lake in an object store is staged on local disk before the upload: on a cluster give --staging-dir, "
            "a directory the driver and every executor see"
        )
    source = source_of(JOB_NAME, args)
    if source is None:
        return 2
    listing = source.listing(namespaces=args.namespace)
    if listing.unreadable:
        print(f"python -m spark_jobs {JOB_NAME}: warning: {unreadable_message(listing.unreadable)}", file=sys.stderr)
    table = None if in_store else args.table or None
    if table:
        metastore = metastore_conf(args.metastore or config.lake_path / METASTORE_DIR)
        config = replace(config, extra_conf=with_conf(config.extra_conf, metastore))
    with session_for(config, spark) as session:
        result = run_export(
            session, listing.segments, output, reader=args.reader, table=table, local_staging=args.staging_dir
        )
    result.unreadable = [s.key for s in listing.unreadable]
    print(json.dumps(result.to_dict(), sort_keys=True), flush=True)
    return 0
