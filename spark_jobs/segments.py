"""Segment files read directly by Spark: the node says what to read, the engine's reader decodes it.

Spark never opens the node's RocksDB (one process only may) and never guesses from file names. Which
segments to read comes from the node (:mod:`spark_jobs.source`: ``GET .../segment-files``, or the same
listing from an engine the driver opened on a stopped node's data directory): per segment its file, the
bytes to read (a sealed segment's whole file; the active one's committed bytes, when a job asks for it)
and the offsets the node marked dead that are still in the file. A :class:`SegmentFile` carries that to
an executor, which decodes the file with the engine's own reader
(:func:`storage_engine.segment.segment.iter_file_batches` and :func:`storage_engine.formats.codec.iter_records`:
the batch format has one owner) and either drops the dead records (``dead="drop"``: the lake, TTL
backfill) or marks them in a ``dead`` column (``dead="mark"``: jobs that judge the other records as the
engine does, or count dead ones as expired).

Decoding is plain Python plus pyarrow (no RocksDB, no HTTP), so it runs in Spark's Python workers:
:func:`iter_segment_batches` turns one file into Arrow record batches in :data:`ARROW_SCHEMA` (or
:data:`ARROW_MARKED_SCHEMA`), the Arrow twins of :data:`~spark_jobs.schema.SEGMENT_RECORD_SCHEMA` and
:data:`~spark_jobs.schema.MARKED_SEGMENT_RECORD_SCHEMA`.

On a cluster every executor must see the data directory at the same path (run on the node's host, or
mount it read-only on the workers). Segments in the object store (tiered storage) need no data directory: a
``remote`` segment (and a ``both`` one when the job prefers the store) is downloaded from its object by the
executor and decoded the same way (:mod:`spark_jobs.tier_reads`).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from spark_jobs.schema import DEAD, MARKED_SEGMENT_RECORD_SCHEMA, SEGMENT_RECORD_SCHEMA
from spark_jobs.tier_reads import downloaded, sample_digest, tier_environment
from storage_engine.api import SegmentTier
from storage_engine.errors import CorruptSegmentError
from storage_engine.formats.codec import iter_records
from storage_engine.formats.segment_files import DeadOffsets, DeadRanges, SegmentFileInfo
from storage_engine.segment.segment import SegmentFileChangedError, iter_file_batches

DEFAULT_BATCH_ROWS = 32_768
DEAD_DROP = "drop"  # leave records marked dead out
DEAD_MARK = "mark"  # keep them, with dead = true
DEAD_MODES = (DEAD_DROP, DEAD_MARK)

ARROW_SCHEMA = pa.schema(
    [
        pa.field("namespace", pa.string(), nullable=False),
        pa.field("shard", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.int64(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("tags", pa.list_(pa.field("element", pa.string(), nullable=False)), nullable=False),
        pa.field("headers", pa.map_(pa.string(), pa.field("value", pa.binary(), nullable=False)), nullable=False),
        pa.field("value", pa.binary()),
        pa.field("expire_at", pa.int64()),
        pa.field("segment_base", pa.int64(), nullable=False),
    ]
)
ARROW_MARKED_SCHEMA = ARROW_SCHEMA.append(pa.field(DEAD, pa.bool_(), nullable=False))


@dataclass(frozen=True, order=True)
class SegmentFile:
    """One segment file to read, as the node listed it: where it is on this machine (and on every
    executor), how many bytes of it to read, and which of its offsets are dead; with tiered storage also
    where its object is and whether executors read that instead of the file (``from_tier``)."""

    namespace: str
    shard: int
    base_offset: int
    path: str  # absolute: <data dir>/<the node's file, relative to its data dir>; "" without a data dir here
    size: int  # bytes to read: the sealed file's size, or the active segment's committed bytes
    sealed: bool = True
    last_offset: int = -1
    record_count: int = 0  # records stored in those bytes, dead ones included
    dead: DeadRanges = ()  # inclusive ranges of offsets marked dead and still in the file
    tier: str = SegmentTier.LOCAL.value  # local, both (file and object) or remote (object only)
    object_key: str | None = None  # its data object's key in the store, when it is in one
    tier_uri: str | None = None  # where executors reach that store (the node's URI, or the job's --tier-uri)
    from_tier: bool = False  # executors read the object rather than the file
    node: str = field(default="", compare=False)  # the node that listed it ("" offline)

    @classmethod
    def of(
        cls,
        info: SegmentFileInfo,
        data_dir: str | Path | None,
        *,
        prefer_tier: bool = False,
        tier_uri: str | None = None,
        node: str = "",
    ) -> SegmentFile:
        """The file of ``info`` (from the node) under ``data_dir``, where this job sees the node's data directory
        (``None``: not on this machine). A ``remote`` segment is read from the store; a ``both`` one too with
        ``prefer_tier`` or without a data directory; ``tier_uri`` replaces the store URI the node listed."""
        in_store = info.object_key is not None and info.tier is not SegmentTier.LOCAL
        if info.tier is SegmentTier.REMOTE:
            from_tier = True
        elif info.tier is SegmentTier.BOTH and in_store:
            from_tier = prefer_tier or data_dir is None
        else:
            from_tier = False
        return cls(
            namespace=info.namespace,
            shard=info.shard,
            base_offset=info.base_offset,
            path="" if data_dir is None else os.path.abspath(os.path.join(data_dir, *info.file.split("/"))),
            size=info.size_bytes,
            sealed=info.sealed,
            last_offset=info.last_offset,
            record_count=info.record_count,
            dead=info.dead or (),
            tier=info.tier.value,
            object_key=info.object_key if in_store else None,
            tier_uri=(tier_uri or info.tier_uri) if in_store else None,
            from_tier=from_tier,
            node=node,
        )

    @property
    def readable(self) -> bool:
        """Whether this job can read it: its object (a store URI known) or its file (a data directory here)."""
        if self.from_tier:
            return bool(self.object_key and self.tier_uri)
        return bool(self.path)

    @property
    def where(self) -> str:
        """Where executors read it: the object's URI, or the file."""
        return f"{self.tier_uri}/{self.object_key}" if self.from_tier else self.path

    @property
    def key(self) -> str:
        """``<namespace>/<shard>/<20-digit base offset>``: unique in a data directory, stable across rewrites."""
        return segment_key(self.namespace, self.shard, self.base_offset)

    @property
    def dead_records(self) -> int:
        return sum(last - first + 1 for first, last in self.dead)

    @property
    def live_records(self) -> int:
        """Records a reader that drops dead ones gets from this file."""
        return self.record_count - self.dead_records

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def segment_key(namespace: str, shard: int, base_offset: int) -> str:
    return f"{namespace}/{shard}/{base_offset:020d}"


def sample_hash(path: str | Path, size: int | None = None) -> str:
    """A cheap content fingerprint: BLAKE2b of the size, the first and the last 64 KiB of the file.

    Together with size and mtime it tells a rewritten segment from the one exported, without reading
    gigabytes on every run (a compaction rewrite changes the size, the mtime, and almost always the tail).
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size if size is None else size

        def read(start: int, end: int) -> bytes:
            f.seek(start)
            return f.read(end - start)

        return sample_digest(size, read)


# -- decoding (executors) ---------------------------------------------------------------------------------


class _Columns:
    """Column lists for one Arrow batch of decoded records."""

    def __init__(self) -> None:
        self.offset: list[int] = []
        self.timestamp: list[int] = []
        self.key: list[bytes | None] = []
        self.tags: list[list[str]] = []
        self.headers: list[list[tuple[str, bytes]]] = []
        self.value: list[bytes | None] = []
        self.expire_at: list[int | None] = []
        self.dead: list[bool] = []

    def __len__(self) -> int:
        return len(self.offset)

    def to_batch(self, namespace: str, shard: int, base_offset: int, marked: bool) -> pa.RecordBatch:
        n = len(self.offset)
        arrays = [
            pa.array([namespace] * n, pa.string()),
            pa.array([shard] * n, pa.int32()),
            pa.array(self.offset, pa.int64()),
            pa.array(self.timestamp, pa.int64()),
            pa.array(self.key, pa.binary()),
            pa.array(self.tags, ARROW_SCHEMA.field("tags").type),
            pa.array(self.headers, ARROW_SCHEMA.field("headers").type),
            pa.array(self.value, pa.binary()),
            pa.array(self.expire_at, pa.int64()),
            pa.array([base_offset] * n, pa.int64()),
        ]
        if marked:
            arrays.append(pa.array(self.dead, pa.bool_()))
        return pa.RecordBatch.from_arrays(arrays, schema=ARROW_MARKED_SCHEMA if marked else ARROW_SCHEMA)


def iter_segment_batches(
    path: str,
    namespace: str,
    shard: int,
    base_offset: int,
    *,
    size: int | None = None,
    dead: Iterable[Sequence[int]] = (),
    dead_mode: str = DEAD_DROP,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """Decode bytes ``[0, size)`` of one segment file (the whole file without ``size``) into Arrow batches
    of at most ``batch_rows`` records (whole engine batches: at least one), in offset order.

    ``dead`` are the node's dead ranges for the segment: ``dead_mode="drop"`` leaves those records out,
    ``"mark"`` keeps them with ``dead`` true (:data:`ARROW_MARKED_SCHEMA`). Decoding is the engine's
    (:func:`storage_engine.segment.segment.iter_file_batches`): every batch's CRC is checked, damage raises
    :class:`~storage_engine.errors.CorruptSegmentError` naming the file and byte position. A file now
    shorter than ``size`` was rewritten by the node since it was listed (compaction, reclaim: a whole-file
    swap that left dead records out): it is read whole as it now is, and a later listing sees its new size.
    """
    if dead_mode not in DEAD_MODES:
        raise ValueError(f"dead_mode must be one of {DEAD_MODES}, got {dead_mode!r}")
    dead_offsets = DeadOffsets(dead)
    try:
        yield from _decode(path, size, namespace, shard, base_offset, dead_offsets, dead_mode, batch_rows)
    except SegmentFileChangedError:  # raised before any row: nothing was yielded
        yield from _decode(path, None, namespace, shard, base_offset, dead_offsets, dead_mode, batch_rows)


def _decode(
    path: str,
    size: int | None,
    namespace: str,
    shard: int,
    base_offset: int,
    dead: DeadOffsets,
    dead_mode: str,
    batch_rows: int,
) -> Iterator[pa.RecordBatch]:
    marked = dead_mode == DEAD_MARK
    check_dead = bool(dead)
    cols = _Columns()
    for pos, header, buf in iter_file_batches(path, size):
        for record in iter_records(buf, pos, header, path=path):
            is_dead = check_dead and record.offset in dead
            if is_dead and not marked:
                continue
            cols.offset.append(record.offset)
            cols.timestamp.append(record.timestamp)
            cols.key.append(record.key)
            cols.tags.append(list(record.tags))
            headers = record.headers
            if not headers:
                cols.headers.append([])
            elif len(headers) == 1:
                cols.headers.append(list(headers))
            else:  # a map: a repeated name keeps its last value
                cols.headers.append(list(dict(headers).items()))
            cols.value.append(record.value)
            cols.expire_at.append(record.expire_at)
            cols.dead.append(is_dead)
        if len(cols) >= batch_rows:
            yield cols.to_batch(namespace, shard, base_offset, marked)
            cols = _Columns()
    if len(cols):
        yield cols.to_batch(namespace, shard, base_offset, marked)


def decode_segment_table(segment: SegmentFile, *, dead_mode: str = DEAD_DROP) -> pa.Table:
    """A whole segment as one Arrow table, read as an executor reads it, from its file or its object (tests
    and small tools; Spark streams batches instead). A segment not readable here raises :class:`ValueError`."""
    if not segment.readable:
        raise ValueError(f"{segment.key}: no file here and no object to read")
    batches = list(_read(_descriptor(segment, dead_mode), DEFAULT_BATCH_ROWS))
    return pa.Table.from_batches(batches, schema=ARROW_MARKED_SCHEMA if dead_mode == DEAD_MARK else ARROW_SCHEMA)


# -- Spark ---------------------------------------------------------------------------------------------------

DATA_SOURCE_NAME = "lifecycle_segments"
READERS = ("arrow", "rows")


def _decode_file(path: str, descriptor: dict[str, Any], batch_rows: int) -> Iterator[pa.RecordBatch]:
    return iter_segment_batches(
        path,
        descriptor["namespace"],
        descriptor["shard"],
        descriptor["base_offset"],
        size=descriptor["size"],
        dead=descriptor["dead"],
        dead_mode=descriptor["dead_mode"],
        batch_rows=batch_rows,
    )


def _read_object(descriptor: dict[str, Any], batch_rows: int) -> Iterator[pa.RecordBatch]:
    with downloaded(descriptor["tier_uri"], descriptor["object_key"], descriptor["size"]) as path:
        if path is not None:  # None: deleted by retention between listing and reading
            yield from _decode_file(path, descriptor, batch_rows)


def _read(descriptor: dict[str, Any], batch_rows: int) -> Iterator[pa.RecordBatch]:
    """One segment's batches: from its object when the descriptor says so, else from its file; a file gone
    since the listing is read from its object when it has one (its local copy dropped after the offload)."""
    if descriptor.get("from_tier"):
        yield from _read_object(descriptor, batch_rows)
        return
    try:
        yield from _decode_file(descriptor["path"], descriptor, batch_rows)
    except FileNotFoundError:  # raised at open, before any batch
        if descriptor.get("object_key") and descriptor.get("tier_uri"):
            yield from _read_object(descriptor, batch_rows)
        # else deleted by retention between listing and reading: nothing left to read


class _SegmentReader(DataSourceReader):
    """Input partitions are segment descriptors (see :func:`_descriptors`): one file, one partition."""

    def __init__(self, descriptors: list[dict[str, Any]], batch_rows: int) -> None:
        self._partitions = [InputPartition(descriptor) for descriptor in descriptors]
        self._batch_rows = batch_rows

    def partitions(self) -> Sequence[InputPartition]:
        return self._partitions

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(partition.value, self._batch_rows)


class SegmentDataSource(DataSource):
    """A Python data source over a list of segment files (option ``segments``: JSON list of descriptors;
    option ``dead``: ``drop`` or ``mark``).

    Each segment file is one input partition, decoded on an executor into Arrow batches, which Spark takes
    as they are (no per-row pickling, and no pandas needed, unlike ``mapInArrow``).
    """

    @classmethod
    def name(cls) -> str:
        return DATA_SOURCE_NAME

    def schema(self) -> StructType:
        return MARKED_SEGMENT_RECORD_SCHEMA if self.options.get("dead") == DEAD_MARK else SEGMENT_RECORD_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        descriptors = json.loads(self.options["segments"])
        return _SegmentReader(descriptors, int(self.options.get("batch_rows", DEFAULT_BATCH_ROWS)))


def _descriptors(segments: Sequence[SegmentFile], dead_mode: str) -> list[dict[str, Any]]:
    # Largest first, so that the longest tasks start first and the tail of the stage is short.
    ordered = sorted(segments, key=lambda s: (-s.size, s.key))
    return [_descriptor(s, dead_mode) for s in ordered]


def _descriptor(s: SegmentFile, dead_mode: str) -> dict[str, Any]:
    return {
        "path": s.path,
        "namespace": s.namespace,
        "shard": s.shard,
        "base_offset": s.base_offset,
        "size": s.size,
        "dead": [list(r) for r in s.dead],
        "dead_mode": dead_mode,
        "object_key": s.object_key,
        "tier_uri": s.tier_uri,
        "from_tier": s.from_tier,
    }


def _decode_rows(descriptor: dict[str, Any], batch_rows: int) -> Iterator[tuple[Any, ...]]:
    headers = ARROW_SCHEMA.get_field_index("headers")
    for batch in _read(descriptor, batch_rows):
        columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
        columns[headers] = [dict(pairs) for pairs in columns[headers]]
        yield from zip(*columns, strict=True)


def segment_records(
    spark: SparkSession,
    segments: Sequence[SegmentFile],
    *,
    dead: str = DEAD_DROP,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    reader: str = "arrow",
) -> DataFrame:
    """The records of ``segments`` as a DataFrame in :data:`~spark_jobs.schema.SEGMENT_RECORD_SCHEMA`
    (``dead="drop"``: records the node marked dead are left out) or
    :data:`~spark_jobs.schema.MARKED_SEGMENT_RECORD_SCHEMA` (``dead="mark"``: kept, with ``dead`` true).

    The list of segment files is parallelized, one file per partition, largest first, and each executor
    reads exactly the listed bytes of its file with the engine's reader. ``reader="arrow"`` (default) does it
    in a Python data source whose partitions are the files, handing Arrow batches to the JVM;
    ``reader="rows"`` is the plain RDD ``flatMap`` (rows pickled to the JVM; slower, kept for comparison).
    No shuffle either way, and rows keep offset order per segment.
    """
    if reader not in READERS:
        raise ValueError(f"reader must be one of {READERS}, got {reader!r}")
    if dead not in DEAD_MODES:
        raise ValueError(f"dead must be one of {DEAD_MODES}, got {dead!r}")
    schema = MARKED_SEGMENT_RECORD_SCHEMA if dead == DEAD_MARK else SEGMENT_RECORD_SCHEMA
    if not segments:
        return spark.createDataFrame([], schema)
    unreadable = [s.key for s in segments if not s.readable]
    if unreadable:
        raise ValueError(f"no file here and no object to read for {', '.join(unreadable[:10])}")
    descriptors = _descriptors(segments, dead)
    if any(s.tier_uri for s in segments):
        tier_environment(spark.sparkContext.environment)  # the executors' way to the store
    if reader == "rows":
        rdd = spark.sparkContext.parallelize(descriptors, numSlices=len(descriptors))
        rows = rdd.flatMap(functools.partial(_decode_rows, batch_rows=batch_rows))
        return spark.createDataFrame(rows, schema, verifySchema=False)
    spark.dataSource.register(SegmentDataSource)
    return (
        spark.read.format(DATA_SOURCE_NAME)
        .option("segments", json.dumps(descriptors))
        .option("dead", dead)
        .option("batch_rows", str(batch_rows))
        .load()
    )


__all__ = [
    "ARROW_MARKED_SCHEMA",
    "ARROW_SCHEMA",
    "DEAD_DROP",
    "DEAD_MARK",
    "CorruptSegmentError",
    "SegmentDataSource",
    "SegmentFile",
    "decode_segment_table",
    "iter_segment_batches",
    "sample_hash",
    "segment_records",
]
