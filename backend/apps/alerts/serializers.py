from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import validate_email
from rest_framework import serializers

from backend.apps.alerts.models import (
    Alert,
    AlertEvent,
    AlertRule,
    Channel,
    ChannelKind,
    Comparator,
    EventKind,
    Notification,
    ScopeType,
    Severity,
)
from backend.apps.alerts.rules import METRICS, POLICY_FIELDS, scope_errors
from backend.apps.alerts.selectors import is_silenced, redacted_target
from backend.apps.alerts.transports import alertmanager_url
from backend.apps.core.outgoing import CHANNEL, OutgoingURLRefused, check_outgoing_url
from backend.apps.core.serializers import StrictSerializer


class AlertOutputSerializer(serializers.ModelSerializer):
    rule = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True, help_text="null: the rule was deleted")
    rule_name = serializers.CharField(help_text="the rule's name when the alert was open (kept if it is deleted)")
    metric = serializers.CharField(help_text="the rule's metric when the alert was open")
    severity = serializers.ChoiceField(choices=Severity.choices)
    scope = serializers.CharField(source="labels_key", help_text='the label set, e.g. "namespace=orders,shard=0"')
    labels = serializers.DictField()
    acknowledged_by = serializers.CharField(source="acknowledged_by.username", allow_null=True, default=None)
    silenced = serializers.SerializerMethodField(help_text="silenced_until is still ahead: no notifications")

    class Meta:
        model = Alert
        fields = [
            "id",
            "rule",
            "rule_name",
            "metric",
            "severity",
            "state",
            "scope",
            "labels",
            "value",
            "threshold",
            "started_at",
            "fired_at",
            "resolved_at",
            "acknowledged_by",
            "acknowledged_at",
            "silenced_until",
            "silenced",
            "summary",
        ]
        read_only_fields = fields

    def get_silenced(self, alert: Alert) -> bool:
        return is_silenced(alert)


class AlertStatusOutputSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "firing"], help_text="firing while any alert fires")
    firing = serializers.IntegerField()
    silenced = serializers.IntegerField(help_text="firing alerts that are silenced")
    acknowledged = serializers.IntegerField(help_text="firing alerts that are acknowledged")
    critical = serializers.IntegerField(help_text="firing alerts of critical rules")
    pending = serializers.IntegerField()


class AlertEventOutputSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username", allow_null=True, default=None)

    class Meta:
        model = AlertEvent
        fields = ["id", "kind", "at", "value", "actor", "detail"]
        read_only_fields = fields


class NotificationOutputSerializer(serializers.ModelSerializer):
    channel = serializers.CharField(source="channel.name")
    event = serializers.ChoiceField(choices=EventKind.choices, source="event.kind", read_only=True)

    class Meta:
        model = Notification
        fields = ["id", "channel", "event", "status", "attempts", "last_error", "next_attempt_at", "sent_at"]
        read_only_fields = fields


class AlertDetailOutputSerializer(AlertOutputSerializer):
    events = AlertEventOutputSerializer(many=True)
    notifications = NotificationOutputSerializer(many=True)

    class Meta(AlertOutputSerializer.Meta):
        fields = [*AlertOutputSerializer.Meta.fields, "events", "notifications"]
        read_only_fields = fields


class SilenceInputSerializer(StrictSerializer):
    minutes = serializers.IntegerField(min_value=0, max_value=30 * 24 * 60, help_text="0 lifts the silence")


class AlertRuleInputSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200)
    metric = serializers.ChoiceField(choices=list(METRICS))
    scope_type = serializers.ChoiceField(choices=ScopeType.choices, default=ScopeType.ALL)
    scope = serializers.CharField(max_length=300, allow_blank=True, default="")
    comparator = serializers.ChoiceField(choices=Comparator.choices)
    threshold = serializers.FloatField(help_text="a factor of threshold_policy's value when that is set")
    threshold_policy = serializers.ChoiceField(
        choices=["", *POLICY_FIELDS],
        allow_blank=True,
        default="",
        help_text="a numeric node or namespace policy field; the effective threshold is threshold × its value",
    )
    for_s = serializers.IntegerField(min_value=0, max_value=30 * 86_400, default=0)
    severity = serializers.ChoiceField(choices=Severity.choices, default=Severity.WARNING)
    channels = serializers.PrimaryKeyRelatedField(queryset=Channel.objects.all(), many=True, required=False)
    enabled = serializers.BooleanField(default=True)
    description = serializers.CharField(allow_blank=True, default="", max_length=2000)

    def validate_name(self, value: str) -> str:
        taken = AlertRule.objects.filter(name=value)
        if self.instance is not None:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            raise serializers.ValidationError("a rule with this name exists")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        def current(name: str) -> Any:
            if name in attrs:
                return attrs[name]
            return getattr(self.instance, name) if self.instance is not None else ""

        errors = scope_errors(current("metric"), current("scope_type"), current("scope"))
        if errors:
            raise serializers.ValidationError({k: [v] for k, v in errors.items()})
        return attrs


class RuleEnabledInputSerializer(StrictSerializer):
    enabled = serializers.BooleanField(help_text="false: the rule is not evaluated and its open alerts close")


class AlertRuleOutputSerializer(serializers.ModelSerializer):
    metric = serializers.ChoiceField(choices=list(METRICS), read_only=True)
    threshold_policy = serializers.ChoiceField(
        choices=["", *POLICY_FIELDS],
        allow_blank=True,
        read_only=True,
        help_text="a numeric policy field whose value the threshold multiplies; empty: the threshold is absolute",
    )
    channels = serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    builtin = serializers.SerializerMethodField()

    class Meta:
        model = AlertRule
        fields = [
            "id",
            "name",
            "metric",
            "scope_type",
            "scope",
            "comparator",
            "threshold",
            "threshold_policy",
            "for_s",
            "severity",
            "channels",
            "enabled",
            "description",
            "builtin",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_builtin(self, rule: AlertRule) -> bool:
        return rule.default_key is not None


class ChannelInputSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100)
    kind = serializers.ChoiceField(choices=ChannelKind.choices)
    target = serializers.CharField(
        max_length=500,
        help_text="comma-separated email addresses, the webhook URL, or the Alertmanager's base URL "
        "(alerts are POSTed to <url>/api/v2/alerts)",
    )
    secret = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="HMAC-SHA256 key signing webhook bodies (X-LCS-Signature: sha256=<hex>), or an optional bearer "
        "token for an Alertmanager; never returned",
    )
    enabled = serializers.BooleanField(default=True)

    def validate_name(self, value: str) -> str:
        taken = Channel.objects.filter(name=value)
        if self.instance is not None:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            raise serializers.ValidationError("a channel with this name exists")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        def current(name: str) -> Any:
            if name in attrs:
                return attrs[name]
            return getattr(self.instance, name) if self.instance is not None else ""

        kind, target = current("kind"), current("target")
        errors: dict[str, list[str]] = {}
        if kind == ChannelKind.EMAIL:
            addresses = [a.strip() for a in target.split(",") if a.strip()]
            try:
                if not addresses:
                    raise DjangoValidationError("empty")
                for address in addresses:
                    validate_email(address)
            except DjangoValidationError:
                errors["target"] = ["must be email addresses, comma-separated"]
        elif kind in (ChannelKind.WEBHOOK, ChannelKind.ALERTMANAGER):
            try:
                serializers.URLField().run_validation(target)
                url = alertmanager_url(target) if kind == ChannelKind.ALERTMANAGER else target
                check_outgoing_url(url, purpose=CHANNEL)
            except serializers.ValidationError:
                errors["target"] = ["must be an http(s) URL"]
            except OutgoingURLRefused as exc:
                errors["target"] = [f"refused: {exc}"]
            if kind == ChannelKind.WEBHOOK and not current("secret"):
                errors["secret"] = ["a webhook channel needs a secret to sign deliveries"]
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class ChannelOutputSerializer(serializers.ModelSerializer):
    """A channel; the secret is never shown, and the target only to admins (context ``full_target``):
    others see a webhook's scheme and host, an address's domain."""

    target = serializers.SerializerMethodField(help_text="redacted unless the caller is an admin")
    target_redacted = serializers.SerializerMethodField()
    has_secret = serializers.SerializerMethodField()

    class Meta:
        model = Channel
        fields = ["id", "name", "kind", "target", "target_redacted", "has_secret", "enabled", "created_at"]
        read_only_fields = fields

    def _full(self) -> bool:
        return bool(self.context.get("full_target", False))

    def get_target(self, channel: Channel) -> str:
        return channel.target if self._full() else redacted_target(channel)

    def get_target_redacted(self, channel: Channel) -> bool:
        return not self._full()

    def get_has_secret(self, channel: Channel) -> bool:
        return bool(channel.secret)


class ChannelTestInputSerializer(StrictSerializer):
    """No fields: a test message is fixed (any field given is refused)."""


class ChannelTestOutputSerializer(serializers.Serializer):
    delivered = serializers.BooleanField()
    error = serializers.CharField(
        allow_blank=True, help_text="why it was not delivered, in our words: never the receiver's answer"
    )
