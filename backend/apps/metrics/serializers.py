from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from backend.apps.metrics.catalog import UI_UNITS
from backend.apps.metrics.selectors import RANGES


@extend_schema_field({"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2})
class PointField(serializers.Field):
    """``[epoch_ms, value]``."""

    def to_representation(self, value: Any) -> list[float]:
        return [int(value[0]), float(value[1])]


class SeriesQueryInputSerializer(serializers.Serializer):
    series = serializers.ChoiceField(choices=list(UI_UNITS))
    range = serializers.ChoiceField(choices=list(RANGES), default="1h")
    namespace = serializers.CharField(required=False, max_length=200)
    node = serializers.CharField(required=False, max_length=100)


class WatermarksOutputSerializer(serializers.Serializer):
    max_used = serializers.FloatField()
    clean_forcibly = serializers.FloatField()
    warning = serializers.FloatField()


class SeriesLineOutputSerializer(serializers.Serializer):
    labels = serializers.DictField(help_text="node, namespace, shard or queue")
    points = serializers.ListField(child=PointField(), help_text="[[epoch_ms, value], ...] in time order")
    watermarks = WatermarksOutputSerializer(required=False, allow_null=True, help_text="disk_used_ratio only")


class SeriesOutputSerializer(serializers.Serializer):
    series = serializers.CharField()
    unit = serializers.ChoiceField(choices=["ratio", "bytes", "messages", "count"])
    range = serializers.CharField()
    step_s = serializers.IntegerField()
    resolution = serializers.ChoiceField(choices=["raw", "5m"])
    lines = SeriesLineOutputSerializer(many=True)
    truncated = serializers.BooleanField(required=False, help_text="more lines than shown")
    watermarks = WatermarksOutputSerializer(
        required=False, help_text="disk_used_ratio: the effective watermarks of the node (or the first)"
    )
    forecast = serializers.ListField(
        child=PointField(),
        required=False,
        help_text="disk_used_ratio: least-squares fit of the last 6 h projected 24 h ahead, hourly",
    )


class NodeSummaryOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    disk_used_bytes = serializers.IntegerField(allow_null=True)
    disk_capacity_bytes = serializers.IntegerField(allow_null=True)
    disk_used_ratio = serializers.FloatField(allow_null=True)
    watermarks = WatermarksOutputSerializer()
    forecast_warning_at = serializers.DateTimeField(
        allow_null=True, help_text="when the disk-use trend reaches the warning watermark (within 7 days)"
    )


class SummaryOutputSerializer(serializers.Serializer):
    stored_bytes = serializers.IntegerField()
    stored_records = serializers.IntegerField()
    expired_ratio = serializers.FloatField()
    backlog_messages = serializers.IntegerField()
    nodes = NodeSummaryOutputSerializer(many=True)
