"""Where a job's list of segment files comes from: the node, never file names.

The node owns its data directory: which segments are sealed, how many bytes of each to read, and which
records in them are dead live in its RocksDB, which only the node process may open. So the driver asks
the node (``GET /v1/namespaces/{ns}/shards/{shard}/segment-files``, bearer token from ``$NODE_TOKEN``) and
hands the executors :class:`~spark_jobs.segments.SegmentFile` descriptors (path, size, dead offsets); the
executors read only the files, at ``--data-dir``, where they see the node's data directory.

Without a node (a stopped node's directory, a copy of one, a bench's generated data) ``--offline`` says so
explicitly: the driver opens the directory with the engine itself (it takes the directory's lock, so it
refuses while a node runs on it; opening recovers the directory as a node start would) and lists it with
the same function the node answers with (:func:`storage_engine.segment.listing.segment_file_page`). There
is no silent fallback to guessing: a job given neither refuses to start.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from spark_jobs.config import ENV_NODE_TOKEN, ConfigError, node_token
from spark_jobs.segments import SegmentFile
from storage_engine.segment_files import LIST_ALL, LIST_SEALED

if TYPE_CHECKING:
    from storage_engine.api import StorageAdapter
    from storage_engine.client import NodeClient

DEFAULT_DATA_DIR = "var/data/node"
ENV_DATA_DIR = "NODE_DATA_DIR"
NODE = "node"
OFFLINE = "offline"


def _sorted(found: list[SegmentFile]) -> list[SegmentFile]:
    return sorted(found, key=lambda s: (s.namespace, s.shard, s.base_offset))


def engine_segment_files(
    engine: StorageAdapter, data_dir: str | Path, *, namespaces: Sequence[str] = (), include_active: bool = False
) -> list[SegmentFile]:
    """The segment files of ``engine`` (open in this process on ``data_dir``), sorted by namespace, shard
    and base offset: sealed ones, and with ``include_active`` each shard's active one (its committed bytes).
    ``namespaces`` narrows to those (a name the engine does not have lists nothing)."""
    from storage_engine.segment.listing import segment_file_page

    state = LIST_ALL if include_active else LIST_SEALED
    found: list[SegmentFile] = []
    for info in engine.list_namespaces():
        if namespaces and info.name not in namespaces:
            continue
        for shard in range(info.shards):
            page = segment_file_page(engine, info.name, shard, state=state, dead=True)
            found += [SegmentFile.of(s, data_dir) for s in page.segments]
    return _sorted(found)


def node_segment_files(
    client: NodeClient, data_dir: str | Path, *, namespaces: Sequence[str] = (), include_active: bool = False
) -> list[SegmentFile]:
    """As :func:`engine_segment_files`, asked of a node (``data_dir``: where this job sees its data directory)."""
    state = LIST_ALL if include_active else LIST_SEALED
    found: list[SegmentFile] = []
    for info in client.list_namespaces():
        if namespaces and info.name not in namespaces:
            continue
        for shard in range(info.shards):
            found += [SegmentFile.of(s, data_dir) for s in client.segment_files(info.name, shard, state=state)]
    return _sorted(found)


def offline_segment_files(
    data_dir: str | Path, *, namespaces: Sequence[str] = (), include_active: bool = False
) -> list[SegmentFile]:
    """As :func:`engine_segment_files`, on an engine opened here on ``data_dir`` and closed again: for a
    directory no node runs on (the engine's lock refuses otherwise)."""
    from storage_engine import open_engine
    from storage_engine.config import EngineConfig
    from storage_engine.errors import DataDirLockedError

    try:
        engine = open_engine(EngineConfig(data_dir=Path(data_dir), adapter="segment", lifecycle_worker=False))
    except DataDirLockedError as exc:
        raise ConfigError(f"--offline: {exc}; a node runs on it, so ask it: give --node-url instead") from None
    try:
        return engine_segment_files(engine, data_dir, namespaces=namespaces, include_active=include_active)
    finally:
        engine.close()


@dataclass(frozen=True)
class SegmentSource:
    """Where a job lists its segment files: the node at ``node_url``, or (``node_url`` ``None``) the engine
    opened here on ``data_dir`` (``--offline``). Files are read at ``data_dir`` either way."""

    data_dir: Path
    node_url: str | None = None
    token: str = ""

    @property
    def kind(self) -> str:
        return NODE if self.node_url else OFFLINE

    def segments(self, *, namespaces: Sequence[str] = (), include_active: bool = False) -> list[SegmentFile]:
        if self.node_url is None:
            return offline_segment_files(self.data_dir, namespaces=namespaces, include_active=include_active)
        from storage_engine.client import NodeClient

        with NodeClient(self.node_url, self.token) as client:
            return node_segment_files(client, self.data_dir, namespaces=namespaces, include_active=include_active)


def add_source_arguments(
    parser: argparse.ArgumentParser,
    *,
    data_dir_help: str = "the node's data directory, readable at the same path by every executor",
    node_url_help: str | None = None,
) -> None:
    """``--data-dir``, ``--node-url`` and ``--offline``, the same for every job that reads segment files."""
    group = parser.add_argument_group("segment files")
    group.add_argument(
        "--data-dir",
        default=os.environ.get(ENV_DATA_DIR) or DEFAULT_DATA_DIR,
        help=f"{data_dir_help} (env {ENV_DATA_DIR}, default {DEFAULT_DATA_DIR})",
    )
    group.add_argument(
        "--node-url",
        help=node_url_help
        or f"the node that lists its sealed segments and dead records (token from env {ENV_NODE_TOKEN})",
    )
    group.add_argument(
        "--offline",
        action="store_true",
        help="no node runs on --data-dir: open it with the engine here to list its segments (takes its lock)",
    )


def data_dir_of(job: str, raw: str) -> Path | None:
    """``--data-dir`` resolved, or ``None`` (after saying why on stderr) when it holds no ``segments/``."""
    data_dir = Path(raw).expanduser().resolve()
    if (data_dir / "segments").is_dir():
        return data_dir
    print(f"python -m spark_jobs {job}: error: {data_dir} holds no segments/ directory", file=sys.stderr)
    return None


def source_from_args(args: argparse.Namespace, data_dir: Path) -> SegmentSource:
    """The source ``--node-url`` / ``--offline`` name; a :class:`ConfigError` for neither or both."""
    if args.node_url and args.offline:
        raise ConfigError("--node-url and --offline exclude each other: list segments from the node, or without one")
    if args.offline:
        return SegmentSource(data_dir)
    if not args.node_url:
        raise ConfigError(
            "which segments are sealed and which records are dead is the node's to say: give --node-url "
            f"(token in {ENV_NODE_TOKEN}), or --offline when no node runs on --data-dir"
        )
    return SegmentSource(data_dir, args.node_url, node_token(args.node_url))


__all__ = [
    "SegmentSource",
    "add_source_arguments",
    "data_dir_of",
    "engine_segment_files",
    "node_segment_files",
    "offline_segment_files",
    "source_from_args",
]
