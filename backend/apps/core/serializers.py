from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from backend.apps.core.roles import ROLES


class StrictFieldsMixin:
    """Input that names a field the serializer does not take is refused (400, one message per unknown
    field) instead of silently dropped, so a misspelt or read-only field never looks accepted.

    ``unknown_field_hints`` maps a likely mistake to the field meant (e.g. an output name to its input one).
    """

    unknown_field_hints: dict[str, str] = {}

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            known = sorted(name for name, field in self.fields.items() if not field.read_only)  # type: ignore[attr-defined]
            unknown = [str(name) for name in data if name not in known]
            if unknown:
                raise serializers.ValidationError({name: [self._unknown_message(name, known)] for name in unknown})
        return super().to_internal_value(data)  # type: ignore[misc]

    def _unknown_message(self, name: str, known: list[str]) -> str:
        hint = self.unknown_field_hints.get(name)
        if hint:
            return f"unknown field: give `{hint}` instead"
        return f"unknown field; this takes: {', '.join(known) or 'nothing'}"


class StrictSerializer(StrictFieldsMixin, serializers.Serializer):
    """Base of every API input (request body) serializer."""


class StrictModelSerializer(StrictFieldsMixin, serializers.ModelSerializer):
    """Base of every API input serializer built from a model."""


class ComponentHealthSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    detail = serializers.CharField()
    last_heartbeat = serializers.DateTimeField(allow_null=True)


class HealthOutputSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "degraded"])
    checked_at = serializers.DateTimeField()
    components = serializers.DictField(child=ComponentHealthSerializer())


class LoginInputSerializer(StrictSerializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=200, trim_whitespace=False)


class MeOutputSerializer(serializers.Serializer):
    username = serializers.CharField()
    role = serializers.ChoiceField(choices=ROLES)


class CsrfOutputSerializer(serializers.Serializer):
    csrftoken = serializers.CharField()


class NodeRefusalSerializer(serializers.Serializer):
    """A storage node refused the request: its words and its error code, as the node sent them."""

    detail = serializers.CharField()
    error = serializers.CharField(help_text="the node's error code, e.g. disk_full, record_too_large, already_running")


# A policy value in the API: a number, a string (a choice, hours) or a boolean; null (infinite / unset)
# where the field allows it.
POLICY_VALUE_SCHEMA: dict[str, Any] = {"oneOf": [{"type": "number"}, {"type": "string"}, {"type": "boolean"}]}


@extend_schema_field(POLICY_VALUE_SCHEMA)
class PolicyValueField(serializers.JSONField):
    """One policy value: any JSON in and out, as a JSONField; the schema says which JSON (``allow_null``
    makes it nullable there too)."""


@extend_schema_field({"type": "object", "additionalProperties": {**POLICY_VALUE_SCHEMA, "nullable": True}})
class PolicyOverridesField(serializers.JSONField):
    """Policy field → value: the overrides one layer (a namespace, a node) sets."""
