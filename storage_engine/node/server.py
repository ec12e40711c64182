"""``storage-node``: the one process that opens a data directory.

Opens the engine (which takes the data directory's lock, so a second node on
the same directory refuses to start), then serves :mod:`storage_engine.node.app`
with uvicorn. SIGTERM/SIGINT: uvicorn stops accepting, finishes in-flight
requests, then the app's lifespan closes the engine (flush, fsync, close
RocksDB). Every route but ``GET /health`` needs ``Authorization: Bearer
<token>`` unless started with ``--insecure-no-auth``.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

import uvicorn

from storage_engine import open_engine
from storage_engine.config import ADAPTERS, Durability, EngineConfig
from storage_engine.errors import DataDirLockedError, StorageError
from storage_engine.node.app import build_app

log = logging.getLogger("storage_node")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="storage-node", description="Serve one storage-engine data directory over HTTP.")
    p.add_argument("--data-dir", type=Path, default=Path(os.environ.get("NODE_DATA_DIR", "var/data/node")))
    p.add_argument("--host", default=os.environ.get("NODE_HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(os.environ.get("NODE_PORT", "7070")))
    p.add_argument("--token", default=os.environ.get("NODE_TOKEN"), help="bearer token (or NODE_TOKEN)")
    p.add_argument("--insecure-no-auth", action="store_true", help="serve without authentication (local dev only)")
    p.add_argument("--adapter", choices=ADAPTERS, default=os.environ.get("NODE_ADAPTER", "segment"))
    p.add_argument("--io-workers", type=int, default=EngineConfig().io_workers)
    p.add_argument("--durability", choices=[d.value for d in Durability], default=Durability.FSYNC.value)
    p.add_argument(
        "--disk-capacity",
        type=int,
        default=int(os.environ["NODE_DISK_CAPACITY"]) if os.environ.get("NODE_DISK_CAPACITY") else None,
        help="bytes (or NODE_DISK_CAPACITY); default: the filesystem's size",
    )
    p.add_argument("--log-level", default=os.environ.get("LOG_LEVEL", "info").lower())
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
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
    )
    try:
        engine = open_engine(config)
    except DataDirLockedError as exc:
        print(f"storage-node: {exc}; is another node running on it?", file=sys.stderr)
        return 3
    except StorageError as exc:
        print(f"storage-node: cannot open {args.data_dir}: {exc}", file=sys.stderr)
        return 3
    app = build_app(engine, None if args.insecure_no_auth else args.token)
    log.info("serving %s (%s adapter) on http://%s:%d", args.data_dir, args.adapter, args.host, args.port)
    # uvicorn shuts down gracefully on SIGTERM/SIGINT, then re-raises the signal
    # under the handlers it found: make those a clean exit.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _exit_cleanly)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=30)
    return 0


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    sys.exit(main())
