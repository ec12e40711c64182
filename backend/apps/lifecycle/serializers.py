from rest_framework import serializers

from backend.apps.lifecycle.services import ACTIONS


class NamespaceActionInputSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=sorted(k for k, a in ACTIONS.items() if a.scope == "namespace"))
    shard = serializers.IntegerField(min_value=0, required=False, allow_null=True, default=None)
    dry_run = serializers.BooleanField(default=False)
    confirm = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="repeat the namespace name for destructive actions"
    )


class NodeActionInputSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=sorted(k for k, a in ACTIONS.items() if a.scope == "node"))
    confirm = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="repeat the node name for destructive actions"
    )
