from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from backend.apps.runs.models import TaskRun
from backend.apps.runs.selectors import run_summary

ORIGINS = ("manual", "scheduled")


@extend_schema_field({"type": "object", "additionalProperties": {"type": "integer"}})
class RunCountsField(serializers.JSONField):
    """What the run counted so far, summed over its steps (e.g. records_expired, segments_deleted)."""


@extend_schema_field({"type": "object", "additionalProperties": {}})
class RunParamsField(serializers.JSONField):
    """The run's parameters, as it was started with them (keys depend on its kind)."""


SUMMARY_HELP = (
    "What the run affected so far (a dry run: what the action would do), computed by the server from its counts. "
    "A recall: segments = segments_recalled, bytes = bytes_recalled (the local disk they take back; nothing is "
    "freed), records = 0. Any other kind: records = expired_records + records_removed, segments = "
    "segments_deleted + segments_rewritten, bytes = bytes_reclaimed."
)


class RunSummarySerializer(serializers.Serializer):
    records = serializers.IntegerField(read_only=True, help_text="records expired or removed (0 for a recall)")
    segments = serializers.IntegerField(read_only=True, help_text="segments deleted or rewritten; a recall: recalled")
    bytes = serializers.IntegerField(read_only=True, help_text="bytes reclaimed; a recall: bytes recalled")


class TaskRunOutputSerializer(serializers.ModelSerializer):
    namespace = serializers.CharField(source="namespace.name", allow_null=True, default=None)
    node = serializers.CharField(source="node.name", allow_null=True, default=None)
    started_by = serializers.CharField(source="started_by.username", allow_null=True, default=None)
    origin = serializers.SerializerMethodField(help_text="manual (started by someone) or scheduled")
    counts = RunCountsField(read_only=True)
    params = RunParamsField(read_only=True)
    summary = serializers.SerializerMethodField(help_text=SUMMARY_HELP)

    @extend_schema_field(serializers.ChoiceField(choices=ORIGINS))
    def get_origin(self, run: TaskRun) -> str:
        return "scheduled" if run.schedule else "manual"

    @extend_schema_field(RunSummarySerializer)
    def get_summary(self, run: TaskRun) -> dict[str, int]:
        return dict(RunSummarySerializer(run_summary(run)).data)

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
            "summary",
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
