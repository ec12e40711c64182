from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from backend.apps.audit.models import AuditEntry

RESULTS = ("ok", "failed", "denied")


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": {
            "type": "object",
            "properties": {"before": {}, "after": {}},
            "required": ["before", "after"],
        },
    }
)
class AuditDiffField(serializers.JSONField):
    """Field → {"before", "after"} for every key whose value differs (absent keys show as null)."""


class AuditEntryOutputSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_name")
    result = serializers.ChoiceField(choices=RESULTS, read_only=True)
    diff = AuditDiffField(read_only=True)

    class Meta:
        model = AuditEntry
        fields = [
            "id",
            "at",
            "actor",
            "action",
            "target_type",
            "target",
            "before",
            "after",
            "diff",
            "result",
            "detail",
            "remote_addr",
        ]
        read_only_fields = fields
