from rest_framework import serializers

from backend.apps.core.serializers import StrictSerializer


class PolicyChangeInputSerializer(StrictSerializer):
    """``set``: field → value (null = infinite where allowed); ``reset``: fields that inherit again."""

    set = serializers.DictField(child=serializers.JSONField(allow_null=True), required=False, default=dict)
    reset = serializers.ListField(child=serializers.CharField(), required=False, default=list)


class PolicyFieldSerializer(serializers.Serializer):
    value = serializers.JSONField(allow_null=True)
    source = serializers.ChoiceField(choices=["builtin", "cluster", "namespace", "node"])
    overridden = serializers.BooleanField()
    default = serializers.JSONField(allow_null=True)
    group = serializers.CharField()
    unit = serializers.CharField()
    nullable = serializers.BooleanField()
    choices = serializers.ListField(child=serializers.CharField())
    help = serializers.CharField()


class PolicyOutputSerializer(serializers.Serializer):
    fields = serializers.DictField(child=PolicyFieldSerializer())
    sync_state = serializers.CharField(required=False)
    sync_error = serializers.CharField(required=False, allow_blank=True)
    version = serializers.IntegerField(
        required=False, allow_null=True, help_text="node policy only: the version the node last confirmed"
    )
