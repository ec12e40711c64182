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
    namespace = serializers.CharField(
        required=False, max_length=200, help_text="only the lines of this namespace (its name)"
    )
    node = serializers.CharField(
        required=False, max_length=100, help_text="only the lines of this storage node (its name)"
    )


class WatermarksOutputSerializer(serializers.Serializer):
    max_used = serializers.FloatField()
    clean_forcibly = serializers.FloatField()
    warning = serializers.FloatField()


class SeriesLineOutputSerializer(serializers.Serializer):
    labels = serializers.DictField(help_text="node, namespace, shard or queue")
    points = serializers.ListField(
        child=PointField(),
        help_text="[[epoch_ms, value], ...] in time order: the average of each closed step (at the step's start), "
        "then the series' latest sample at its own time (the value the summary reads); the step still open is "
        "not averaged",
    )
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
        help_text="disk_used_ratio: least-squares fit of the last 6 h projected 24 h ahead, hourly; empty until "
        "the samples span forecast_min_history_s",
    )
    forecast_node = serializers.CharField(required=False, help_text="disk_used_ratio: the node forecast")
    forecast_history_s = serializers.IntegerField(
        required=False, help_text="disk_used_ratio: how long the node's disk samples in the fit window span"
    )
    forecast_min_history_s = serializers.IntegerField(
        required=False, help_text="disk_used_ratio: the history a forecast needs"
    )
    forecast_warning_at = serializers.IntegerField(
        required=False,
        allow_null=True,
        help_text="disk_used_ratio: epoch ms when the forecast reaches the warning watermark (within 7 days)",
    )


class NodeSummaryOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    health = serializers.ChoiceField(
        choices=["healthy", "unhealthy", "unknown"],
        help_text="as the last metrics collection found the node; unknown when none looked at it recently",
    )
    checked_at = serializers.DateTimeField(allow_null=True, help_text="the last collection that looked at it")
    last_seen_at = serializers.DateTimeField(allow_null=True, help_text="when it last answered")
    error = serializers.CharField(allow_blank=True, help_text="what went wrong, when unhealthy")
    disk_used_bytes = serializers.IntegerField(allow_null=True)
    disk_capacity_bytes = serializers.IntegerField(allow_null=True)
    disk_used_ratio = serializers.FloatField(allow_null=True)
    watermarks = WatermarksOutputSerializer()
    forecast_warning_at = serializers.DateTimeField(
        allow_null=True, help_text="when the disk-use trend reaches the warning watermark (within 7 days)"
    )
    forecast_history_s = serializers.IntegerField(help_text="how long the disk samples in the fit window span")
    forecast_ready = serializers.BooleanField(help_text="false until there is enough history for a forecast")
    local_bytes = serializers.IntegerField(
        help_text="stored bytes of its shards with a local file (tiered storage; the latest collection)"
    )
    remote_only_bytes = serializers.IntegerField(
        help_text="stored bytes of its shards only in the object store (tiered storage; the latest collection)"
    )


class SummaryOutputSerializer(serializers.Serializer):
    """Cluster totals: the namespaces' series of the latest collection summed, ratios of the sums."""

    stored_bytes = serializers.IntegerField()
    stored_records = serializers.IntegerField()
    live_records = serializers.IntegerField()
    expired_records = serializers.IntegerField()
    expired_ratio = serializers.FloatField(help_text="expired_records ÷ stored_records")
    expired_bytes_ratio = serializers.FloatField()
    backlog_messages = serializers.IntegerField(help_text="summed over every subscription and shard")
    backlog_live_messages = serializers.IntegerField()
    local_bytes = serializers.IntegerField(
        help_text="stored bytes with a local file (tiered storage), summed like stored_bytes from the same "
        "collections: stored_bytes = local_bytes + remote_only_bytes"
    )
    remote_only_bytes = serializers.IntegerField(
        help_text="stored bytes only in the object store (local copy dropped), summed the same way"
    )
    collected_at = serializers.DateTimeField(allow_null=True, help_text="the latest collection")
    forecast_min_history_s = serializers.IntegerField(help_text="the disk history a forecast needs")
    nodes = NodeSummaryOutputSerializer(many=True)
