from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from backend.apps.runs.models import TaskRun

ORIGINS = ("manual", "scheduled")


@extend_schema_field({"type": "object", "additionalProperties": {"type": "integer"}})
class RunCountsField(serializers.JSONField):
    """What the run counted so far, summed over its steps (e.g. records_expired, segments_deleted)."""


@extend_schema_field({"type": "object", "additionalProperties": {}})
class RunParamsField(serializers.JSONField):
    """The run's parameters, as it was started with them (keys depend on its kind)."""


class TaskRunOutputSerializer(serializers.ModelSerializer):
    namespace = serializers.CharField(source="namespace.name", allow_null=True, default=None)
    node = serializers.CharField(source="node.name", allow_null=True, default=None)
    started_by = serializers.CharField(source="started_by.username", allow_null=True, default=None)
    origin = serializers.SerializerMethodField(help_text="manual (started by someone) or scheduled")
    counts = RunCountsField(read_only=True)
    params = RunParamsField(read_only=True)

    @extend_schema_field(serializers.ChoiceField(choices=ORIGINS))
    def get_origin(self, run: TaskRun) -> str:
        return "scheduled" if run.schedule else "manual"

    class Meta:
        model = TaskRun
        fields = [
            "id",
            "kind",
            "namespace",
            "node",
            "shard",
            "state",
            "progress",
            "steps",
            "counts",
            "bytes_reclaimed",
            "dry_run",
            "params",
            "error",
            "started_by",
            "schedule",
            "origin",
            "cancel_requested",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields
