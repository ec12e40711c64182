from rest_framework import serializers

from backend.apps.namespaces.models import SyncState
from backend.apps.nodes.models import StorageNode


class NodeInputSerializer(serializers.ModelSerializer):
    token = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        max_length=300,
        help_text="the node's bearer token; never returned",
    )

    class Meta:
        model = StorageNode
        fields = ["name", "url", "token"]


class NodeOutputSerializer(serializers.ModelSerializer):
    has_token = serializers.SerializerMethodField()
    policy_sync_state = serializers.ChoiceField(
        choices=SyncState.choices,
        help_text="synced: the node confirmed the effective node policy; pending: not yet (retried); "
        "failed: the node refused it (policy_sync_error says why)",
    )
    policy_version = serializers.IntegerField(
        allow_null=True, help_text="the node policy version the node last confirmed (null: never)"
    )

    class Meta:
        model = StorageNode
        fields = [
            "name",
            "url",
            "has_token",
            "healthy",
            "last_seen_at",
            "last_error",
            "policy_overrides",
            "policy_sync_state",
            "policy_sync_error",
            "policy_version",
            "policy_synced_at",
            "created_at",
        ]
        read_only_fields = fields

    def get_has_token(self, node: StorageNode) -> bool:
        return bool(node.token)
