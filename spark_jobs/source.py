"""Where a job's list of segment files comes from: the node, never file names.

The node owns its data directory: which segments are sealed, how many bytes of each to read, and which
records in them are dead live in its RocksDB, which only the node process may open. So the driver asks
the node (``GET /v1/namespaces/{ns}/shards/{shard}/segment-files``, bearer token from ``$NODE_TOKEN``) and
hands the executors :class:`~spark_jobs.segments.SegmentFile` descriptors (path, size, dead offsets); the
executors read only the files, at ``--data-dir``, where they see the node's data directory.

Without a node (a stopped node's directory, a copy of one, a bench's generated data) ``--offline`` says so
explicitly: the driver opens the directory with the engine itself (it takes the directory's lock, so it
refuses while a node runs on it; opening recovers the directory as a node start would) and lists it with
the same function the node answers with (:func:`storage_engine.adapters.listing.segment_file_page`). There
is no silent fallback to guessing: a job given neither refuses to start.

Tiered storage (issue 19): the listing says per segment where its bytes are (``local``, ``both``, ``remote``)
and its object's key in the node's store. A ``remote`` segment is read by the executors from the store, a
``both`` one too with ``--prefer-tier`` (a machine without the node's data directory), each through the
engine's reader (:mod:`spark_jobs.tier_reads`); ``--tier-uri`` names the store when this job reaches it under
another URI than the node's (credentials only from the environment).

Several nodes (a namespace whose shards are placed on several, DESIGN §1): ``--node-url`` may be repeated
(jobs that read only); the driver lists every node's segments and the job reads them all. Tokens come from
``$NODE_TOKENS`` (a JSON object, node URL → token) or, for a node not in it, ``$NODE_TOKEN``. ``--data-dir``
is where this job sees the data directory of the first node; ``--node-data-dir URL=DIR`` gives another node's.
A node without one here has its segments read from the store; one that is only on its disk (not offloaded) is
unreadable here, which :meth:`SegmentSource.listing` reports and :meth:`SegmentSource.segments` refuses.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from spark_jobs.config import ENV_NODE_TOKEN, ConfigError, node_token
from spark_jobs.segments import SegmentFile
from storage_engine.formats.segment_files import LIST_ALL, LIST_SEALED

if TYPE_CHECKING:
    from storage_engine.api import StorageAdapter
    from storage_engine.node_api.client import NodeClient

DEFAULT_DATA_DIR = "var/data/node"
ENV_DATA_DIR = "NODE_DATA_DIR"
ENV_NODE_TOKENS = "NODE_TOKENS"  # JSON object: node URL → its token (several nodes)
ENV_TIER_URI = "SPARK_TIER_URI"  # the job's --tier-uri (not NODE_TIER_URI: that is a node's own setting)
ENV_PREFER_TIER = "SPARK_PREFER_TIER"  # 1/true: --prefer-tier
NODE = "node"
OFFLINE = "offline"


def _sorted(found: list[SegmentFile]) -> list[SegmentFile]:
    return sorted(found, key=lambda s: (s.namespace, s.shard, s.base_offset))


def engine_segment_files(
    engine: StorageAdapter,
    data_dir: str | Path,
    *,
    namespaces: Sequence[str] = (),
    include_active: bool = False,
    prefer_tier: bool = False,
    tier_uri: str | None = None,
) -> list[SegmentFile]:
    """The segment files of ``engine`` (open in this process on ``data_dir``), sorted by namespace, shard
    and base offset: sealed ones, and with ``include_active`` each shard's active one (its committed bytes).
    ``namespaces`` narrows to those (a name the engine does not have lists nothing). ``prefer_tier`` and
    ``tier_uri``: see :meth:`SegmentFile.of`."""
    from storage_engine.adapters.listing import segment_file_page

    state = LIST_ALL if include_active else LIST_SEALED
    found: list[SegmentFile] = []
    for info in engine.list_namespaces():
        if namespaces and info.name not in namespaces:
            continue
        for shard in range(info.shards):
            page = segment_file_page(engine, info.name, shard, state=state, dead=True)
            found += [SegmentFile.of(s, data_dir, prefer_tier=prefer_tier, tier_uri=tier_uri) for s in page.segments]
    return _sorted(found)


def node_segment_files(
    client: NodeClient,
    data_dir: str | Path | None,
    *,
    namespaces: Sequence[str] = (),
    include_active: bool = False,
    prefer_tier: bool = False,
    tier_uri: str | None = None,
) -> list[SegmentFile]:
    """As :func:`engine_segment_files`, asked of a node (``data_dir``: where this job sees its data directory,
    ``None`` when not on this machine: its segments can then only be read from the object store)."""
    state = LIST_ALL if include_active else LIST_SEALED
    found: list[SegmentFile] = []
    for info in client.list_namespaces():
        if namespaces and info.name not in namespaces:
            continue
        for shard in range(info.shards):
            found += [
                SegmentFile.of(s, data_dir, prefer_tier=prefer_tier, tier_uri=tier_uri, node=client.base_url)
                for s in client.segment_files(info.name, shard, state=state)
            ]
    return _sorted(found)


def offline_segment_files(
    data_dir: str | Path,
    *,
    namespaces: Sequence[str] = (),
    include_active: bool = False,
    prefer_tier: bool = False,
    tier_uri: str | None = None,
) -> list[SegmentFile]:
    """As :func:`engine_segment_files`, on an engine opened here on ``data_dir`` and closed again: for a
    directory no node runs on (the engine's lock refuses otherwise). ``tier_uri`` is the node's object store
    (default: the engine's, ``file://<data_dir>-tier``)."""
    from storage_engine import open_engine
    from storage_engine.config import EngineConfig
    from storage_engine.errors import DataDirLockedError

    config = EngineConfig(data_dir=Path(data_dir), adapter="segment", lifecycle_worker=False, tier_uri=tier_uri)
    try:
        engine = open_engine(config)
    except DataDirLockedError as exc:
        raise ConfigError(f"--offline: {exc}; a node runs on it, so ask it: give --node-url instead") from None
    try:
        return engine_segment_files(
            engine,
            data_dir,
            namespaces=namespaces,
            include_active=include_active,
            prefer_tier=prefer_tier,
            tier_uri=tier_uri,
        )
    finally:
        engine.close()


@dataclass(frozen=True)
class NodeSpec:
    """One node a job lists segments from: its URL, its token, and where this job sees its data directory
    (``None``: not on this machine)."""

    url: str
    token: str = field(default="", repr=False)
    data_dir: Path | None = None


@dataclass(frozen=True)
class Listing:
    """A job's segments: those it can read, and those it cannot (only on the disk of a node whose data
    directory is not here: not in the object store yet)."""

    segments: list[SegmentFile]
    unreadable: list[SegmentFile] = field(default_factory=list)


@dataclass(frozen=True)
class SegmentSource:
    """Where a job lists its segment files: the node at ``node_url`` (or the ``nodes``), or (neither) the
    engine opened here on ``data_dir`` (``--offline``). Files are read at ``data_dir`` (the first node's),
    objects from the store the listing names (``tier_uri`` replaces it)."""

    data_dir: Path | None
    node_url: str | None = None
    token: str = field(default="", repr=False)
    nodes: tuple[NodeSpec, ...] = ()
    prefer_tier: bool = False
    tier_uri: str | None = None

    @property
    def all_nodes(self) -> tuple[NodeSpec, ...]:
        if self.nodes:
            return self.nodes
        return (NodeSpec(self.node_url, self.token, self.data_dir),) if self.node_url else ()

    @property
    def kind(self) -> str:
        return NODE if self.all_nodes else OFFLINE

    def listing(self, *, namespaces: Sequence[str] = (), include_active: bool = False) -> Listing:
        """Every listed segment, readable here or not; two nodes listing the same segment is an error."""
        if not self.all_nodes:
            if self.data_dir is None:
                raise ConfigError("--offline needs the directory: give --data-dir")
            found = offline_segment_files(
                self.data_dir,
                namespaces=namespaces,
                include_active=include_active,
                prefer_tier=self.prefer_tier,
                tier_uri=self.tier_uri,
            )
        else:
            from storage_engine.node_api.client import NodeClient

            found = []
            owner: dict[str, str] = {}
            for node in self.all_nodes:
                with NodeClient(node.url, node.token) as client:
                    listed = node_segment_files(
                        client,
                        node.data_dir,
                        namespaces=namespaces,
                        include_active=include_active,
                        prefer_tier=self.prefer_tier,
                        tier_uri=self.tier_uri,
                    )
                for segment in listed:
                    if segment.key in owner and segment.base_offset >= 0:
                        raise ConfigError(
                            f"segment {segment.key} is listed by {owner[segment.key]} and by {node.url}: "
                            "a shard is hosted by one node (is the same node given twice under two URLs?)"
                        )
                    owner[segment.key] = node.url
                found += listed
            found = _sorted(found)
        return Listing(
            segments=[s for s in found if s.readable],
            unreadable=[s for s in found if not s.readable],
        )

    def segments(self, *, namespaces: Sequence[str] = (), include_active: bool = False) -> list[SegmentFile]:
        """The segments to read; a :class:`ConfigError` when one of them cannot be read here."""
        listing = self.listing(namespaces=namespaces, include_active=include_active)
        if listing.unreadable:
            raise ConfigError(unreadable_message(listing.unreadable))
        return listing.segments


def unreadable_message(unreadable: Sequence[SegmentFile]) -> str:
    names = ", ".join(f"{s.key} (on {s.node or 'the node'})" for s in unreadable[:5])
    more = f" and {len(unreadable) - 5} more" if len(unreadable) > 5 else ""
    return (
        f"{len(unreadable)} segments are only on the disk of a node whose data directory is not here: {names}{more}; "
        "give its directory (--data-dir for the first node, --node-data-dir URL=DIR for the others), or offload "
        "them to the object store first"
    )


def node_tokens(urls: Sequence[str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each node's bearer token: ``$NODE_TOKENS`` (JSON object, URL → token) or else ``$NODE_TOKEN``."""
    env = os.environ if env is None else env
    raw = env.get(ENV_NODE_TOKENS, "").strip()
    mapping: dict[str, str] = {}
    if raw:
        try:
            parsed = json.loads(raw)
        except ValueError:
            raise ConfigError(f"{ENV_NODE_TOKENS} must be a JSON object of node URL → token") from None
        if not isinstance(parsed, dict) or not all(isinstance(v, str) for v in parsed.values()):
            raise ConfigError(f"{ENV_NODE_TOKENS} must be a JSON object of node URL → token")
        mapping = {str(url).rstrip("/"): token.strip() for url, token in parsed.items()}
    fallback = env.get(ENV_NODE_TOKEN, "").strip()
    tokens = {}
    for url in urls:
        token = mapping.get(url.rstrip("/")) or fallback
        if not token:
            raise ConfigError(f"no token for the node {url}: put it in {ENV_NODE_TOKENS} or {ENV_NODE_TOKEN}")
        tokens[url] = token
    return tokens


def _truthy(raw: str | None) -> bool:
    return (raw or "").strip().lower() in ("1", "true", "yes", "on")


def add_source_arguments(
    parser: argparse.ArgumentParser,
    *,
    data_dir_help: str = "the node's data directory, readable at the same path by every executor",
    node_url_help: str | None = None,
    several_nodes: bool = False,
) -> None:
    """``--data-dir``, ``--node-url``, ``--offline`` and the tier's options, the same for every job that reads
    segment files; with ``several_nodes``, ``--node-url`` may be repeated (and ``--node-data-dir`` given)."""
    group = parser.add_argument_group("segment files")
    group.add_argument(
        "--data-dir",
        default=os.environ.get(ENV_DATA_DIR) or DEFAULT_DATA_DIR,
        help=f"{data_dir_help} (env {ENV_DATA_DIR}, default {DEFAULT_DATA_DIR}; '' for none on this machine: "
        "segments are then read from the object store)",
    )
    if several_nodes:
        group.add_argument(
            "--node-url",
            action="append",
            default=[],
            help=node_url_help
            or "a node that lists its sealed segments and dead records; repeat it for every node hosting a shard "
            f"(tokens from env {ENV_NODE_TOKENS}, a JSON object URL → token, or {ENV_NODE_TOKEN}); "
            "--data-dir is the first one's data directory",
        )
        group.add_argument(
            "--node-data-dir",
            action="append",
            default=[],
            metavar="URL=DIR",
            help="where this job sees the data directory of the node at URL (repeatable; a node without one has "
            "its segments read from the object store)",
        )
    else:
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
    group.add_argument(
        "--tier-uri",
        default=os.environ.get(ENV_TIER_URI) or None,
        help="the object store (file:// or s3://bucket/prefix) where this job reads offloaded segments, when it "
        f"reaches it under another URI than the node lists (env {ENV_TIER_URI}; endpoint and credentials only "
        "from env: TIER_S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION)",
    )
    group.add_argument(
        "--prefer-tier",
        action="store_true",
        default=_truthy(os.environ.get(ENV_PREFER_TIER)),
        help="read segments that are both local and in the object store from the store (a machine without the "
        f"node's data directory; env {ENV_PREFER_TIER}=1); a missing --data-dir is then no error",
    )


def data_dir_of(job: str, raw: str) -> Path | None:
    """``--data-dir`` resolved, or ``None`` (after saying why on stderr) when it holds no ``segments/``."""
    data_dir = Path(raw).expanduser().resolve()
    if (data_dir / "segments").is_dir():
        return data_dir
    print(f"python -m spark_jobs {job}: error: {data_dir} holds no segments/ directory", file=sys.stderr)
    return None


def source_of(job: str, args: argparse.Namespace) -> SegmentSource | None:
    """The source a job's options name (:func:`source_from_args`), its ``--data-dir`` checked: ``None`` (after
    saying why on stderr) for a directory without ``segments/``, unless listing from nodes with no data
    directory here (``--data-dir ''``) or ``--prefer-tier`` (the store then serves what it holds)."""
    if args.offline or not (args.data_dir == "" or args.prefer_tier):
        data_dir = data_dir_of(job, args.data_dir)
        return None if data_dir is None else source_from_args(args, data_dir)
    resolved = Path(args.data_dir).expanduser().resolve() if args.data_dir else None
    if resolved is not None and not (resolved / "segments").is_dir():
        resolved = None
    return source_from_args(args, resolved)


def _node_urls(args: argparse.Namespace) -> list[str]:
    raw = args.node_url
    urls = [raw] if isinstance(raw, str) else list(raw or [])
    return [url.rstrip("/") for url in urls if url]


def _node_data_dirs(args: argparse.Namespace) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for pair in getattr(args, "node_data_dir", None) or []:
        url, sep, directory = pair.partition("=")
        if not sep or not url.strip() or not directory.strip():
            raise ConfigError(f"--node-data-dir takes URL=DIR, got {pair!r}")
        found[url.strip().rstrip("/")] = Path(directory).expanduser().resolve()
    return found


def source_from_args(args: argparse.Namespace, data_dir: Path | None) -> SegmentSource:
    """The source ``--node-url`` / ``--offline`` name; a :class:`ConfigError` for neither or both."""
    urls = _node_urls(args)
    prefer_tier = bool(getattr(args, "prefer_tier", False))
    tier_uri: str | None = getattr(args, "tier_uri", None) or None
    if urls and args.offline:
        raise ConfigError("--node-url and --offline exclude each other: list segments from the node, or without one")
    if args.offline:
        return SegmentSource(data_dir, prefer_tier=prefer_tier, tier_uri=tier_uri)
    if not urls:
        raise ConfigError(
            "which segments are sealed and which records are dead is the node's to say: give --node-url "
            f"(token in {ENV_NODE_TOKEN}), or --offline when no node runs on --data-dir"
        )
    if len(set(urls)) != len(urls):
        raise ConfigError("--node-url names the same node twice")
    if len(urls) == 1 and not getattr(args, "node_data_dir", None):
        token = node_tokens(urls)[urls[0]] if os.environ.get(ENV_NODE_TOKENS) else node_token(urls[0])
        return SegmentSource(data_dir, urls[0], token, prefer_tier=prefer_tier, tier_uri=tier_uri)
    tokens = node_tokens(urls)
    dirs = _node_data_dirs(args)
    unknown = sorted(set(dirs) - set(urls))
    if unknown:
        raise ConfigError(f"--node-data-dir names {', '.join(unknown)}, which is not a --node-url")
    nodes = tuple(NodeSpec(url, tokens[url], dirs.get(url, data_dir if i == 0 else None)) for i, url in enumerate(urls))
    return SegmentSource(data_dir, urls[0], tokens[urls[0]], nodes=nodes, prefer_tier=prefer_tier, tier_uri=tier_uri)


__all__ = [
    "Listing",
    "NodeSpec",
    "SegmentSource",
    "add_source_arguments",
    "data_dir_of",
    "engine_segment_files",
    "node_segment_files",
    "offline_segment_files",
    "source_from_args",
    "source_of",
]
