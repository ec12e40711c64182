from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from backend.apps.runs.models import TaskRun
from backend.apps.runs.selectors import fold_window, run_summary

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
    bytes = serializers.IntegerField(
        read_only=True, help_text="bytes freed (files removed, not only renamed .deleted); a recall: bytes recalled"
    )
    pending_bytes = serializers.IntegerField(
        read_only=True,
        help_text="bytes the run deleted that are still on disk as .deleted files (file_delete_delay_ms, or a reader "
        "holding them), after each node's last step; freed later by the step that removes them",
    )


class TaskRunOutputSerializer(serializers.ModelSerializer):
    namespace = serializers.CharField(source="namespace.name", allow_null=True, default=None)
    node = serializers.CharField(source="node.name", allow_null=True, default=None)
    started_by = serializers.CharField(source="started_by.username", allow_null=True, default=None)
    origin = serializers.SerializerMethodField(help_text="manual (started by someone) or scheduled")
    counts = RunCountsField(read_only=True)
    params = RunParamsField(read_only=True)
    summary = serializers.SerializerMethodField(help_text=SUMMARY_HELP)
    sweeps = serializers.IntegerField(
        read_only=True,
        help_text="how many scheduled sweeps this row stands for (folded into one row per kind, target and window; "
        "steps, counts and bytes are their sums); 1 for any other run",
    )
    window_start = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="a folded row's window: its start (null: a run of its own)"
    )
    window_end = serializers.SerializerMethodField(help_text="a folded row's window: its end (exclusive)")
    idle = serializers.BooleanField(
        read_only=True, help_text="a folded row whose sweeps all did nothing (listed only with ?idle=true)"
    )
    namespaces_changed = serializers.SerializerMethodField(
        help_text="the namespaces the run changed (records expired or removed, segments deleted, rewritten or moved "
        "between tiers, cursors moved), as the node reported them; a node-wide sweep names every namespace it "
        "worked on; empty for a dry run"
    )

    @extend_schema_field(serializers.ChoiceField(choices=ORIGINS))
    def get_origin(self, run: TaskRun) -> str:
        return "scheduled" if run.schedule else "manual"

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_window_end(self, run: TaskRun) -> str | None:
        if run.window_start is None:
            return None
        return serializers.DateTimeField().to_representation(run.window_start + fold_window())

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_namespaces_changed(self, run: TaskRun) -> list[str]:
        return sorted(change.namespace.name for change in run.changes.all())

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
            "sweeps",
            "window_start",
            "window_end",
            "idle",
            "namespaces_changed",
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
