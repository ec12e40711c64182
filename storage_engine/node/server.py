"""The storage node: the one process that opens a data directory.

A thin Starlette app around :func:`storage_engine.open_engine`, served by
uvicorn. Every route but ``GET /health`` needs ``Authorization: Bearer
<token>`` (compared in constant time) unless the node was started with
``--insecure-no-auth``. Engine calls block (an append waits for its fsync), so
they run in the thread pool. The HTTP contract is in ``docs/node-api.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from storage_engine import open_engine
from storage_engine.api import StorageAdapter
from storage_engine.config import ADAPTERS, Durability, EngineConfig
from storage_engine.errors import DataDirLockedError, InvalidArgumentError, StorageError
from storage_engine.validation import validate_namespace_name, validate_shard_count
from storage_engine.wire import error_body, namespace_to_json, policy_from_json, status_for

log = logging.getLogger("storage_node")
PUBLIC_PATHS = {"/health"}


class BearerAuth(BaseHTTPMiddleware):
    def __init__(self, app: Any, token: str | None) -> None:
        super().__init__(app)
        self._expected = f"Bearer {token}".encode() if token else None

    async def dispatch(self, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if self._expected is not None and request.url.path not in PUBLIC_PATHS:
            given = request.headers.get("authorization", "").encode()
            if not hmac.compare_digest(given, self._expected):
                return JSONResponse(
                    {"error": "unauthorized", "message": "missing or wrong bearer token"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
        return await call_next(request)


def _error(exc: StorageError) -> JSONResponse:
    status = status_for(exc)
    if status >= 500:
        log.error("engine error: %s", exc)
    return JSONResponse(error_body(exc), status_code=status)


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidArgumentError("body", f"must be valid JSON ({exc.msg if hasattr(exc, 'msg') else exc})") from exc
    if not isinstance(body, dict):
        raise InvalidArgumentError("body", "must be a JSON object")
    return body


def build_app(engine: StorageAdapter, token: str | None) -> Starlette:
    """The ASGI app serving ``engine``; ``token=None`` disables authentication."""

    def handled(fn: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def wrapper(request: Request) -> Response:
            try:
                return await fn(request)
            except StorageError as exc:
                return _error(exc)

        return wrapper

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "adapter": engine.name})

    @handled
    async def list_namespaces(request: Request) -> Response:
        infos = await run_in_threadpool(engine.list_namespaces)
        return JSONResponse({"namespaces": [namespace_to_json(i) for i in infos]})

    @handled
    async def create_namespace(request: Request) -> Response:
        body = await _json_body(request)
        unknown = sorted(set(body) - {"name", "shards", "policy"})
        if unknown:
            raise InvalidArgumentError(unknown[0], "unknown field")
        name = validate_namespace_name(body.get("name"))
        shards = validate_shard_count(body.get("shards", 1))
        policy = policy_from_json(body.get("policy"))
        info = await run_in_threadpool(engine.create_namespace, name, shards, policy)
        return JSONResponse(namespace_to_json(info), status_code=201)

    @handled
    async def get_namespace(request: Request) -> Response:
        info = await run_in_threadpool(engine.get_namespace, request.path_params["ns"])
        return JSONResponse(namespace_to_json(info))

    @handled
    async def put_namespace(request: Request) -> Response:
        body = await _json_body(request)
        unknown = sorted(set(body) - {"policy"})
        if unknown:
            raise InvalidArgumentError(unknown[0], "unknown field (only policy can change)")
        policy = policy_from_json(body.get("policy"))
        info = await run_in_threadpool(engine.update_namespace, request.path_params["ns"], policy)
        return JSONResponse(namespace_to_json(info))

    @handled
    async def delete_namespace(request: Request) -> Response:
        await run_in_threadpool(engine.delete_namespace, request.path_params["ns"])
        return Response(status_code=204)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        # uvicorn stops accepting and drains in-flight requests before this runs.
        log.info("closing engine")
        await run_in_threadpool(engine.close)

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/v1/namespaces", list_namespaces, methods=["GET"]),
        Route("/v1/namespaces", create_namespace, methods=["POST"]),
        Route("/v1/namespaces/{ns}", get_namespace, methods=["GET"]),
        Route("/v1/namespaces/{ns}", put_namespace, methods=["PUT"]),
        Route("/v1/namespaces/{ns}", delete_namespace, methods=["DELETE"]),
    ]
    return Starlette(routes=routes, middleware=[Middleware(BearerAuth, token=token)], lifespan=lifespan)


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
    p.add_argument("--disk-capacity", type=int, default=None, help="bytes; default: the filesystem's size")
    p.add_argument("--log-level", default=os.environ.get("LOG_LEVEL", "info").lower())
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if not args.token and not args.insecure_no_auth:
        print("storage-node: --token (or NODE_TOKEN) is required; use --insecure-no-auth for local development",
              file=sys.stderr)
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
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
