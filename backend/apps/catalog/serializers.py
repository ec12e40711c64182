from rest_framework import serializers

from backend.apps.catalog.models import Segment, ShardStatus
from backend.apps.catalog.services import SYNCED_FIELDS


class SegmentOutputSerializer(serializers.ModelSerializer):
    namespace = serializers.CharField(source="namespace.name")

    class Meta:
        model = Segment
        # The position, then exactly the fields a sync copies from the node.
        fields = ["id", "namespace", "shard", "base_offset", *SYNCED_FIELDS, "synced_at"]
        read_only_fields = fields


class ShardStatusOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = ShardStatus
        fields = [
            "shard",
            "log_start_offset",
            "end_offset",
            "record_count",
            "live_count",
            "size_bytes",
            "segment_count",
            "expired_records",
            "expired_bytes",
            "updated_at",
        ]
        read_only_fields = fields


class NamespaceSummaryOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    stored_bytes = serializers.IntegerField()
    stored_records = serializers.IntegerField()
    live_records = serializers.IntegerField()
    expired_ratio = serializers.FloatField()
    segment_count = serializers.IntegerField()
    backlog_messages = serializers.IntegerField(allow_null=True, help_text="null when the node cannot be reached")
    last_scan_at = serializers.DateTimeField(allow_null=True)
    last_compaction_at = serializers.DateTimeField(allow_null=True)
    shards = ShardStatusOutputSerializer(many=True)


class SyncResultOutputSerializer(serializers.Serializer):
    inserted = serializers.IntegerField()
    updated = serializers.IntegerField()
    deleted = serializers.IntegerField()
    unchanged = serializers.IntegerField()
