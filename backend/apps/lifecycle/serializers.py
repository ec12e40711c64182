from rest_framework import serializers

from backend.apps.core.serializers import StrictSerializer
from backend.apps.lifecycle.actions import ACTIONS, actions_for

ACTION_KINDS = [str(kind) for kind in ACTIONS]


class ActionOutputSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=ACTION_KINDS)
    scope = serializers.ChoiceField(choices=["namespace", "node"], help_text="what an operator starts it on")
    operation = serializers.ChoiceField(
        choices=list(dict.fromkeys(str(a.operation) for a in ACTIONS.values())),
        help_text="the node's lifecycle operation",
    )
    label = serializers.CharField()
    help = serializers.CharField()
    destructive = serializers.BooleanField(help_text="deletes data: a manual start must repeat the target's name")
    dry_run = serializers.BooleanField(help_text="offered as a dry run")
    sweeps = serializers.BooleanField(help_text="also runs node-wide, over every namespace")


DRY_RUN_HELP = (
    "report what the action would do (records, segments, bytes, cursors moved, segments offloaded or recalled) "
    "in one step and change nothing"
)


class NamespaceActionInputSerializer(StrictSerializer):
    action = serializers.ChoiceField(choices=actions_for("namespace"))
    shard = serializers.IntegerField(min_value=0, required=False, allow_null=True, default=None)
    dry_run = serializers.BooleanField(default=False, help_text=DRY_RUN_HELP)
    confirm = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="repeat the namespace name for destructive actions"
    )


class NodeActionInputSerializer(StrictSerializer):
    # The node's own actions and the sweeping ones, node-wide over every namespace it hosts (``sweeps``).
    action = serializers.ChoiceField(choices=actions_for("node"))
    dry_run = serializers.BooleanField(default=False, help_text=DRY_RUN_HELP)
    confirm = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="repeat the node name for destructive actions"
    )
