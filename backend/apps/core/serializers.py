from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from backend.apps.core.roles import ROLES
from storage_engine.errors import InvalidArgumentError
from storage_engine.policies.bounds import MAX_INT64
from storage_engine.rules.validation import int_from_text


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


@extend_schema_field({"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}})
class FieldErrorsField(serializers.DictField):
    """Field → [messages] (nested fields under dotted names: ``rows.0.date``)."""


class ProblemSerializer(serializers.Serializer):
    """Every error of the API (4xx/5xx): RFC 9457 problem details, ``application/problem+json``, the shape the
    storage nodes answer too. Members other than these are extensions carrying a storage node's numbers
    (``used_ratio``, ``limit``, ``log_start_offset``…)."""

    type = serializers.CharField(help_text="URI naming the kind of problem, built from `code` (an identifier)")
    title = serializers.CharField(help_text="short summary of the kind of problem, the same for every occurrence")
    status = serializers.IntegerField(help_text="the HTTP status")
    detail = serializers.CharField(help_text="what went wrong this time, a sentence for people")
    code = serializers.CharField(
        help_text="stable machine-readable code: validation_error, invalid_argument, not_authenticated, "
        "permission_denied, csrf_failed, not_found, throttled, disk_full, node_unavailable…"
    )
    instance = serializers.CharField(help_text="the request path")
    errors = FieldErrorsField(
        required=False,
        help_text="bad input (validation_error, invalid_argument, invalid_policy): field → [messages]; nested "
        "fields under dotted names (rows.0.date), a nested object's own errors under its name, errors of the "
        "input as a whole under non_field_errors",
    )
    field = serializers.CharField(required=False, help_text="invalid_argument: the field named by the engine")
    rule = serializers.CharField(required=False, help_text="invalid_argument: the rule the field breaks")
    retry_after = serializers.IntegerField(required=False, help_text="throttled: seconds to wait (also Retry-After)")
    allowed = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="method_not_allowed: the methods the route takes"
    )


class NodeRefusalSerializer(ProblemSerializer):
    """A storage node refused the request: problem details with its code (disk_full, record_too_large,
    backlog_quota_exceeded, already_running…), its words and its numbers, as the node sent them."""


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


class Int64TextField(serializers.CharField):
    """A 64-bit figure a person types (an offset, a time), sent as a decimal string: a JavaScript
    number keeps only 53 bits, so 99999999999999999999 or 9007199254740993 would arrive as another
    number. Read with the engine's rule (ASCII digits, bounds named in the message), never through a
    float."""

    def __init__(self, *, min_value: int = 0, max_value: int = MAX_INT64, **kwargs: Any) -> None:
        self.min_value, self.max_value = min_value, max_value
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, (str, int)):
            raise serializers.ValidationError("must be a decimal string")
        try:
            return int_from_text(str(data), self.field_name, self.min_value, self.max_value)
        except InvalidArgumentError as exc:
            raise serializers.ValidationError(exc.rule) from None

    def to_representation(self, value: Any) -> str:
        return str(value)
