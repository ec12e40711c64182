"""The node's TTL-index routes: what an SST writer needs, and bulk loading from the import directory.

``PUT /v1/namespaces/{ns}/ttl-index`` takes the SST file as the request body: the node
streams it into its import directory (``<data_dir>/import/``) under a name of its own,
ingests it and removes it. ``POST /v1/namespaces/{ns}/ttl-index/ingest`` with
``{"file": "<name>"}`` ingests a file a caller sharing the data directory placed there.
No route takes a path: the node reads no file outside its import directory.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from storage_engine.api import StorageAdapter
from storage_engine.errors import InvalidArgumentError
from storage_engine.node.params import arguments

if TYPE_CHECKING:
    from storage_engine.node.routes import RouteTable

MAX_UPLOAD_BYTES = 16 << 30  # an SST of 16 GiB holds ~500 million TTL entries


async def _receive(request: Request, directory: Path) -> tuple[str, int]:
    """Stream the body into ``directory`` under a fresh name; returns the name and the size.
    It is written as a hidden ``.part`` file (a name ``{"file"}`` cannot take) and renamed
    when complete, so a half-written upload is never ingested."""
    name = f"upload-{uuid.uuid4().hex}.sst"
    part = directory / f".{name}.part"
    size = 0
    out: BinaryIO = await run_in_threadpool(part.open, "wb")
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_UPLOAD_BYTES:
                raise InvalidArgumentError("body", f"an SST upload must be at most {MAX_UPLOAD_BYTES} bytes")
            if chunk:
                await run_in_threadpool(out.write, chunk)
        await run_in_threadpool(os.fsync, out.fileno())
    except BaseException:
        out.close()
        part.unlink(missing_ok=True)
        raise
    out.close()
    part.rename(directory / name)
    return name, size


def add_ttl_index_routes(table: RouteTable, engine: StorageAdapter) -> None:
    route = table.add

    @route("/v1/namespaces/{ns}/ttl-index", "GET", "ttl_index_info")
    async def ttl_index_info(request: Request) -> Response:
        """What a writer of TTL-index SST files for this namespace needs: its id, shards, ends."""
        await arguments(request)
        return JSONResponse(await run_in_threadpool(engine.ttl_index_info, request.path_params["ns"]))

    @route("/v1/namespaces/{ns}/ttl-index", "PUT", "ttl_index_upload")
    async def ttl_index_upload(request: Request) -> Response:
        """Bulk-load the SST file sent as the body (``application/octet-stream``)."""
        ns = request.path_params["ns"]
        await arguments(request, body=False)  # the body is the file: no arguments, in the query either
        await run_in_threadpool(engine.get_namespace, ns)  # an unknown namespace is a 404 before any upload
        directory = await run_in_threadpool(engine.ttl_import_dir)
        name, size = await _receive(request, directory)
        try:
            result = await run_in_threadpool(engine.ingest_ttl_index, ns, name)
        except InvalidArgumentError as exc:
            if type(exc) is InvalidArgumentError and exc.field == "file":  # the node's own name means nothing here
                raise InvalidArgumentError("body", "must be an SST file (not a valid SST file)") from None
            raise
        finally:
            (directory / name).unlink(missing_ok=True)
        return JSONResponse({**result, "uploaded_bytes": size})  # "file": the name it had while ingested

    @route("/v1/namespaces/{ns}/ttl-index/ingest", "POST", "ttl_index_ingest")
    async def ttl_index_ingest(request: Request) -> Response:
        """Bulk-load ``{"file": "<name>"}``, a file already in the node's import directory (the
        node copies it and leaves it)."""
        args = await arguments(request, {"file", "path"})  # "path" only to say why it is refused
        if "path" in args:
            raise InvalidArgumentError(
                "path", "is not accepted: upload the file (PUT .../ttl-index) or name a file of the import directory"
            )
        file = args.text("file")
        if file is None:
            raise InvalidArgumentError("file", "is required: the name of an SST file in the node's import directory")
        return JSONResponse(await run_in_threadpool(engine.ingest_ttl_index, request.path_params["ns"], file))
