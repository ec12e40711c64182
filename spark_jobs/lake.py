"""Lake layout and I/O: where datasets live and how they are written. Only job ``main`` functions call
the writers; the transforms stay pure."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.schema import PARTITION_COLUMNS

WRITE_MODES = ("overwrite", "append", "error", "ignore")


class UnsafeOutputError(ValueError):
    """An overwrite would replace the lake root (or a directory above it)."""


def resolve_output(path: str | Path) -> str:
    """An absolute local path, or a URI (``s3a://…``, ``hdfs://…``, ``file:/…``) unchanged."""
    text = str(path)
    if "://" in text or text.startswith("file:"):
        return text
    return str(Path(text).expanduser().resolve())


def check_overwrite_target(output: str, lake_root: str | Path) -> None:
    """Refuse to overwrite the lake root itself, or any directory that contains it."""
    if "://" in output or output.startswith("file:"):
        return
    target = Path(output).resolve()
    root = Path(lake_root).expanduser().resolve()
    if target == root or target in root.parents:
        raise UnsafeOutputError(f"refusing to overwrite {target}: it is, or contains, the lake root {root}")


def write_partitioned_parquet(
    df: DataFrame,
    path: str,
    partition_columns: tuple[str, ...] = PARTITION_COLUMNS,
    sort_columns: tuple[str, ...] = (),
    mode: str = "overwrite",
) -> None:
    """Write ``df`` as Parquet under ``path``, Hive-style (``namespace=…/date=…``), one file per partition.

    Rows are shuffled by the partition columns first so each partition directory gets one file rather
    than one per input task, then sorted within it by ``sort_columns``.
    """
    if mode not in WRITE_MODES:
        raise ValueError(f"mode must be one of {WRITE_MODES}, got {mode!r}")
    missing = [c for c in (*partition_columns, *sort_columns) if c not in df.columns]
    if missing:
        raise ValueError(f"columns {missing} are not in the DataFrame ({df.columns})")
    laid_out = df.repartition(*partition_columns)
    if sort_columns:
        laid_out = laid_out.sortWithinPartitions(*partition_columns, *sort_columns)
    laid_out.write.mode(mode).partitionBy(*partition_columns).parquet(path)


class LakeFileSystem:
    """Small file operations on the lake through Hadoop's FileSystem, so that they work for a local path
    and for any Hadoop URI (``hdfs://``, ``s3a://``, ``abfs://``, …) alike, with the same path resolution
    and credentials as Spark's own readers and writers.

    Paths passed to the methods are relative to ``root`` (``/``-separated) unless they are absolute URIs.
    """

    def __init__(self, spark: SparkSession, root: str) -> None:
        sc = spark.sparkContext
        jvm: Any = sc._jvm
        jsc: Any = sc._jsc
        self._jvm = jvm
        self._conf: Any = jsc.hadoopConfiguration()
        self._hadoop_fs: Any = self._jvm.org.apache.hadoop.fs
        self.root = root.rstrip("/") or "/"
        self._root_path: Any = self._hadoop_fs.Path(self.root)
        self._fs: Any = self._root_path.getFileSystem(self._conf)

    def _path(self, relative: str) -> Any:
        if not relative:
            return self._root_path
        return self._hadoop_fs.Path(self._root_path, relative)

    def uri(self, relative: str = "") -> str:
        return str(self._fs.makeQualified(self._path(relative)).toString())

    def exists(self, relative: str) -> bool:
        return bool(self._fs.exists(self._path(relative)))

    def read_bytes(self, relative: str) -> bytes:
        stream = self._fs.open(self._path(relative))
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def write_bytes_atomic(self, relative: str, data: bytes) -> None:
        """Write ``relative`` whole or not at all: a temporary file next to it, then a rename.

        Refuses to replace an existing file (two writers racing for the same name lose one, loudly).
        """
        target = self._path(relative)
        if self._fs.exists(target):
            raise FileExistsError(f"{self.uri(relative)} already exists")
        tmp = self._hadoop_fs.Path(target.getParent(), f".{target.getName()}.{uuid.uuid4().hex}.tmp")
        out = self._fs.create(tmp, False)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        if not self._fs.rename(tmp, target):
            self._fs.delete(tmp, False)
            raise OSError(f"could not rename {tmp.toString()} to {target.toString()}")

    def list_names(self, relative: str) -> list[str]:
        """Names of the entries directly under ``relative``; empty when it does not exist."""
        path = self._path(relative)
        if not self._fs.exists(path):
            return []
        return sorted(str(status.getPath().getName()) for status in self._fs.listStatus(path))

    def glob(self, pattern: str) -> list[str]:
        """Qualified URIs matching a Hadoop glob relative to the root (``*``, ``{a,b}``, …)."""
        statuses = self._fs.globStatus(self._path(pattern))
        if statuses is None:
            return []
        return sorted(str(status.getPath().toString()) for status in statuses)

    def delete(self, path: str, *, recursive: bool = True) -> bool:
        """Delete a path relative to the root or a qualified URI (as :meth:`glob` returns)."""
        target = self._hadoop_fs.Path(path) if "://" in path or path.startswith("file:") else self._path(path)
        return bool(self._fs.delete(target, recursive))

    def data_files(self, relative: str = "") -> list[tuple[str, int]]:
        """``(relative path, size)`` of every data file below ``relative``, skipping ``_``/``.`` names
        (markers, manifests, checksums) as Spark's and pyarrow's readers do."""
        base = self._path(relative)
        if not self._fs.exists(base):
            return []
        prefix = str(self._fs.makeQualified(self._root_path).toString()).rstrip("/") + "/"
        found: list[tuple[str, int]] = []
        files = self._fs.listFiles(base, True)
        while files.hasNext():
            status = files.next()
            qualified = str(status.getPath().toString())
            rel = qualified[len(prefix) :] if qualified.startswith(prefix) else qualified
            if any(part.startswith(("_", ".")) for part in rel.split("/")):
                continue
            found.append((rel, int(status.getLen())))
        return sorted(found)
