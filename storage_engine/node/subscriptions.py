"""The node's subscription routes: named cursors per shard (Pulsar semantics)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from storage_engine.api import StorageAdapter, SubscriptionInfo
from storage_engine.errors import InvalidArgumentError
from storage_engine.formats.framing import MEDIA_TYPE, encode_fetch
from storage_engine.node.params import arguments, shard_param
from storage_engine.node_api.wire import read_result_to_json

if TYPE_CHECKING:
    from storage_engine.node.routes import RouteTable

BASE = "/v1/namespaces/{ns}/subscriptions"


def subscription_to_json(info: SubscriptionInfo) -> dict[str, Any]:
    return info.to_dict()


def add_subscription_routes(table: RouteTable, engine: StorageAdapter) -> None:
    route = table.add

    @route(BASE, "GET", "list_subscriptions")
    async def list_subscriptions(request: Request) -> Response:
        await arguments(request)
        found = await run_in_threadpool(engine.list_subscriptions, request.path_params["ns"])
        return JSONResponse({"subscriptions": [subscription_to_json(s) for s in found]})

    @route(BASE, "POST", "create_subscription")
    async def create_subscription(request: Request) -> Response:
        args = await arguments(request, {"name", "initial"})
        name, initial = args.text("name"), args.text("initial")
        initial = "earliest" if initial is None else initial
        if not name:
            raise InvalidArgumentError("name", "is required (a non-empty string)")
        if initial not in ("earliest", "latest"):
            raise InvalidArgumentError("initial", "must be earliest or latest")
        info = await run_in_threadpool(
            lambda: engine.create_subscription(request.path_params["ns"], name, initial=initial)
        )
        return JSONResponse(subscription_to_json(info), status_code=201)

    @route(BASE + "/{name}", "DELETE", "delete_subscription")
    async def delete_subscription(request: Request) -> Response:
        await arguments(request)
        await run_in_threadpool(engine.delete_subscription, request.path_params["ns"], request.path_params["name"])
        return Response(status_code=204)

    @route(BASE + "/{name}/shards/{shard}/records", "GET", "read_subscription")
    async def read_subscription(request: Request) -> Response:
        ns, name, shard = request.path_params["ns"], request.path_params["name"], shard_param(request)
        args = await arguments(request, {"max_records", "max_bytes"})
        max_records = args.integer("max_records", 500, minimum=1)
        max_bytes = args.integer("max_bytes", 1 << 20, minimum=1)
        result = await run_in_threadpool(
            table.metrics.timed_read, "subscription", engine.read_subscription, ns, name, shard, max_records, max_bytes
        )
        if MEDIA_TYPE in request.headers.get("accept", ""):
            body, headers = encode_fetch(result)
            return Response(body, media_type=MEDIA_TYPE, headers=headers)
        return JSONResponse(read_result_to_json(result))

    @route(BASE + "/{name}/shards/{shard}/ack", "POST", "acknowledge")
    async def acknowledge(request: Request) -> Response:
        ns, name, shard = request.path_params["ns"], request.path_params["name"], shard_param(request)
        offset = (await arguments(request, {"offset"})).integer("offset", minimum=-1)
        cursor = await run_in_threadpool(engine.acknowledge, ns, name, shard, offset)
        return JSONResponse({"cursor": cursor})

    @route(BASE + "/{name}/shards/{shard}/seek", "POST", "seek_subscription")
    async def seek_subscription(request: Request) -> Response:
        """Reset a cursor, backward or forward: ``{"position"}`` (the new mark-delete position)
        or ``{"timestamp"}`` (just before the first record at or after it)."""
        ns, name, shard = request.path_params["ns"], request.path_params["name"], shard_param(request)
        args = await arguments(request, {"position", "timestamp"})
        position = args.optional_integer("position", minimum=-1)
        timestamp = args.optional_integer("timestamp")
        if (position is None) == (timestamp is None):
            raise InvalidArgumentError("position", "give exactly one of position and timestamp (integers)")
        cursor = await run_in_threadpool(
            lambda: engine.seek_subscription(ns, name, shard, position, timestamp=timestamp)
        )
        return JSONResponse({"cursor": cursor})

    @route("/v1/namespaces/{ns}/backlog", "GET", "backlog")
    async def backlog(request: Request) -> Response:
        name = (await arguments(request, {"subscription"})).text("subscription")
        rows = await run_in_threadpool(engine.backlog, request.path_params["ns"], name)
        return JSONResponse({"backlog": [row.to_dict() for row in rows]})
