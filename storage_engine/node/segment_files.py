"""The node's segment-file route: what a reader of the data directory's files may read.

``GET /v1/namespaces/{ns}/shards/{shard}/segment-files`` lists a shard's sealed segments (with
``state=all`` the active one too, with its committed size), each with its file relative to the data
directory, the bytes to read and, unless ``dead=false``, the offsets marked dead that are still in
the file (:mod:`storage_engine.formats.segment_files`). Spark jobs read segment files on their executors
from this list, never from file names, and never open the node's RocksDB.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from storage_engine.adapters.listing import segment_file_page
from storage_engine.api import StorageAdapter
from storage_engine.errors import InvalidArgumentError
from storage_engine.formats.segment_files import LIST_SEALED, LIST_STATES
from storage_engine.node.params import arguments, shard_param

if TYPE_CHECKING:
    from storage_engine.node.routes import RouteTable

DEFAULT_LIMIT = 100
PARAMS = frozenset({"state", "dead", "after", "limit"})


def add_segment_file_routes(table: RouteTable, engine: StorageAdapter) -> None:
    route = table.add

    @route("/v1/namespaces/{ns}/shards/{shard}/segment-files", "GET", "segment_files")
    async def segment_files(request: Request) -> Response:
        """``state`` (``sealed``: default, or ``all``), ``dead`` (default true), ``after`` (a base
        offset cursor, default -1) and ``limit`` (default 100) → a :class:`SegmentFilePage`."""
        ns, shard = request.path_params["ns"], shard_param(request)
        args = await arguments(request, PARAMS)
        state = args.text("state")
        state = LIST_SEALED if state is None else state
        if state not in LIST_STATES:
            raise InvalidArgumentError("state", f"must be one of {', '.join(LIST_STATES)}")
        dead = args.flag("dead", True)
        after = args.integer("after", -1, minimum=-1)
        limit = args.integer("limit", DEFAULT_LIMIT, minimum=1)
        page = await run_in_threadpool(
            segment_file_page, engine, ns, shard, state=state, dead=dead, after=after, limit=limit
        )
        return JSONResponse(page.to_dict())
