"""Map engine errors raised inside API views to clear 4xx/5xx answers, never a bare 500; announce refused
writes (``write_denied``: the audit app records them, core does not know it)."""

from __future__ import annotations

import logging
from typing import Any

from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import SAFE_METHODS
from rest_framework.response import Response
from rest_framework.views import exception_handler

from backend.apps.core.signals import write_denied
from storage_engine.errors import (
    InvalidArgumentError,
    NodeUnavailableError,
    PolicyValidationError,
    StorageError,
)
from storage_engine.wire import error_body, status_for

log = logging.getLogger(__name__)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, PermissionDenied):
        request = context.get("request")
        if request is not None and request.method not in SAFE_METHODS:
            write_denied.send(sender=api_exception_handler, exc=exc, request=request)
    if isinstance(exc, PolicyValidationError):
        return Response({field: [rule] for field, rule in exc.errors.items()}, status=400)
    if isinstance(exc, InvalidArgumentError):
        return Response({exc.field: [exc.rule]}, status=400)
    if isinstance(exc, NodeUnavailableError):
        return Response({"detail": str(exc)}, status=503)
    if isinstance(exc, StorageError):
        return Response(error_body(exc), status=status_for(exc))
    return exception_handler(exc, context)
