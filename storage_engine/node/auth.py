"""Bearer-token authentication for the node (constant-time comparisons).

Two tokens: the full token (``--token``) opens every route; the optional metrics token
(``--metrics-token``) opens ``GET /metrics`` only, so a Prometheus server can scrape a
node without holding a token that writes and deletes. The probes (``/health``,
``/livez``, ``/readyz``) need none: an orchestrator probes without secrets. Without a
full token (``--insecure-no-auth``) nothing is checked.

The caller's access (``full``, ``metrics`` or ``none``) is left in the scope under
:data:`ACCESS`, so a public route may say more to a caller holding a token.
"""

from __future__ import annotations

import hmac

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from storage_engine.node.problems import problem_response

PUBLIC_PATHS = frozenset({"/health", "/livez", "/readyz"})
METRICS_PATHS = frozenset({"/metrics"})
READ_METHODS = frozenset({"GET", "HEAD"})
ACCESS = "lcs.access"  # scope key: "full", "metrics" or "none"


class BearerAuth:
    """Every path but the probes needs ``Authorization: Bearer <token>``: the full token anywhere, the
    metrics token for ``GET /metrics`` only (elsewhere a 403). ``token=None`` disables the checks."""

    def __init__(self, app: ASGIApp, token: str | None, metrics_token: str | None = None) -> None:
        self.app = app
        self._full = f"Bearer {token}".encode() if token else None
        self._metrics = f"Bearer {metrics_token}".encode() if metrics_token else None

    def _access(self, given: bytes) -> str:
        # Both comparisons always run: the time taken says nothing about which token was close.
        full = self._full is not None and hmac.compare_digest(given, self._full)
        metrics = self._metrics is not None and hmac.compare_digest(given, self._metrics)
        return "full" if full else "metrics" if metrics else "none"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._full is None:
            scope[ACCESS] = "full"
            await self.app(scope, receive, send)
            return
        access = self._access(Headers(scope=scope).get("authorization", "").encode())
        scope[ACCESS] = access
        path: str = scope["path"]
        if access == "full" or path in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        if access == "metrics":
            if path in METRICS_PATHS and scope["method"] in READ_METHODS:
                await self.app(scope, receive, send)
                return
            detail = "the metrics token may only read /metrics (GET); use the node's token for anything else"
            response = problem_response(403, "forbidden", detail, path=path)
        else:
            response = problem_response(
                401, "unauthorized", "missing or wrong bearer token", path=path, headers={"WWW-Authenticate": "Bearer"}
            )
        await response(scope, receive, send)
