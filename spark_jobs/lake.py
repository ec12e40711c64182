"""Lake layout and I/O: where datasets live and how they are written. Only job ``main`` functions call
the writers; the transforms stay pure."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

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

    def _any(self, path: str) -> Any:
        """A Hadoop path for a qualified URI (as :meth:`glob` returns) or a path relative to the root."""
        return self._hadoop_fs.Path(path) if "://" in path or path.startswith("file:") else self._path(path)

    def uri(self, relative: str = "") -> str:
        return str(self._fs.makeQualified(self._path(relative)).toString())

    @property
    def is_local(self) -> bool:
        """True when the lake is on this machine's file system (``file:``)."""
        return str(self._fs.getScheme()) == "file"

    def relative(self, uri: str) -> str:
        """``uri`` (qualified, as :meth:`glob` returns) relative to the root."""
        prefix = self.uri().rstrip("/") + "/"
        qualified = str(self._fs.makeQualified(self._any(uri)).toString())
        if not qualified.startswith(prefix):
            raise ValueError(f"{uri} is not under {prefix}")
        return qualified[len(prefix) :]

    def same_location(self, uri: str) -> bool:
        """True when ``uri`` names the root (whatever its spelling: ``file:/x``, ``file:///x/``, ``/x``)."""
        other = self._hadoop_fs.Path(uri.rstrip("/") or "/")
        qualified = other.getFileSystem(self._conf).makeQualified(other)
        return bool(qualified.equals(self._fs.makeQualified(self._root_path)))

    def _local(self, path: str) -> str:
        return unquote(urlparse(str(self._fs.makeQualified(self._any(path)).toUri().toString())).path)

    def mkdirs(self, path: str) -> None:
        self._fs.mkdirs(self._any(path))

    def rename(self, src: str, dst: str) -> None:
        """Move a file or directory to a name that does not exist yet (one rename: it appears at once)."""
        if self._fs.exists(self._any(dst)):
            raise FileExistsError(f"{dst} already exists")
        if self.is_local:
            os.rename(self._local(src), self._local(dst))
        elif not self._fs.rename(self._any(src), self._any(dst)):
            raise OSError(f"could not rename {src} to {dst}")

    def replace_file(self, src: str, dst: str) -> None:
        """Put file ``src`` in the place of file ``dst`` with one rename, so that a reader opens either the old
        bytes or the new ones, never neither nor both.

        Locally that is ``rename(2)`` (atomic); the checksum file Hadoop's local file system keeps next to
        ``dst`` (``.<name>.crc``) goes first, since it would no longer match. Elsewhere it is Hadoop's
        ``FileContext.rename`` with ``OVERWRITE``: atomic on HDFS; an object store copies, so a reader may
        briefly miss the file there.
        """
        if self.is_local:
            local_dst = self._local(dst)
            crc = os.path.join(os.path.dirname(local_dst), f".{os.path.basename(local_dst)}.crc")
            if os.path.exists(crc):
                os.remove(crc)
            os.replace(self._local(src), local_dst)
            return
        options = self._hadoop_fs.Options.Rename
        overwrite = self._jvm.java.lang.reflect.Array.newInstance(options, 1)
        overwrite[0] = options.OVERWRITE
        context = self._hadoop_fs.FileContext.getFileContext(self._root_path.toUri(), self._conf)
        context.rename(self._fs.makeQualified(self._any(src)), self._fs.makeQualified(self._any(dst)), overwrite)

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
        return bool(self._fs.delete(self._any(path), recursive))

    def data_files(self, relative: str = "") -> list[tuple[str, int]]:
        """``(path, size)`` of every data file below ``relative``, the path relative to ``relative``, skipping
        ``_``/``.`` names below it (markers, manifests, checksums, staging) as Spark's and pyarrow's readers do."""
        base = self._path(relative)
        if not self._fs.exists(base):
            return []
        prefix = str(self._fs.makeQualified(base).toString()).rstrip("/") + "/"
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
