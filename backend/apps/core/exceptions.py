"""Map engine errors raised inside API views to clear 4xx/5xx answers, never a bare 500."""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response
from rest_framework.views import exception_handler

from storage_engine.errors import (
    InvalidArgumentError,
    NodeUnavailableError,
    PolicyValidationError,
    StorageError,
)
from storage_engine.wire import error_body, status_for


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, PolicyValidationError):
        return Response({field: [rule] for field, rule in exc.errors.items()}, status=400)
    if isinstance(exc, InvalidArgumentError):
        return Response({exc.field: [exc.rule]}, status=400)
    if isinstance(exc, NodeUnavailableError):
        return Response({"detail": str(exc)}, status=503)
    if isinstance(exc, StorageError):
        return Response(error_body(exc), status=status_for(exc))
    return exception_handler(exc, context)
