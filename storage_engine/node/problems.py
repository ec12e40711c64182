"""Every error the node answers, as RFC 9457 problem details (:mod:`storage_engine.node_api.problem`).

Engine errors, refused tokens, unknown routes, wrong methods and the node's own bugs all
leave through here, so a client parses one shape (``NodeClient`` does, through
:func:`storage_engine.node_api.wire.error_from_body`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route
from starlette.types import Scope

from storage_engine.errors import StorageError
from storage_engine.node_api import problem
from storage_engine.node_api.wire import problem_for, status_for

log = logging.getLogger("storage_node")
MAX_PATH_SHOWN = 200  # characters of a request path quoted in an error
INTERNAL_DETAIL = "the node failed to answer; its log has the details"


class ProblemResponse(JSONResponse):
    media_type = problem.MEDIA_TYPE


def shown_path(path: str) -> str:
    """A request path as an error quotes it: cut, so a huge path cannot make a huge answer."""
    return path if len(path) <= MAX_PATH_SHOWN else path[:MAX_PATH_SHOWN] + "…"


def problem_response(
    status: int,
    code: str,
    detail: str,
    *,
    path: str | None = None,
    headers: Mapping[str, str] | None = None,
    **ext: Any,
) -> ProblemResponse:
    instance = None if path is None else shown_path(path)
    return ProblemResponse(problem.problem(status, code, detail, instance=instance, **ext), status, headers)


def error_response(exc: StorageError, path: str) -> ProblemResponse:
    """An engine error: its status (``storage_engine.node_api.wire.STATUS_BY_ERROR``), its code and its numbers."""
    status = status_for(exc)
    if status >= 500:
        log.error("%s: %s", shown_path(path), exc)
    return ProblemResponse(problem_for(exc, shown_path(path)), status)


def internal_error(path: str) -> ProblemResponse:
    """A bug, not bad input: the caller learns nothing of it (the log has it whole)."""
    return problem_response(500, "internal_error", INTERNAL_DETAIL, path=path)


def _allowed_methods(routes: list[Route], scope: Scope) -> list[str]:
    """Every method some route serves at this path (Starlette's own 405 names one route's only)."""
    allowed: set[str] = set()
    for r in routes:
        if r.matches(scope)[0] is not Match.NONE:
            allowed |= r.methods or set()
    return sorted(allowed)


def http_error_handler(routes: list[Route]) -> Callable[[Request, Exception], Awaitable[Response]]:
    """Starlette's own errors (no such route, wrong method) as problem details, not plain text."""

    async def handle(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        path = request.url.path
        if exc.status_code == 404:
            return problem_response(404, "not_found", f"no route {request.method} {shown_path(path)}", path=path)
        if exc.status_code == 405:
            allowed = _allowed_methods(routes, request.scope)
            detail = f"{request.method} is not allowed on {shown_path(path)}; allowed: {', '.join(allowed)}"
            headers = {"Allow": ", ".join(allowed)}
            return problem_response(405, "method_not_allowed", detail, path=path, headers=headers, allowed=allowed)
        return problem_response(exc.status_code, "http_error", str(exc.detail), path=path, headers=exc.headers)

    return handle


async def server_error_handler(request: Request, exc: Exception) -> Response:
    """An exception no route caught (raised in a middleware), answered as ``internal_error``; Starlette
    raises it again afterwards, so the server logs it whole."""
    return internal_error(request.url.path)
