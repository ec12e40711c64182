"""``storage-node``: the one process that opens a data directory.

Opens the engine (which takes the data directory's lock, so a second node on
the same directory refuses to start), then serves :mod:`storage_engine.node.app`
with uvicorn. SIGTERM/SIGINT: uvicorn stops accepting, finishes in-flight
requests, then the app's lifespan closes the engine (flush, fsync, close
RocksDB). Every route but the probes (``/health``, ``/livez``, ``/readyz``)
needs ``Authorization: Bearer <token>`` unless started with
``--insecure-no-auth``; ``--metrics-token`` opens ``GET /metrics`` only.

Every option also reads an environment variable (a container sets those), the
flag winning; ``--help`` names each with its default. A variable that cannot be
read names itself and the node exits with code 2 before opening anything.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import prometheus_client
import uvicorn

from storage_engine import open_engine
from storage_engine.config import ADAPTERS, Durability, EngineConfig
from storage_engine.errors import DataDirLockedError, StorageError
from storage_engine.node.app import build_app
from storage_engine.node_api import logs
from storage_engine.version import package_version

log = logging.getLogger("storage_node")
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
TRUE, FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


class EnvError(ValueError):
    """An environment variable that cannot be read as its option's type."""


def _from_env(env: str, default: Any, parse: Callable[[str], Any], what: str) -> Any:
    raw = os.environ.get(env, "").strip()
    if raw == "":
        return default
    try:
        return parse(raw)
    except ValueError:
        raise EnvError(f"{env} must be {what}, got {raw!r}") from None


def _flag_type(parse: Callable[[str], Any], what: str) -> Callable[[str], Any]:
    """``parse`` for argparse: a refused value is reported as what the option takes."""

    def convert(raw: str) -> Any:
        try:
            return parse(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {raw!r}") from None

    return convert


def _bool(raw: str) -> bool:
    if raw.lower() not in TRUE | FALSE:
        raise ValueError(raw)
    return raw.lower() in TRUE


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise ValueError(raw)
    return value


def _port(raw: str) -> int:
    value = int(raw)
    if not 0 <= value <= 65535:
        raise ValueError(raw)
    return value


def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw.lower() not in choices:
            raise ValueError(raw)
        return raw.lower()

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The options; each one's default comes from its environment variable when set. The help shows
    the built-in default, never a variable's value (a token must not appear in ``--help``)."""
    p = argparse.ArgumentParser(
        prog="storage-node",
        description="Serve one storage-engine data directory over HTTP. Every option also reads the "
        "environment variable named in its help; the flag wins.",
    )
    durabilities = tuple(d.value for d in Durability)
    io_workers = EngineConfig().io_workers

    def option(flag: str, env: str, default: Any, help_text: str, parse: Callable[[str], Any], what: str) -> None:
        shown = "none" if default is None else default
        full_help = f"{help_text} [env {env}; default: {shown}]"
        value = _from_env(env, default, parse, what)
        p.add_argument(
            flag,
            default=value,
            type=_flag_type(parse, what),
            help=full_help,
            metavar=flag.lstrip("-").upper().replace("-", "_"),
        )

    option("--data-dir", "NODE_DATA_DIR", Path("var/data/node"), "data directory to serve", Path, "a path")
    option("--host", "NODE_HOST", "127.0.0.1", "address to listen on", str, "an address")
    option("--port", "NODE_PORT", 7070, "TCP port to listen on", _port, "a port number (0-65535)")
    option(
        "--token",
        "NODE_TOKEN",
        None,
        "bearer token for every route; required unless --insecure-no-auth",
        str,
        "a token",
    )
    option(
        "--metrics-token",
        "NODE_METRICS_TOKEN",
        None,
        "a second bearer token that may only GET /metrics (for a Prometheus scraper)",
        str,
        "a token",
    )
    p.add_argument(
        "--insecure-no-auth",
        action="store_true",
        default=_from_env("NODE_INSECURE_NO_AUTH", False, _bool, "true or false (1/0, yes/no, on/off)"),
        help="serve without authentication, local development only [env NODE_INSECURE_NO_AUTH=1; default: off]",
    )
    option(
        "--adapter",
        "NODE_ADAPTER",
        "segment",
        f"storage adapter: {', '.join(ADAPTERS)}",
        _choice(ADAPTERS),
        "one of " + ", ".join(ADAPTERS),
    )
    option(
        "--io-workers",
        "NODE_IO_WORKERS",
        io_workers,
        "threads writing segment files",
        _positive_int,
        "a positive integer",
    )
    option(
        "--durability",
        "NODE_DURABILITY",
        Durability.FSYNC.value,
        f"when an append is acknowledged: {', '.join(durabilities)}",
        _choice(durabilities),
        "one of " + ", ".join(durabilities),
    )
    option(
        "--disk-capacity",
        "NODE_DISK_CAPACITY",
        None,
        "disk quota in bytes for the data directory (none: the filesystem's size)",
        _positive_int,
        "a positive integer (bytes)",
    )
    option(
        "--tier-uri",
        "NODE_TIER_URI",
        None,
        "object store for tiered storage: file:///dir or s3://bucket[/prefix] (S3 endpoint and credentials "
        "from TIER_S3_ENDPOINT, AWS_*) (none: <data dir>-tier beside the data directory)",
        str,
        "a file:// or s3:// URI",
    )
    option(
        "--log-level",
        "LOG_LEVEL",
        "info",
        f"log level: {', '.join(LOG_LEVELS)}",
        _choice(LOG_LEVELS),
        "one of " + ", ".join(LOG_LEVELS),
    )
    option(
        "--log-format",
        "LOG_FORMAT",
        "plain",
        f"log lines: {', '.join(logs.LOG_FORMATS)} (json: one JSON object a line)",
        _choice(logs.LOG_FORMATS),
        "one of " + ", ".join(logs.LOG_FORMATS),
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except EnvError as exc:
        print(f"storage-node: {exc}", file=sys.stderr)
        return 2
    logs.configure(args.log_format, args.log_level.upper())
    if not args.token and not args.insecure_no_auth:
        print(
            "storage-node: --token (or NODE_TOKEN) is required; use --insecure-no-auth for local development",
            file=sys.stderr,
        )
        return 2
    config = EngineConfig(
        data_dir=args.data_dir,
        adapter=args.adapter,
        io_workers=args.io_workers,
        durability=Durability(args.durability),
        disk_capacity_bytes=args.disk_capacity,
        tier_uri=args.tier_uri,
    )
    try:
        engine = open_engine(config)
    except DataDirLockedError as exc:
        print(f"storage-node: {exc}; is another node running on it?", file=sys.stderr)
        return 3
    except StorageError as exc:
        print(f"storage-node: cannot open {args.data_dir}: {exc}", file=sys.stderr)
        return 3
    # One process, one node: a counter's creation time is the process start, which
    # process_start_time_seconds already says; no *_created series.
    prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped in prometheus_client
    token = None if args.insecure_no_auth else args.token
    app = build_app(engine, token, metrics_token=args.metrics_token if token else None)
    log.info("serving %s (%s adapter) on http://%s:%d", args.data_dir, args.adapter, args.host, args.port)
    # uvicorn shuts down gracefully on SIGTERM/SIGINT, then re-raises the signal
    # under the handlers it found: make those a clean exit.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _exit_cleanly)
    # log_config=None: uvicorn's lines go through the logging configured above (LOG_FORMAT).
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        log_config=None,
        timeout_graceful_shutdown=30,
    )
    return 0


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    sys.exit(main())
