from rest_framework import serializers

from backend.apps.catalog.figures import SEGMENT_TIERS
from backend.apps.catalog.models import Segment, ShardStatus
from backend.apps.catalog.selectors import expired_ratio
from backend.apps.catalog.services import BACKLOG_FIELDS, STATUS_FIELDS, SYNCED_FIELDS
from backend.apps.namespaces.models import Namespace
from backend.apps.namespaces.serializers import NamespaceOutputSerializer
from storage_engine.api import SegmentState

SEGMENT_STATES = tuple(state.value for state in SegmentState)


class SegmentOutputSerializer(serializers.ModelSerializer):
    namespace = serializers.CharField(source="namespace.name")
    state = serializers.ChoiceField(choices=SEGMENT_STATES, read_only=True)
    tier = serializers.ChoiceField(
        choices=SEGMENT_TIERS,
        read_only=True,
        help_text="where its bytes are: local, both (local and in the object store) or remote (local copy dropped)",
    )

    class Meta:
        model = Segment
        # The position, then exactly the fields a sync copies from the node.
        fields = ["id", "namespace", "shard", "base_offset", *SYNCED_FIELDS, "synced_at"]
        read_only_fields = fields


class ShardStatusOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = ShardStatus
        # The engine's figures of the shard and its backlog, exactly what a sync and a collection write.
        fields = ["shard", *STATUS_FIELDS, *BACKLOG_FIELDS, "updated_at", "collected_at"]
        read_only_fields = fields
        extra_kwargs = {
            "size_bytes": {"help_text": "stored bytes: local_bytes + remote_only_bytes"},
            "local_bytes": {"help_text": "stored bytes with a local file (the active segment included)"},
            "remote_only_bytes": {"help_text": "stored bytes only in the object store (local copy dropped)"},
        }


LOCAL_BYTES_HELP = (
    "stored bytes with a local file (tiers local and both; the active segments included): the node's disk; "
    "stored_bytes = local_bytes + remote_only_bytes"
)
REMOTE_ONLY_BYTES_HELP = (
    "stored bytes only in the object store (tier remote: the local copy dropped); "
    "stored_bytes = local_bytes + remote_only_bytes"
)


class NamespaceSummaryOutputSerializer(serializers.Serializer):
    """The namespace's figures: its shards' engine figures summed, ratios of the sums (DESIGN §3 "Figures")."""

    name = serializers.CharField()
    stored_bytes = serializers.IntegerField()
    stored_records = serializers.IntegerField()
    live_records = serializers.IntegerField(help_text="stored − expired: what readers get")
    expired_records = serializers.IntegerField(help_text="expired but not yet reclaimed")
    expired_bytes = serializers.IntegerField()
    expired_ratio = serializers.FloatField(help_text="expired_records ÷ stored_records")
    expired_bytes_ratio = serializers.FloatField(help_text="expired_bytes ÷ stored_bytes")
    segment_count = serializers.IntegerField()
    local_bytes = serializers.IntegerField(help_text=LOCAL_BYTES_HELP)
    remote_only_bytes = serializers.IntegerField(help_text=REMOTE_ONLY_BYTES_HELP)
    backlog_messages = serializers.IntegerField(
        allow_null=True,
        help_text="unacknowledged offsets summed over subscriptions and shards; null until a metrics "
        "collection has reported every shard",
    )
    backlog_live_messages = serializers.IntegerField(
        allow_null=True, help_text="records a consumer will still receive, summed like backlog_messages"
    )
    collected_at = serializers.DateTimeField(
        allow_null=True, help_text="the oldest shard's last metrics collection (null: a shard never collected)"
    )
    last_scan_at = serializers.DateTimeField(
        allow_null=True, help_text="last successful TTL scan of the namespace or a node-wide sweep of a host"
    )
    last_scan_run = serializers.IntegerField(
        allow_null=True, help_text="the task run whose change is last_scan_at (a folded row of sweeps: that row)"
    )
    last_compaction_at = serializers.DateTimeField(allow_null=True)
    last_compaction_run = serializers.IntegerField(
        allow_null=True, help_text="the task run whose change is last_compaction_at"
    )
    shards = ShardStatusOutputSerializer(many=True)


class SyncResultOutputSerializer(serializers.Serializer):
    inserted = serializers.IntegerField()
    updated = serializers.IntegerField()
    deleted = serializers.IntegerField()
    unchanged = serializers.IntegerField()


class NamespaceListOutputSerializer(NamespaceOutputSerializer):
    """A list row: the namespace with its usage (see ``catalog.selectors.namespace_list_with_usage``)."""

    stored_bytes = serializers.IntegerField()
    stored_records = serializers.IntegerField()
    segment_count = serializers.IntegerField()
    local_bytes = serializers.IntegerField(help_text=LOCAL_BYTES_HELP)
    remote_only_bytes = serializers.IntegerField(help_text=REMOTE_ONLY_BYTES_HELP)
    expired_ratio = serializers.SerializerMethodField()
    last_scan_at = serializers.DateTimeField(allow_null=True)
    last_compaction_at = serializers.DateTimeField(allow_null=True)

    class Meta(NamespaceOutputSerializer.Meta):
        fields = [
            *NamespaceOutputSerializer.Meta.fields,
            "stored_bytes",
            "stored_records",
            "segment_count",
            "local_bytes",
            "remote_only_bytes",
            "expired_ratio",
            "last_scan_at",
            "last_compaction_at",
        ]
        read_only_fields = fields

    def get_expired_ratio(self, namespace: Namespace) -> float:
        return expired_ratio(namespace.stored_records, namespace.expired_records)
