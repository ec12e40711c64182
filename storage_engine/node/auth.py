"""Bearer-token authentication for the node (constant-time comparison)."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

PUBLIC_PATHS = frozenset({"/health"})


class BearerAuth(BaseHTTPMiddleware):
    """Every path but ``/health`` needs ``Authorization: Bearer <token>``; ``token=None`` disables the check."""

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
