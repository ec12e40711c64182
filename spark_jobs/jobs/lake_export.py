"""``lake-export``: sealed segment files → the Parquet lake, incrementally and idempotently.

Spark reads the node's segment files directly (never the node's API or its RocksDB): the driver lists the
sealed segments of the data directory and fingerprints them, the manifest says which were already exported,
and the rest are decoded on the executors with the engine's own codec (:mod:`spark_jobs.segments`) and
written with Spark's Parquet writer.

Layout (under ``--output``, default ``<lake path>/records``)::

    namespace=<ns>/date=<UTC day>/shard=<n>/segment_base=<base offset>/part-….parquet
    _manifest/manifest-<run>.json

Why the segment is part of the layout: a sealed segment changes only by a whole-file swap (compaction
rewrites it without its dead, expired and superseded records), and the lake must then hold the new rows and
none of the old. With the segment in the path, its rows are exactly the directories
``namespace=<ns>/date=*/shard=<n>/segment_base=<base>``: a replacement deletes those and writes the new ones,
touching no other segment's rows and no other file. (Per-run files under ``namespace/date`` would mix many
segments in one file, so replacing one segment would mean rewriting its neighbours.) Readers still get
``namespace`` and ``date`` as the leading partition columns, prune on them, and see ``shard`` and
``segment_base`` as ordinary columns.

File sizes: each task decodes one whole segment and writes one file per UTC day it spans, so a file is as
large as a segment's rows for one day: with the default 1 GiB segments, hundreds of MiB; smaller only when
the partition itself is (a segment sealed by time, or the part of a segment on either side of midnight).
No shuffle, no sort: rows stay in offset order.

Idempotence: segments to export have their directories deleted first, then are written (append), then the
manifest is replaced. A crash anywhere leaves the previous manifest, so the same segments are exported
again, replacing whatever the crash left. Not for two exporters at once on the same lake.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from spark_jobs.config import DEFAULT_APP_NAME_PREFIX, JobConfig, add_common_arguments
from spark_jobs.lake import LakeFileSystem, check_overwrite_target, resolve_output
from spark_jobs.manifest import (
    ExportedSegment,
    ExportPlan,
    Fingerprint,
    load_manifest,
    plan_export,
    save_manifest,
)
from spark_jobs.registry import register
from spark_jobs.schema import EXPORT_PARTITION_COLUMNS, NAMESPACE, SEGMENT_BASE, SHARD
from spark_jobs.segments import (
    READERS,
    SegmentFile,
    count_records,
    list_segment_files,
    sample_hash,
    segment_records,
)
from spark_jobs.session import session_for
from spark_jobs.transforms import with_partition_columns

JOB_NAME = "lake-export"
DEFAULT_DATA_DIR = "var/data/node"
ENV_DATA_DIR = "NODE_DATA_DIR"


def segments_dir(job: str, raw: str) -> Path | None:
    """``--data-dir`` resolved, or ``None`` (after saying why on stderr) when it holds no ``segments/``."""
    data_dir = Path(raw).expanduser().resolve()
    if (data_dir / "segments").is_dir():
        return data_dir
    print(f"python -m spark_jobs {job}: error: {data_dir} holds no segments/ directory", file=sys.stderr)
    return None


def add_data_dir_argument(parser: argparse.ArgumentParser, what: str = "the node's data directory") -> None:
    """``--data-dir``, the same for every job that reads segment files."""
    parser.add_argument(
        "--data-dir",
        default=os.environ.get(ENV_DATA_DIR) or DEFAULT_DATA_DIR,
        help=f"{what} (env {ENV_DATA_DIR}, default {DEFAULT_DATA_DIR})",
    )


DATASET = "records"
# Snappy: cheap to write and read everywhere. Values and keys are rarely repeated: no dictionary for them.
WRITE_OPTIONS = {
    "compression": "snappy",
    "parquet.enable.dictionary#value": "false",
    "parquet.enable.dictionary#key": "false",
}
# A task holds one segment, whose rows span one or two days: keep a writer open per day rather than have
# Spark sort the whole segment by its partition columns first (the planned write's sort costs ~15 %).
WRITE_SQL_CONF = {
    "spark.sql.optimizer.plannedWrite.enabled": "false",
    "spark.sql.maxConcurrentOutputFileWriters": "16",
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


def _count_records(segment: SegmentFile) -> int:
    try:
        return count_records(segment.path)
    except FileNotFoundError:  # deleted by retention since the listing
        return 0


def fingerprint(segment: SegmentFile) -> Fingerprint:
    return Fingerprint(segment.size, segment.mtime_ns, sample_hash(segment.path, segment.size))


def run_export(
    spark: SparkSession,
    data_dir: str | Path,
    output: str,
    *,
    namespaces: Sequence[str] = (),
    now_ms: int | None = None,
    reader: str = "arrow",
) -> ExportResult:
    """Export the sealed segments of ``data_dir`` not yet in the lake at ``output`` (or changed since)."""
    started = time.perf_counter()
    lake = LakeFileSystem(spark, output)
    sealed = [s for s in list_segment_files(data_dir) if not namespaces or s.namespace in namespaces]
    fingerprints: dict[SegmentFile, Fingerprint] = {}
    for segment in sealed:
        try:
            fingerprints[segment] = fingerprint(segment)
        except FileNotFoundError:  # deleted by retention since the listing
            continue
    manifest = load_manifest(lake)
    plan: ExportPlan = plan_export(manifest, fingerprints)
    result = ExportResult(
        output=lake.uri(),
        run=manifest.run,
        segments_sealed=len(fingerprints),
        unchanged=len(plan.unchanged),
        gone=list(plan.gone),
    )
    todo = plan.to_export
    if todo:
        counts = {segment: _count_records(segment) for segment in todo}
        # Exactly these segments' rows are replaced: whatever an earlier (maybe interrupted) run left of
        # them goes first, so that appending their rows below never duplicates one.
        for directory in segment_directories(lake, todo):
            lake.delete(directory)
        records = with_partition_columns(segment_records(spark, todo, reader=reader))
        with sql_conf(spark, WRITE_SQL_CONF):
            (
                records.write.mode("append")
                .options(**WRITE_OPTIONS)
                .partitionBy(*EXPORT_PARTITION_COLUMNS)
                .parquet(lake.uri())
            )
        exported_at = int(time.time() * 1000) if now_ms is None else now_ms
        run = manifest.run + 1
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
                source_path=s.path,
            )
            for s in todo
        ]
        result.manifest = lake.uri(save_manifest(lake, manifest.updated(run, entries)))
        result.run = run
        result.exported = [s.key for s in plan.new]
        result.replaced = [s.key for s in plan.changed]
        result.records_written = sum(counts.values())
        result.bytes_read = sum(s.size for s in todo)
    result.seconds = time.perf_counter() - started
    return result


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m spark_jobs {JOB_NAME}",
        description="Export the sealed segment files of a storage node's data directory to the Parquet lake, "
        "partitioned by namespace and UTC date (then shard and segment). Incremental: segments already "
        "exported are skipped, segments rewritten since (compaction) are replaced. Prints a JSON summary.",
    )
    add_data_dir_argument(parser, "the node's data directory, readable at the same path by every executor")
    parser.add_argument("--output", help=f"dataset directory or Hadoop URI (default <lake path>/{DATASET})")
    parser.add_argument(
        "--namespace",
        action="append",
        default=[],
        help="export only this namespace (repeatable; default all)",
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
    output = resolve_output(args.output or config.lake_path / DATASET)
    check_overwrite_target(output, config.lake_path)
    data_dir = segments_dir(JOB_NAME, args.data_dir)
    if data_dir is None:
        return 2
    with session_for(config, spark) as session:
        result = run_export(session, data_dir, output, namespaces=args.namespace, reader=args.reader)
    print(json.dumps(result.to_dict(), sort_keys=True), flush=True)
    return 0
