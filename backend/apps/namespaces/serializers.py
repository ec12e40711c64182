from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from backend.apps.core.serializers import PolicyOverridesField, PolicyValueField, StrictSerializer
from backend.apps.namespaces.models import Namespace
from backend.apps.namespaces.selectors import shard_nodes
from backend.apps.nodes.models import StorageNode
from storage_engine.rules.validation import MAX_SHARDS, NAME_MAX_LENGTH, NAME_RULE, NAMESPACE_NAME, RESERVED_NAMES


class NameField(serializers.RegexField):
    """A namespace or subscription name: the engine's rule (storage_engine.rules.validation), refused in its words."""

    def __init__(self, **kwargs: object) -> None:
        messages = {"invalid": NAME_RULE, "max_length": NAME_RULE}
        super().__init__(NAMESPACE_NAME, max_length=NAME_MAX_LENGTH, error_messages=messages, **kwargs)

    def to_internal_value(self, data: object) -> str:
        value = super().to_internal_value(data)
        if value in RESERVED_NAMES:
            self.fail("invalid")
        return value


class NamespaceInputSerializer(StrictSerializer):
    # `policy_overrides` is what the API answers with; on create the overrides are given as `policy`.
    unknown_field_hints = {"policy_overrides": "policy"}

    name = NameField()
    shards = serializers.IntegerField(min_value=1, max_value=MAX_SHARDS, default=1)
    policy = serializers.DictField(
        child=PolicyValueField(allow_null=True),  # null: no limit (an infinite TTL or retention), as a PATCH sets
        required=False,
        default=dict,
        help_text="overrides of the cluster default policy (null: no limit, e.g. an infinite retention)",
    )
    node = serializers.SlugRelatedField(
        slug_field="name",
        queryset=StorageNode.objects.all(),
        required=False,
        help_text="the node every shard goes to unless `placement` says otherwise (default: the default node)",
    )
    placement = serializers.ListField(
        child=serializers.CharField(max_length=100),
        required=False,
        max_length=MAX_SHARDS,
        help_text="one node name per shard, in shard order; fixed once created",
    )

    def validate(self, attrs: dict) -> dict:
        if "node" in attrs and "placement" in attrs:
            raise serializers.ValidationError({"placement": ["give either node or placement, not both"]})
        return attrs

    def validate_name(self, value: str) -> str:
        if Namespace.objects.filter(name=value).exists():
            raise serializers.ValidationError("a namespace with this name already exists")
        return value


class NamespaceDeleteInputSerializer(StrictSerializer):
    confirm = serializers.CharField(help_text="repeat the namespace name to confirm the deletion")


class ShardPlacementSerializer(serializers.Serializer):
    shard = serializers.IntegerField()
    node = serializers.CharField()


class NamespaceOutputSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.name", allow_null=True)
    placement = serializers.SerializerMethodField()
    policy_overrides = PolicyOverridesField(read_only=True)

    class Meta:
        model = Namespace
        fields = [
            "name",
            "shards",
            "node",
            "placement",
            "policy_overrides",
            "sync_state",
            "sync_error",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field(ShardPlacementSerializer(many=True))
    def get_placement(self, namespace: Namespace) -> list[dict]:
        return [{"shard": shard, "node": node.name} for shard, node in shard_nodes(namespace).items()]


class SubscriptionInputSerializer(StrictSerializer):
    name = NameField()
    initial = serializers.ChoiceField(choices=["earliest", "latest"], default="earliest")


class ShardBacklogSerializer(serializers.Serializer):
    shard = serializers.IntegerField()
    cursor = serializers.IntegerField()
    end_offset = serializers.IntegerField()
    messages = serializers.IntegerField(help_text="offset distance: end_offset − cursor − 1 over stored offsets")
    live_messages = serializers.IntegerField(help_text="records after the cursor a consumer will receive")
    bytes = serializers.IntegerField()
    age_ms = serializers.IntegerField(allow_null=True)


class SubscriptionOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    initial = serializers.ChoiceField(choices=["earliest", "latest"])
    created_at = serializers.DateTimeField()
    backlog = ShardBacklogSerializer(many=True, allow_null=True)
    messages = serializers.IntegerField(allow_null=True, help_text="sum of the shards' offset distances")
    live_messages = serializers.IntegerField(allow_null=True, help_text="sum of the shards' live records")
    bytes = serializers.IntegerField(allow_null=True, help_text="sum of the shards' backlog bytes")


class SubscriptionListOutputSerializer(serializers.Serializer):
    results = SubscriptionOutputSerializer(many=True)
    node_error = serializers.CharField(allow_blank=True)
