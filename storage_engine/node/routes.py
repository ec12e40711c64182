"""The node's route table: every route answers errors as problem details.

Engine errors (:class:`~storage_engine.errors.StorageError`) become their HTTP
status with the body of :func:`storage_engine.node_api.wire.problem_for`; anything else
is a bug, logged whole and answered as ``internal_error`` without details.
Request counts and durations are recorded around the whole app
(:class:`storage_engine.node.metrics.RequestMetrics`), not here, so that refused
and unrouted requests count too.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from storage_engine.errors import StorageError
from storage_engine.node.metrics import NodeMetrics
from storage_engine.node.problems import error_response, internal_error, shown_path

log = logging.getLogger("storage_node")
Handler = Callable[[Request], Awaitable[Response]]


class RouteTable:
    """Routes that answer engine errors as problem details with their status; ``metrics`` is the app's
    (handlers time their engine calls with it)."""

    def __init__(self, metrics: NodeMetrics) -> None:
        self.metrics = metrics
        self.routes: list[Route] = []

    def add(self, path: str, method: str, name: str) -> Callable[[Handler], Handler]:
        def wrap(fn: Handler) -> Handler:
            async def endpoint(request: Request) -> Response:
                try:
                    return await fn(request)
                except StorageError as exc:
                    return error_response(exc, request.url.path)
                except Exception:  # a bug, not bad input: logged whole, answered in the error shape
                    log.exception("%s %s failed", method, shown_path(request.url.path))
                    return internal_error(request.url.path)

            self.routes.append(Route(path, endpoint, methods=[method], name=name))
            return fn

        return wrap
