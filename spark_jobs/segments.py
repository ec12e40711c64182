"""Segment files read directly: find them in a node's data directory and decode them with the engine's codec.

Spark never opens the node's RocksDB (one process only may), so which segments are sealed is told from the
files alone: in ``<data_dir>/segments/<namespace>/<shard>/``, every ``<20-digit base offset>.log`` but the
one with the highest base offset is sealed and immutable (DESIGN §2: exactly one active segment per shard,
the newest); names with another suffix (``.log.deleted``, ``.log.cleaned``, temporaries) are ignored.

Decoding is plain Python (:mod:`storage_engine.codec` needs only ``struct`` and ``zlib``) plus pyarrow, so it
runs in Spark's Python workers: :func:`iter_segment_batches` turns one file into Arrow record batches in
:data:`ARROW_SCHEMA`, the Arrow twin of :data:`~spark_jobs.schema.SEGMENT_RECORD_SCHEMA`. The file is memory
mapped: pages are read as the walk reaches them, and a file swapped by compaction while it is being read is
read whole from the old inode.

On a cluster every executor must see the data directory at the same path (run on the node's host, or mount
it read-only on the workers).
"""

from __future__ import annotations

import functools
import hashlib
import json
import mmap
import os
import re
import struct
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from spark_jobs.schema import SEGMENT_RECORD_SCHEMA
from storage_engine.codec import HEADER_SIZE, MAGIC, decode_header, iter_records
from storage_engine.errors import CorruptSegmentError

SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
SAMPLE_BYTES = 64 * 1024
DEFAULT_BATCH_ROWS = 32_768
_LENGTH = struct.Struct(">I")
_HEADER_PREFIX = struct.Struct(">IIHBBQII")  # length, crc, magic, version, flags, base, last delta, count

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


@dataclass(frozen=True, order=True)
class SegmentFile:
    """One segment file as seen on disk: where it is, what it holds, and its fingerprint."""

    namespace: str
    shard: int
    base_offset: int
    path: str
    size: int
    mtime_ns: int
    sealed: bool

    @property
    def key(self) -> str:
        """``<namespace>/<shard>/<20-digit base offset>``: unique in a data directory, stable across rewrites."""
        return segment_key(self.namespace, self.shard, self.base_offset)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def list_segment_files(data_dir: str | Path, *, include_active: bool = False) -> list[SegmentFile]:
    """Segment files under ``data_dir``, sorted by namespace, shard and base offset.

    Only sealed segments unless ``include_active``; the active one is the highest base offset of its shard.
    A missing data directory (or one without ``segments/``) has no segments.
    """
    root = Path(data_dir) / "segments"
    found: list[SegmentFile] = []
    if not root.is_dir():
        return found
    for ns_entry in sorted(os.scandir(root), key=lambda e: e.name):
        if not ns_entry.is_dir():
            continue
        for shard_entry in sorted(os.scandir(ns_entry.path), key=lambda e: e.name):
            if not (shard_entry.is_dir() and shard_entry.name.isdigit()):
                continue
            files: list[tuple[int, os.DirEntry[str]]] = []
            for entry in os.scandir(shard_entry.path):
                match = SEGMENT_NAME.match(entry.name)
                if match and entry.is_file():
                    files.append((int(match.group(1)), entry))
            files.sort(key=lambda item: item[0])
            for i, (base, entry) in enumerate(files):
                sealed = i < len(files) - 1
                if not sealed and not include_active:
                    continue
                st = entry.stat()
                found.append(
                    SegmentFile(
                        namespace=ns_entry.name,
                        shard=int(shard_entry.name),
                        base_offset=base,
                        path=os.path.abspath(entry.path),
                        size=st.st_size,
                        mtime_ns=st.st_mtime_ns,
                        sealed=sealed,
                    )
                )
    return found


def sample_hash(path: str | Path, size: int | None = None) -> str:
    """A cheap content fingerprint: BLAKE2b of the size, the first and the last 64 KiB of the file.

    Together with size and mtime it tells a rewritten segment from the one exported, without reading
    gigabytes on every run (a compaction rewrite changes the size, the mtime, and almost always the tail).
    """
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size if size is None else size
        digest.update(str(size).encode())
        digest.update(f.read(min(size, SAMPLE_BYTES)))
        if size > SAMPLE_BYTES:
            f.seek(max(SAMPLE_BYTES, size - SAMPLE_BYTES))
            digest.update(f.read(SAMPLE_BYTES))
    return digest.hexdigest()


def count_records(path: str | Path) -> int:
    """Records in a segment file from its batch headers alone (one small read per batch, no decoding)."""
    total = 0
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        pos = 0
        while pos + HEADER_SIZE <= size:
            length, _crc, magic, _version, _flags, _base, _delta, count = _HEADER_PREFIX.unpack(
                os.pread(f.fileno(), _HEADER_PREFIX.size, pos)
            )
            if magic != MAGIC or length < HEADER_SIZE:
                raise CorruptSegmentError(str(path), pos, f"bad batch header (magic 0x{magic:04x}, length {length})")
            total += count
            pos += length
    return total


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

    def __len__(self) -> int:
        return len(self.offset)

    def to_batch(self, namespace: str, shard: int, base_offset: int) -> pa.RecordBatch:
        n = len(self.offset)
        return pa.RecordBatch.from_arrays(
            [
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
            ],
            schema=ARROW_SCHEMA,
        )


def iter_segment_batches(
    path: str,
    namespace: str,
    shard: int,
    base_offset: int,
    *,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    tolerate_torn_tail: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Decode one segment file into Arrow batches of at most ``batch_rows`` records, in offset order.

    Every batch's CRC is checked; damage raises :class:`~storage_engine.errors.CorruptSegmentError` naming
    the file and byte position. ``tolerate_torn_tail`` (for an active segment, which the node may be
    appending to) stops quietly at an incomplete batch at the end of the file instead.
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            buf = memoryview(mapped)
            try:
                yield from _decode(buf, path, namespace, shard, base_offset, batch_rows, tolerate_torn_tail)
            finally:
                buf.release()


def _decode(
    buf: memoryview,
    path: str,
    namespace: str,
    shard: int,
    base_offset: int,
    batch_rows: int,
    tolerate_torn_tail: bool,
) -> Iterator[pa.RecordBatch]:
    cols = _Columns()
    n = len(buf)
    pos = 0
    while pos < n:
        if tolerate_torn_tail and _is_torn_tail(buf, pos):
            break
        header = decode_header(buf, pos, path=path)
        for record in iter_records(buf, pos, header, path=path):
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
        pos += header.length
        if len(cols) >= batch_rows:
            yield cols.to_batch(namespace, shard, base_offset)
            cols = _Columns()
    if len(cols):
        yield cols.to_batch(namespace, shard, base_offset)


def _is_torn_tail(buf: memoryview, pos: int) -> bool:
    """True when the batch at ``pos`` runs past the end of the file: a write still in flight."""
    avail = len(buf) - pos
    if avail < HEADER_SIZE:
        return True
    (length,) = _LENGTH.unpack_from(buf, pos)
    return length > avail


def decode_segment_table(segment: SegmentFile, *, tolerate_torn_tail: bool = False) -> pa.Table:
    """A whole segment as one Arrow table (tests and small tools; Spark streams batches instead)."""
    batches = list(
        iter_segment_batches(
            segment.path,
            segment.namespace,
            segment.shard,
            segment.base_offset,
            tolerate_torn_tail=tolerate_torn_tail,
        )
    )
    return pa.Table.from_batches(batches, schema=ARROW_SCHEMA)


def segment_key(namespace: str, shard: int, base_offset: int) -> str:
    return f"{namespace}/{shard}/{base_offset:020d}"


# -- Spark ---------------------------------------------------------------------------------------------------

DATA_SOURCE_NAME = "lifecycle_segments"
READERS = ("arrow", "rows")


class _SegmentReader(DataSourceReader):
    """Input partitions are segment descriptors (see :func:`_descriptors`): one file, one partition."""

    def __init__(self, descriptors: list[dict[str, Any]]) -> None:
        self._partitions = [InputPartition(descriptor) for descriptor in descriptors]

    def partitions(self) -> Sequence[InputPartition]:
        return self._partitions

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        d = partition.value
        try:
            yield from iter_segment_batches(
                d["path"],
                d["namespace"],
                d["shard"],
                d["base_offset"],
                batch_rows=d["batch_rows"],
                tolerate_torn_tail=d["tolerate_torn_tail"],
            )
        except FileNotFoundError:
            return  # deleted by retention between listing and reading: nothing left to read


class SegmentDataSource(DataSource):
    """A Python data source over a list of segment files (option ``segments``: JSON list of descriptors).

    Each segment file is one input partition, decoded on an executor into Arrow batches, which Spark takes
    as they are (no per-row pickling, and no pandas needed, unlike ``mapInArrow``).
    """

    @classmethod
    def name(cls) -> str:
        return DATA_SOURCE_NAME

    def schema(self) -> StructType:
        return SEGMENT_RECORD_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        descriptors = json.loads(self.options["segments"])
        batch_rows = int(self.options.get("batch_rows", DEFAULT_BATCH_ROWS))
        return _SegmentReader([{**d, "batch_rows": batch_rows} for d in descriptors])


def _descriptors(segments: Sequence[SegmentFile]) -> list[dict[str, Any]]:
    # Largest first, so that the longest tasks start first and the tail of the stage is short.
    ordered = sorted(segments, key=lambda s: (-s.size, s.key))
    return [
        {
            "path": s.path,
            "namespace": s.namespace,
            "shard": s.shard,
            "base_offset": s.base_offset,
            "tolerate_torn_tail": not s.sealed,
        }
        for s in ordered
    ]


def _decode_rows(descriptor: dict[str, Any], batch_rows: int) -> Iterator[tuple[Any, ...]]:
    try:
        for batch in iter_segment_batches(
            descriptor["path"],
            descriptor["namespace"],
            descriptor["shard"],
            descriptor["base_offset"],
            batch_rows=batch_rows,
            tolerate_torn_tail=descriptor["tolerate_torn_tail"],
        ):
            columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
            headers = ARROW_SCHEMA.get_field_index("headers")
            columns[headers] = [dict(pairs) for pairs in columns[headers]]
            yield from zip(*columns, strict=True)
    except FileNotFoundError:
        return


def segment_records(
    spark: SparkSession,
    segments: Sequence[SegmentFile],
    *,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    reader: str = "arrow",
) -> DataFrame:
    """The records of ``segments`` as a DataFrame in :data:`~spark_jobs.schema.SEGMENT_RECORD_SCHEMA`.

    The list of segment files is parallelized, one file per partition, largest first, and each executor
    decodes its file with the engine's codec. ``reader="arrow"`` (default) does it in a Python data source
    whose partitions are the files, handing Arrow batches to the JVM; ``reader="rows"`` is the plain RDD
    ``flatMap`` (rows pickled to the JVM; slower, kept for comparison). No shuffle either way, and rows keep
    offset order per segment. Active segments (``sealed=False``) are read up to their last complete batch.
    """
    if reader not in READERS:
        raise ValueError(f"reader must be one of {READERS}, got {reader!r}")
    if not segments:
        return spark.createDataFrame([], SEGMENT_RECORD_SCHEMA)
    descriptors = _descriptors(segments)
    if reader == "rows":
        rdd = spark.sparkContext.parallelize(descriptors, numSlices=len(descriptors))
        rows = rdd.flatMap(functools.partial(_decode_rows, batch_rows=batch_rows))
        return spark.createDataFrame(rows, SEGMENT_RECORD_SCHEMA, verifySchema=False)
    spark.dataSource.register(SegmentDataSource)
    return (
        spark.read.format(DATA_SOURCE_NAME)
        .option("segments", json.dumps(descriptors))
        .option("batch_rows", str(batch_rows))
        .load()
    )


__all__ = [
    "ARROW_SCHEMA",
    "CorruptSegmentError",
    "SegmentDataSource",
    "SegmentFile",
    "decode_segment_table",
    "iter_segment_batches",
    "list_segment_files",
    "sample_hash",
    "segment_records",
]
