"""Map engine errors raised inside API views to clear 4xx/5xx answers, never a bare 500; audit refused writes."""

from __future__ import annotations

import logging
from typing import Any

from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import SAFE_METHODS
from rest_framework.response import Response
from rest_framework.views import exception_handler

from storage_engine.errors import (
    InvalidArgumentError,
    NodeUnavailableError,
    PolicyValidationError,
    StorageError,
)
from storage_engine.wire import error_body, status_for

log = logging.getLogger(__name__)


def audit_denied_write(exc: PermissionDenied, request: Any) -> None:
    """A write refused with 403 (a role too low, a CSRF failure) goes to the audit log as ``denied``:
    who, which method and route, when, and why. Reads are not audited."""
    from backend.apps.audit import services as audit
    from backend.apps.core.roles import role_of
    from backend.apps.core.throttling import client_ip

    if request is None or request.method in SAFE_METHODS:
        return
    user = getattr(request, "user", None)
    if not getattr(user, "is_authenticated", False) and hasattr(request, "_request"):
        from django.contrib.auth import get_user

        user = get_user(request._request)  # refused while authenticating (CSRF): the session's user
    route = getattr(getattr(request, "resolver_match", None), "route", "") or ""
    try:
        audit.record(
            actor=user,
            action="api.denied",
            target_type="route",
            target=f"{request.method} {request.path}"[:300],
            after={"method": request.method, "path": request.path, "route": route, "role": role_of(user)},
            result="denied",
            detail=str(exc.detail)[:2000],
            remote_addr=client_ip(request) or None,
            actor_name=getattr(user, "get_username", lambda: "")() or "anonymous",
        )
    except Exception:  # the 403 stands even if the audit write fails
        log.exception("audit: could not record a denied %s %s", request.method, request.path)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, PermissionDenied):
        audit_denied_write(exc, context.get("request"))
    if isinstance(exc, PolicyValidationError):
        return Response({field: [rule] for field, rule in exc.errors.items()}, status=400)
    if isinstance(exc, InvalidArgumentError):
        return Response({exc.field: [exc.rule]}, status=400)
    if isinstance(exc, NodeUnavailableError):
        return Response({"detail": str(exc)}, status=503)
    if isinstance(exc, StorageError):
        return Response(error_body(exc), status=status_for(exc))
    return exception_handler(exc, context)
