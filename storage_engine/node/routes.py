"""The node's route table: every route records request metrics and answers errors in one JSON shape.

Engine errors (:class:`~storage_engine.errors.StorageError`) become their HTTP
status with the body of :func:`storage_engine.wire.error_body`; anything else
is a bug, logged whole and answered as ``internal_error`` without details.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from storage_engine.errors import StorageError
from storage_engine.node.metrics import NodeMetrics
from storage_engine.wire import error_body, status_for

log = logging.getLogger("storage_node")
Handler = Callable[[Request], Awaitable[Response]]
INTERNAL_ERROR = {"error": "internal_error", "message": "the node failed to answer; its log has the details"}


class RouteTable:
    """Routes that record request metrics and answer engine errors as JSON with their status."""

    def __init__(self, metrics: NodeMetrics) -> None:
        self.metrics = metrics
        self.routes: list[Route] = []

    def add(self, path: str, method: str, name: str) -> Callable[[Handler], Handler]:
        def wrap(fn: Handler) -> Handler:
            async def endpoint(request: Request) -> Response:
                started = time.perf_counter()
                try:
                    response = await fn(request)
                except StorageError as exc:
                    status = status_for(exc)
                    if status >= 500:
                        log.error("%s %s: %s", method, request.url.path, exc)
                    response = JSONResponse(error_body(exc), status_code=status)
                except Exception:  # a bug, not bad input: logged whole, answered in the error shape
                    log.exception("%s %s failed", method, request.url.path)
                    response = JSONResponse(INTERNAL_ERROR, status_code=500)
                self.metrics.observe(name, response.status_code, time.perf_counter() - started)
                return response

            self.routes.append(Route(path, endpoint, methods=[method], name=name))
            return fn

        return wrap
