"""The REST API's one error shape: RFC 9457 problem details, the very shape the storage node answers.

Every 4xx/5xx of ``/api/...`` is ``application/problem+json``, built by :func:`storage_engine.node_api.problem.problem`
(engine errors through :func:`storage_engine.node_api.wire.problem_for`)::

    {"type": "tag:lifecycle-store,2025:problem/validation_error", "title": "Invalid input", "status": 400,
     "detail": "name: This field may not be blank.", "code": "validation_error",
     "instance": "/api/namespaces/", "errors": {"name": ["This field may not be blank."]}}

- ``code`` is stable (``type`` is built from it); ``detail`` is a sentence for people; ``instance`` the path.
- ``errors`` (validation errors, refused policies, engine ``invalid_argument``): field → [messages]. Nested
  fields are flattened to dotted names: ``rows.0.date``, ``set.retention_ms``; a nested object's own errors
  are under its name (``rows.0.lifetime_histogram``), and errors of the input as a whole under
  ``non_field_errors``.
- ``field`` and ``rule`` for an engine ``invalid_argument``; ``retry_after`` (seconds) when throttled;
  ``allowed`` (methods) for 405; an engine error's numbers (``used_ratio``, ``limit``…) as the node gives them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import HttpRequest, JsonResponse
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.settings import api_settings

from storage_engine.errors import (
    InvalidArgumentError,
    NodeUnavailableError,
    PolicyValidationError,
    RemoteError,
    StorageError,
)
from storage_engine.node_api import problem as problems
from storage_engine.node_api.wire import problem_for

MEDIA_TYPE = problems.MEDIA_TYPE
API_PREFIX = "/api/"
NON_FIELD = api_settings.NON_FIELD_ERRORS_KEY


class ProblemJSONRenderer(JSONRenderer):
    media_type = MEDIA_TYPE
    format = "problem+json"


class ProblemResponse(Response):
    """A DRF response rendered as ``application/problem+json`` whatever the request accepts (an error is
    never a browsable-API page)."""

    @property
    def rendered_content(self) -> Any:
        self.accepted_renderer = ProblemJSONRenderer()
        self.accepted_media_type = MEDIA_TYPE
        if not hasattr(self, "renderer_context"):
            self.renderer_context: dict[str, Any] = {}
        return super().rendered_content


def is_api(path: str) -> bool:
    return path.startswith(API_PREFIX)


def sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def flatten_errors(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's validation errors as field → [messages], nested ones under dotted names (``rows.0.date``); a nested
    object's ``non_field_errors`` under the object's name."""
    out: dict[str, list[str]] = {}

    def walk(value: Any, name: str) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                # a nested object's own errors (not one of its fields') go under its name
                walk(item, name if key == NON_FIELD and name else f"{name}.{key}" if name else str(key))
        elif isinstance(value, list | tuple):
            for index, item in enumerate(value):
                if isinstance(item, Mapping | list | tuple):
                    walk(item, f"{name}.{index}" if name else str(index))
                else:
                    out.setdefault(name or NON_FIELD, []).append(str(item))
        else:
            out.setdefault(name or NON_FIELD, []).append(str(value))

    walk(detail, prefix)
    return out


def errors_sentence(errors: Mapping[str, list[str]]) -> str:
    """``{"name": ["This field may not be blank."]}`` → ``"name: This field may not be blank."``"""
    parts = [
        sentence(message if field == NON_FIELD else f"{field}: {message}")
        for field, messages in errors.items()
        for message in messages
    ]
    return " ".join(parts) or "The input is invalid."


def build(status: int, code: str, detail: str, instance: str | None, **extensions: Any) -> dict[str, Any]:
    """A problem details object (``storage_engine.node_api.problem.problem``)."""
    return problems.problem(status, code, detail, instance=instance, **extensions)


def engine_problem(exc: StorageError, instance: str | None) -> tuple[int, dict[str, Any]]:
    """An engine error as the REST API answers it: the node's problem details, with ``errors`` as
    field → [messages] for bad input (the REST shape of every refused field)."""
    if isinstance(exc, NodeUnavailableError):
        return 503, build(503, exc.code, str(exc), instance)
    if isinstance(exc, RemoteError):  # a node answered an error of no known type: a bad gateway, not our bug
        return 502, build(502, exc.code, str(exc), instance, node_status=exc.status)
    body = problem_for(exc, instance)
    if isinstance(exc, PolicyValidationError):
        body["errors"] = {field: [rule] for field, rule in exc.errors.items()}
    elif isinstance(exc, InvalidArgumentError):
        body["errors"] = {exc.field: [exc.rule]}
    return int(body["status"]), body


def problem_response(
    request: Any, status: int, code: str, detail: str, headers: Mapping[str, str] | None = None, **extensions: Any
) -> ProblemResponse:
    """A DRF view's error answer."""
    body = build(status, code, detail, request.path if request is not None else None, **extensions)
    return ProblemResponse(body, status=status, headers=dict(headers or {}))


def problem_json(request: HttpRequest, status: int, code: str, detail: str, **extensions: Any) -> JsonResponse:
    """A plain Django view's error answer (routes outside DRF: unknown API routes, CSRF, 404/500 handlers)."""
    return JsonResponse(build(status, code, detail, request.path, **extensions), status=status, content_type=MEDIA_TYPE)
