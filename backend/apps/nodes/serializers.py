from rest_framework import serializers

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

    class Meta:
        model = StorageNode
        fields = ["name", "url", "has_token", "healthy", "last_seen_at", "last_error", "policy_overrides", "created_at"]
        read_only_fields = fields

    def get_has_token(self, node: StorageNode) -> bool:
        return bool(node.token)
