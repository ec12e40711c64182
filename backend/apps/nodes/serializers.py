from typing import Any

from rest_framework import serializers

from backend.apps.core.models import SyncState
from backend.apps.core.outgoing import NODE, OutgoingURLRefused, check_outgoing_url
from backend.apps.core.serializers import PolicyOverridesField, StrictModelSerializer
from backend.apps.nodes.models import StorageNode
from backend.apps.nodes.services import TOKEN_REQUIRED, given_token


def check_node_token(value: str) -> str:
    """A bearer token goes into an HTTP header: printable ASCII, no spaces."""
    if value and not (value.isascii() and value.isprintable() and " " not in value):
        raise serializers.ValidationError("must be printable ASCII without spaces (it is sent in an HTTP header)")
    return value


def check_node_url(value: str) -> str:
    try:
        check_outgoing_url(value, purpose=NODE)
    except OutgoingURLRefused as exc:
        raise serializers.ValidationError(f"refused: {exc}") from None
    return value


class NodeInputSerializer(StrictModelSerializer):
    token = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        max_length=300,
        help_text="the node's bearer token; never returned. Required with a new `url` when the node exists; "
        "an empty one is no token (it never clears the stored one)",
    )

    class Meta:
        model = StorageNode
        fields = ["name", "url", "token"]

    def validate_url(self, value: str) -> str:
        return check_node_url(value)

    def validate_token(self, value: str) -> str:
        return check_node_token(value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "token" in attrs and given_token(attrs["token"]) is None:
            del attrs["token"]  # an empty token is a missing one: it neither clears nor stands for a token
        node = self.instance
        if node is not None and "url" in attrs and attrs["url"] != node.url and "token" not in attrs:
            raise serializers.ValidationError({"token": [TOKEN_REQUIRED]})
        return attrs


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
    policy_overrides = PolicyOverridesField(read_only=True)

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
