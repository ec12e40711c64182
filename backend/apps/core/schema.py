"""OpenAPI generation: every operation documents the errors it can answer with, as problem details.

Every error response is ``application/problem+json`` with the ``Problem`` component
(:class:`~backend.apps.core.serializers.ProblemSerializer`, or a subclass of it naming more members). Each
operation gets the errors that follow from what it is, and views add the specific ones (409, 413, 416, 503,
507…) with :func:`problems`:

- 400 when it takes a request body or query parameters (``validation_error``, ``invalid_argument``…);
- 401 when it needs a login or token, 403 when it needs a role or is a write (CSRF);
- 404 when its path names an object; 429 when it is throttled;
- ``default``: any other error, problem details too (405, 406, 415, 500, 502, 503…).

Path parameters no view describes get a description from the path (``/nodes/{name}``: the storage node's
name).
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework.permissions import SAFE_METHODS, AllowAny

from backend.apps.core.problems import MEDIA_TYPE
from backend.apps.core.serializers import ProblemSerializer, StrictFieldsMixin

DEFAULT_ERRORS = {
    "400": "Bad input: `errors` names each field and its messages (`validation_error`), or `field` and `rule` "
    "(`invalid_argument`)",
    "401": "Not authenticated: no session or token, or a wrong token",
    "403": "Authenticated, but the role does not allow this (`permission_denied`), or a write without the CSRF "
    "token (`csrf_failed`)",
    "404": "No such object (`not_found`)",
    "429": "Throttled (`throttled`): `retry_after` seconds, also in the Retry-After header",
    "default": "Any other error, as problem details: 405, 406, 415, 500, 502 (a storage node's unknown error), "
    "503 (`node_unavailable`: a storage node could not be reached)…",
}

# the resource a path segment names, for path parameters no view describes
RESOURCES = {
    "alert-channels": "alert channel",
    "alert-rules": "alert rule",
    "alerts": "alert",
    "namespaces": "namespace",
    "nodes": "storage node",
    "runs": "task run",
    "subscriptions": "subscription",
}


def problems(descriptions: dict[int, str], serializer: Any = None) -> dict[int, OpenApiResponse]:
    """``responses={200: X, **problems({409: "…", 503: "…"})}``: the error responses a view can answer
    (problem details; ``serializer``: a subclass of ProblemSerializer naming more members)."""
    return {code: OpenApiResponse(serializer or ProblemSerializer, text) for code, text in descriptions.items()}


def _is_error(code: str) -> bool:
    return code == "default" or (code.isdigit() and int(code) >= 400)


class ApiAutoSchema(AutoSchema):
    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)
        if direction == "request" and isinstance(serializer, StrictFieldsMixin):
            schema["additionalProperties"] = False  # unknown fields are refused, not dropped
        return schema

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation: dict[str, Any] | None = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "path" and not parameter.get("description"):
                parameter["description"] = self._path_parameter_description(parameter["name"])
        responses = operation["responses"]
        for code in self._default_error_codes(operation):
            if code not in responses:
                responses[code] = self._problem_response(code)
        for code, response in responses.items():  # an error is problem details, declared by a view or not
            if _is_error(code) and "content" in response:
                (schema, *_) = [media["schema"] for media in response["content"].values()]
                response["content"] = {MEDIA_TYPE: {"schema": schema}}
        return operation

    def _problem_response(self, code: str) -> dict[str, Any]:
        response: dict[str, Any] = self._get_response_for_code(ProblemSerializer, code, media_types=[MEDIA_TYPE])
        response["description"] = DEFAULT_ERRORS[code]
        return response

    def _default_error_codes(self, operation: dict[str, Any]) -> list[str]:
        codes = []
        if "requestBody" in operation or any(p["in"] == "query" for p in operation.get("parameters", [])):
            codes.append("400")
        public = all(isinstance(p, AllowAny) for p in self.view.get_permissions())
        if not public:
            codes.append("401")
        if not public or self.method not in SAFE_METHODS:
            codes.append("403")
        if "{" in self.path:
            codes.append("404")
        if self.view.get_throttles():
            codes.append("429")
        codes.append("default")
        return codes

    def _path_parameter_description(self, name: str) -> str:
        segment = ""
        for part in self.path.strip("/").split("/"):
            if part == "{" + name + "}":
                break
            if not part.startswith("{"):
                segment = part
        resource = RESOURCES.get(segment, re.sub(r"[-_]", " ", segment).rstrip("s") or "object")
        return f"the {resource}'s {'id' if name in ('id', 'pk') else 'name'}"
