"""Lake layout and I/O: where datasets live and how they are written. Only job ``main`` functions call
the writers; the transforms stay pure."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame

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
