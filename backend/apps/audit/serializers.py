from rest_framework import serializers

from backend.apps.audit.models import AuditEntry


class AuditEntryOutputSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_name")

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
