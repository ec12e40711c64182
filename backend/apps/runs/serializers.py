from rest_framework import serializers

from backend.apps.runs.models import TaskRun


class TaskRunOutputSerializer(serializers.ModelSerializer):
    namespace = serializers.CharField(source="namespace.name", allow_null=True, default=None)
    node = serializers.CharField(source="node.name", allow_null=True, default=None)
    started_by = serializers.CharField(source="started_by.username", allow_null=True, default=None)
    origin = serializers.SerializerMethodField(help_text="manual (started by someone) or scheduled")

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
