"""OpenAPI generation: every operation documents the errors it can answer with."""

from __future__ import annotations

from typing import Any, Literal

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

DETAIL = inline_serializer("ErrorDetail", {"detail": serializers.CharField()})
# 400: field → [rule, ...] (DRF's validation errors), or {"detail": ...}
FIELD_ERRORS = inline_serializer(
    "FieldErrors", {"detail": serializers.CharField(required=False)}, help_text="field name → list of messages"
)

ERRORS: dict[str, tuple[Any, str]] = {
    "400": (FIELD_ERRORS, "Bad input: each field names the rule it breaks"),
    "401": (DETAIL, "Not authenticated"),
    "403": (DETAIL, "Authenticated, but the role does not allow this"),
    "429": (DETAIL, "Throttled"),
    "503": (DETAIL, "A storage node could not be reached"),
}


class ApiAutoSchema(AutoSchema):
    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        from backend.apps.core.serializers import StrictFieldsMixin

        schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)
        if direction == "request" and isinstance(serializer, StrictFieldsMixin):
            schema["additionalProperties"] = False  # unknown fields are refused, not dropped
        return schema

    def _get_response_bodies(self, direction: Literal["request", "response"] = "response") -> dict[str, Any]:
        bodies: dict[str, Any] = super()._get_response_bodies(direction)
        errors = dict(ERRORS)
        if "{" in self.path:
            errors["404"] = (DETAIL, "No such object")
        for code, (serializer, description) in errors.items():
            if code not in bodies:
                bodies[code] = self._get_response_for_code(serializer, code)
                bodies[code]["description"] = description
        return bodies
