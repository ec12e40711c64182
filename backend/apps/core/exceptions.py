"""Every error raised inside an API view answers RFC 9457 problem details (:mod:`backend.apps.core.problems`):
DRF's own errors (validation, authentication, permission, 404, 405, 406, 415, throttling, parse errors) and
the engine's errors, never a bare 500; refused writes are announced (``write_denied``: the audit app records
them, core does not know it)."""

from __future__ import annotations

import logging
import math
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions
from rest_framework.permissions import SAFE_METHODS
from rest_framework.response import Response
from rest_framework.views import exception_handler

from backend.apps.core.problems import (
    ProblemResponse,
    build,
    engine_problem,
    errors_sentence,
    flatten_errors,
    sentence,
)
from backend.apps.core.signals import write_denied
from storage_engine.errors import StorageError

log = logging.getLogger(__name__)

# DRF's default_code → the problem's code (the others are kept: not_authenticated, permission_denied…)
CODES = {"invalid": "validation_error", "error": "internal_error"}


class InvalidCredentials(exceptions.APIException):
    status_code = 400
    default_detail = "Wrong username or password."
    default_code = "invalid_credentials"


def _code(exc: exceptions.APIException) -> str:
    if isinstance(exc, exceptions.PermissionDenied) and str(exc.detail).startswith("CSRF Failed"):
        return "csrf_failed"  # SessionAuthentication.enforce_csrf
    code = str(exc.default_code)
    return CODES.get(code, code)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    request = context.get("request")
    instance = request.path if request is not None else None
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    denied = isinstance(exc, exceptions.PermissionDenied)
    if denied and request is not None and request.method not in SAFE_METHODS:
        write_denied.send(sender=api_exception_handler, exc=exc, request=request)
    if isinstance(exc, StorageError):
        status, body = engine_problem(exc, instance)
        return ProblemResponse(body, status=status)
    response = exception_handler(exc, context)  # DRF's: status, WWW-Authenticate, Retry-After, rollback
    if response is None or not isinstance(exc, exceptions.APIException):
        return response  # not an API error: Django's 500 handler answers (a problem on /api/ paths)
    extensions: dict[str, Any] = {}
    if isinstance(exc, exceptions.ValidationError):
        extensions["errors"] = flatten_errors(exc.detail)
        detail = errors_sentence(extensions["errors"])
    elif isinstance(exc.detail, dict | list):
        detail = errors_sentence(flatten_errors(exc.detail))
    else:
        detail = sentence(str(exc.detail))
    if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
        extensions["retry_after"] = math.ceil(exc.wait)
    if isinstance(exc, exceptions.MethodNotAllowed):
        view = context.get("view")
        extensions["allowed"] = list(getattr(view, "allowed_methods", []))
    body = build(response.status_code, _code(exc), detail, instance, **extensions)
    headers = {name: value for name, value in response.items() if name.lower() != "content-type"}
    return ProblemResponse(body, status=response.status_code, headers=headers)
