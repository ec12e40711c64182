"""The node's due-times route (DESIGN §3 "Timeliness").

``GET /v1/node/next-due`` answers :meth:`StorageAdapter.next_due`: per kind of node-wide
sweep (``expire-scan``, ``reclaim``, ``retention``) the earliest time in ms it has work,
``null`` when nothing stored makes it due, with the node's ``now`` to compare against. The
control plane schedules each sweep for that moment, as ``POST /v1/node/due/{operation}``:
the sweep of just the shards that are due. Computed from metadata with cached per-shard
minima, so it is cheap to ask often.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from storage_engine.api import StorageAdapter
from storage_engine.node.params import arguments

if TYPE_CHECKING:
    from storage_engine.node.routes import RouteTable


def add_schedule_routes(table: RouteTable, engine: StorageAdapter) -> None:
    add_due_sweep_routes(table, engine)

    @table.add("/v1/node/next-due", "GET", "next_due")
    async def next_due(request: Request) -> Response:
        await arguments(request)
        return JSONResponse((await run_in_threadpool(engine.next_due)).to_dict())


def add_due_sweep_routes(table: RouteTable, engine: StorageAdapter) -> None:
    """``POST /v1/node/due/{operation}``: one step of a deadline-driven sweep (``StorageAdapter.sweep_due``)."""

    @table.add("/v1/node/due/{operation}", "POST", "due_sweep")
    async def due_sweep(request: Request) -> Response:
        limit = (await arguments(request, {"limit"})).optional_integer("limit", minimum=1)
        step = await run_in_threadpool(engine.sweep_due, request.path_params["operation"], limit)
        return JSONResponse(step.to_dict())
