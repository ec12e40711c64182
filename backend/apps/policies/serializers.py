from rest_framework import serializers

from backend.apps.core.models import SyncState
from backend.apps.core.serializers import PolicyValueField, StrictSerializer
from storage_engine.policies.policy import FIELDS

# How policy fields are grouped and typed (storage_engine.policies.policy.FieldInfo), in the order they first appear.
POLICY_GROUPS = tuple(dict.fromkeys(info.group for info in FIELDS.values()))
POLICY_UNITS = tuple(dict.fromkeys(info.unit for info in FIELDS.values()))
POLICY_SOURCES = ("builtin", "cluster", "namespace", "node")


class PolicyChangeInputSerializer(StrictSerializer):
    """``set``: field → value (null = infinite where allowed); ``reset``: fields that inherit again."""

    set = serializers.DictField(child=PolicyValueField(allow_null=True), required=False, default=dict)
    reset = serializers.ListField(child=serializers.CharField(), required=False, default=list)


class PolicyFieldSerializer(serializers.Serializer):
    value = PolicyValueField(allow_null=True)
    source = serializers.ChoiceField(choices=POLICY_SOURCES)
    overridden = serializers.BooleanField()
    default = PolicyValueField(allow_null=True)
    group = serializers.ChoiceField(choices=POLICY_GROUPS)
    unit = serializers.ChoiceField(choices=POLICY_UNITS)
    nullable = serializers.BooleanField()
    choices = serializers.ListField(child=serializers.CharField())
    help = serializers.CharField()


class PolicyOutputSerializer(serializers.Serializer):
    fields = serializers.DictField(child=PolicyFieldSerializer())
    sync_state = serializers.ChoiceField(choices=SyncState.choices, required=False)
    sync_error = serializers.CharField(required=False, allow_blank=True)
    version = serializers.IntegerField(
        required=False, allow_null=True, help_text="node policy only: the version the node last confirmed"
    )
