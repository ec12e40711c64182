"""The node's HTTP API (``/v1``), a thin layer over one :class:`StorageAdapter`.

Engine calls block (an append waits for its fsync), so each runs in the thread
pool. Errors become RFC 9457 problem details with a stable ``code``
(:mod:`storage_engine.node.problems`). The contract is ``docs/node-api.md``; the
metrics are listed in ``docs/metrics.md``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from storage_engine.api import EngineStats, NamespaceInfo, NewRecord, StorageAdapter
from storage_engine.clock import Clock, SystemClock
from storage_engine.errors import InvalidArgumentError, NamespaceExistsError, UnknownNamespaceError
from storage_engine.formats.framing import MEDIA_TYPE, decode_produce, encode_fetch
from storage_engine.node.auth import BearerAuth
from storage_engine.node.engine_metrics import EngineCollector, all_backlog
from storage_engine.node.idempotency import IdempotencyCache
from storage_engine.node.lifecycle import add_lifecycle_routes
from storage_engine.node.metrics import NodeMetrics, RequestMetrics
from storage_engine.node.params import arguments, read_body, shard_param
from storage_engine.node.probes import add_probe_routes
from storage_engine.node.problems import http_error_handler, server_error_handler
from storage_engine.node.routes import RouteTable
from storage_engine.node.schedule import add_schedule_routes
from storage_engine.node.segment_files import add_segment_file_routes
from storage_engine.node.subscriptions import add_subscription_routes
from storage_engine.node.ttl_index import add_ttl_index_routes
from storage_engine.node_api.placement import RoundRobin, shard_for_key
from storage_engine.node_api.wire import (
    namespace_to_json,
    new_record_from_json,
    policy_from_json,
    read_result_to_json,
    record_to_json,
    segment_to_json,
    shard_stats_to_json,
)
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.validation import MAX_SHARDS, validate_namespace_name
from storage_engine.version import package_version

log = logging.getLogger("storage_node")
MAX_BATCH_RECORDS = 100_000


class ProduceIsForeground:
    """A produce request counts as foreground work from its first byte to its last answer byte
    (:class:`storage_engine.rules.pacing.Foreground`): a TTL scan pauses while it runs, not only
    while the engine appends (reading and decoding the body and answering need the GIL too)."""

    def __init__(self, app: ASGIApp, engine: StorageAdapter) -> None:
        self.app = app
        self.foreground = getattr(engine, "foreground", None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        foreground = self.foreground
        if foreground is None or scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if not path.endswith("/records"):
            await self.app(scope, receive, send)
            return
        with foreground.running():  # the engine's append within counts once: the context goes with it
            await self.app(scope, receive, send)


async def _produced_records(request: Request, now_ms: int) -> list[NewRecord]:
    """A produce body: JSON ``{"records": [...]}`` or one binary batch (``application/vnd.lcs.batch``);
    the route takes no other argument, in the query or the body."""
    if request.headers.get("content-type", "").split(";")[0].strip() == MEDIA_TYPE:
        await arguments(request, body=False)
        return decode_produce(await read_body(request))
    return _records_from(await arguments(request, body_only={"records"}), now_ms)


def _records_from(body: Mapping[str, Any], now_ms: int) -> list[NewRecord]:
    records = body.get("records")
    if not isinstance(records, list) or not records:
        raise InvalidArgumentError("records", "must be a non-empty list")
    if len(records) > MAX_BATCH_RECORDS:
        raise InvalidArgumentError("records", f"must hold at most {MAX_BATCH_RECORDS} records")
    return [new_record_from_json(r, i, now_ms) for i, r in enumerate(records)]


def upsert_namespace(
    engine: StorageAdapter, name: str, shards: int | None, policy: NamespacePolicy
) -> tuple[NamespaceInfo, bool]:
    """The namespace with this policy: created with ``shards`` when absent (``True``), else updated. A
    control plane pushing its desired state calls this, whether or not an earlier push got through."""
    try:
        current = engine.get_namespace(name)
    except UnknownNamespaceError:
        if shards is None:
            raise
        try:
            return engine.create_namespace(validate_namespace_name(name), shards, policy), True
        except NamespaceExistsError:  # created by a concurrent push meanwhile: update it instead
            current = engine.get_namespace(name)
    if shards is not None and shards != current.shards:
        raise InvalidArgumentError(
            "shards", f"is {current.shards} on this node: a namespace's shard count never changes"
        )
    return engine.update_namespace(name, policy), False


def build_app(
    engine: StorageAdapter, token: str | None, clock: Clock | None = None, metrics_token: str | None = None
) -> Starlette:
    """The ASGI app serving ``engine``; ``token=None`` disables authentication. ``metrics_token`` opens
    ``GET /metrics`` only (:class:`~storage_engine.node.auth.BearerAuth`)."""
    clock = clock or SystemClock()
    idempotency = IdempotencyCache()
    round_robin = RoundRobin()
    metrics = NodeMetrics()
    metrics.register(EngineCollector(engine, package_version(), lambda: all_backlog(engine)))

    table = RouteTable(metrics)

    def measured_stats() -> EngineStats:
        engine.check_disk()  # fresh disk figures (it only measures and updates the disk-full flag)
        return engine.stats()

    def subscription_backlog() -> list[dict[str, Any]]:
        """Per namespace, subscription and shard: backlog messages (offset distance and live), bytes and age."""
        return [
            {
                "namespace": row.namespace,
                "subscription": row.subscription,
                "shard": row.shard,
                "backlog_messages": row.messages,
                "backlog_live_messages": row.live_messages,
                "backlog_bytes": row.bytes,
                "backlog_age_ms": row.age_ms,
            }
            for row in all_backlog(engine)
        ]

    route = table.add

    async def idempotent(request: Request, produce: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        key = request.headers.get("idempotency-key")
        if not key:
            return await produce()
        if len(key) > 200:
            raise InvalidArgumentError("Idempotency-Key", "must be at most 200 characters")
        return await idempotency.run(f"{request.url.path}\0{key}", produce)

    add_probe_routes(table, engine)

    @route("/v1/namespaces", "GET", "list_namespaces")
    async def list_namespaces(request: Request) -> Response:
        await arguments(request)
        infos = await run_in_threadpool(engine.list_namespaces)
        return JSONResponse({"namespaces": [namespace_to_json(i) for i in infos]})

    @route("/v1/namespaces", "POST", "create_namespace")
    async def create_namespace(request: Request) -> Response:
        args = await arguments(request, {"name", "shards"}, body_only={"policy"})
        name = validate_namespace_name(args.text("name"))
        shards = args.integer("shards", 1, minimum=1, maximum=MAX_SHARDS)
        policy = policy_from_json(args.json("policy"))
        info = await run_in_threadpool(engine.create_namespace, name, shards, policy)
        return JSONResponse(namespace_to_json(info), status_code=201)

    @route("/v1/namespaces/{ns}", "GET", "get_namespace")
    async def get_namespace(request: Request) -> Response:
        await arguments(request)
        info = await run_in_threadpool(engine.get_namespace, request.path_params["ns"])
        return JSONResponse(namespace_to_json(info))

    @route("/v1/namespaces/{ns}", "PUT", "update_namespace")
    async def put_namespace(request: Request) -> Response:
        """Set a namespace's policy; with ``shards``, an idempotent upsert: created when absent (201),
        updated when present with that shard count (200), refused when its shard count differs."""
        args = await arguments(request, {"shards"}, body_only={"policy"})
        policy = policy_from_json(args.json("policy"))
        shards = args.optional_integer("shards", minimum=1, maximum=MAX_SHARDS)
        info, created = await run_in_threadpool(upsert_namespace, engine, request.path_params["ns"], shards, policy)
        return JSONResponse(namespace_to_json(info), status_code=201 if created else 200)

    @route("/v1/namespaces/{ns}", "DELETE", "delete_namespace")
    async def delete_namespace(request: Request) -> Response:
        await arguments(request)
        await run_in_threadpool(engine.delete_namespace, request.path_params["ns"])
        return Response(status_code=204)

    @route("/v1/namespaces/{ns}/shards/{shard}/records", "POST", "produce_shard")
    async def produce_shard(request: Request) -> Response:
        ns, shard = request.path_params["ns"], shard_param(request)
        records = await _produced_records(request, clock.now_ms())

        async def produce() -> dict[str, Any]:
            result = await run_in_threadpool(metrics.timed_append, engine.append, ns, shard, records)
            return {"shard": shard, "base_offset": result.base_offset, "count": result.count}

        return JSONResponse(await idempotent(request, produce))

    @route("/v1/namespaces/{ns}/records", "POST", "produce")
    async def produce_placed(request: Request) -> Response:
        ns = request.path_params["ns"]
        records = await _produced_records(request, clock.now_ms())

        async def produce() -> dict[str, Any]:
            shards = (await run_in_threadpool(engine.get_namespace, ns)).shards
            groups: dict[int, list[int]] = {}
            for i, r in enumerate(records):
                shard = shard_for_key(r.key, shards) if r.key is not None else round_robin.next_shard(shards)
                groups.setdefault(shard, []).append(i)
            placed: list[dict[str, int]] = [{} for _ in records]
            # Each shard's part is atomic; a failure on one shard leaves the others written.
            for shard, indexes in sorted(groups.items()):
                part = [records[i] for i in indexes]
                result = await run_in_threadpool(metrics.timed_append, engine.append, ns, shard, part)
                for offset, i in zip(result.offsets, indexes, strict=True):
                    placed[i] = {"shard": shard, "offset": offset}
            return {"records": placed}

        return JSONResponse(await idempotent(request, produce))

    @route("/v1/namespaces/{ns}/shards/{shard}/records", "GET", "fetch")
    async def fetch(request: Request) -> Response:
        ns, shard = request.path_params["ns"], shard_param(request)
        args = await arguments(request, {"offset", "max_records", "max_bytes"})
        offset = args.integer("offset", 0)
        max_records = args.integer("max_records", 500, minimum=1)
        max_bytes = args.integer("max_bytes", 1 << 20, minimum=1)
        result = await run_in_threadpool(
            metrics.timed_read, "fetch", engine.read, ns, shard, offset, max_records, max_bytes
        )
        if MEDIA_TYPE in request.headers.get("accept", ""):
            body, headers = encode_fetch(result)
            return Response(body, media_type=MEDIA_TYPE, headers=headers)
        return JSONResponse(read_result_to_json(result))

    @route("/v1/namespaces/{ns}/shards/{shard}/key", "GET", "read_key")
    async def read_key(request: Request) -> Response:
        ns, shard = request.path_params["ns"], shard_param(request)
        key = (await arguments(request, {"key"})).text("key")
        if key is None:
            raise InvalidArgumentError("key", "is required (the key as UTF-8 text)")
        record = await run_in_threadpool(metrics.timed_read, "key", engine.read_key, ns, shard, key.encode())
        return JSONResponse({"record": record_to_json(record) if record else None})

    @route("/v1/namespaces/{ns}/shards/{shard}/tags/{tag}", "GET", "read_tag")
    async def read_tag(request: Request) -> Response:
        ns, shard, tag = request.path_params["ns"], shard_param(request), request.path_params["tag"]
        args = await arguments(request, {"offset", "max_records"})
        offset = args.integer("offset", 0)
        max_records = args.integer("max_records", 500, minimum=1)
        result = await run_in_threadpool(
            metrics.timed_read, "tag", engine.read_tag, ns, shard, tag, offset, max_records
        )
        return JSONResponse(read_result_to_json(result))

    @route("/v1/namespaces/{ns}/shards/{shard}/offset-for-time", "GET", "offset_for_time")
    async def offset_for_time(request: Request) -> Response:
        ns, shard = request.path_params["ns"], shard_param(request)
        timestamp = (await arguments(request, {"timestamp"})).integer("timestamp")
        offset = await run_in_threadpool(
            metrics.timed_read, "offset_for_time", engine.offset_for_timestamp, ns, shard, timestamp
        )
        return JSONResponse({"offset": offset})

    @route("/v1/namespaces/{ns}/shards/{shard}/segments", "GET", "segments")
    async def segments(request: Request) -> Response:
        ns, shard = request.path_params["ns"], shard_param(request)
        args = await arguments(request, {"after", "limit"})
        after = args.integer("after", -1, minimum=-1)
        limit = args.integer("limit", 100, minimum=1)
        found = await run_in_threadpool(engine.list_segments, ns, shard)
        page = [s for s in found if s.base_offset > after][:limit]
        more = len(page) == limit and page[-1].base_offset < found[-1].base_offset
        return JSONResponse(
            {"segments": [segment_to_json(s) for s in page], "next_after": page[-1].base_offset if more else None}
        )

    @route("/v1/namespaces/{ns}/shards/{shard}/stats", "GET", "shard_stats")
    async def shard_stats(request: Request) -> Response:
        await arguments(request)
        stats = await run_in_threadpool(engine.shard_stats, request.path_params["ns"], shard_param(request))
        return JSONResponse(shard_stats_to_json(stats))

    @route("/v1/stats", "GET", "stats")
    async def stats(request: Request) -> Response:
        await arguments(request)
        found = await run_in_threadpool(measured_stats)
        return JSONResponse(
            {
                "adapter": found.adapter,
                "namespaces": found.namespaces,
                "shards": [shard_stats_to_json(s) for s in found.shards],
                "counters": found.counters,
                "http": metrics.snapshot(),
                "subscriptions": await run_in_threadpool(subscription_backlog),
            }
        )

    @route("/metrics", "GET", "metrics")
    async def prometheus(request: Request) -> Response:
        await arguments(request)
        body, content_type = await run_in_threadpool(metrics.exposition, request.headers.get("accept"))
        return Response(body, headers={"Content-Type": content_type})

    add_lifecycle_routes(table, engine)
    add_subscription_routes(table, engine)
    add_ttl_index_routes(table, engine)
    add_schedule_routes(table, engine)
    add_segment_file_routes(table, engine)
    with contextlib.suppress(InvalidArgumentError):  # a memory engine may have no data dir (no import dir)
        engine.ttl_import_dir()  # created now, so a caller sharing the data dir can place files in it

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        # uvicorn has stopped accepting and drained in-flight requests by now.
        log.info("closing engine: flushing, fsyncing, closing RocksDB")
        await run_in_threadpool(engine.close)

    return Starlette(
        routes=table.routes,
        middleware=[
            Middleware(RequestMetrics, metrics=metrics, routes=table.routes),
            Middleware(ProduceIsForeground, engine=engine),
            Middleware(BearerAuth, token=token, metrics_token=metrics_token),
        ],
        exception_handlers={HTTPException: http_error_handler(table.routes), Exception: server_error_handler},
        lifespan=lifespan,
    )
