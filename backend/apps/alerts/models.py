"""Alert rules, alerts (one per rule and label set and episode), their history, channels and deliveries."""

from django.conf import settings
from django.db import models
from django.db.models import Q


class Severity(models.TextChoices):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class ScopeType(models.TextChoices):
    ALL = "all"
    NAMESPACE = "namespace"
    SHARD = "shard"
    NODE = "node"


class Comparator(models.TextChoices):
    GT = ">"
    GE = ">="
    LT = "<"
    LE = "<="


class ChannelKind(models.TextChoices):
    EMAIL = "email"
    WEBHOOK = "webhook"
    ALERTMANAGER = "alertmanager"


class Channel(models.Model):
    """Where notifications go: an email address list, a webhook signed with ``secret``, or an Alertmanager
    (its alerts API v2; ``secret``, if set, is sent as a bearer token)."""

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=20, choices=ChannelKind.choices)
    target = models.CharField(max_length=500)  # comma-separated addresses, the webhook URL, the Alertmanager URL
    # HMAC-SHA256 key for webhooks, bearer token for an Alertmanager; write-only in the API
    secret = models.CharField(max_length=200, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class AlertRule(models.Model):
    """``metric comparator threshold`` held for ``for_s`` seconds, per label set within the scope.

    With ``threshold_policy`` set, the threshold is ``threshold × <that policy
    field>`` of the series' node (node policy fields) or namespace (namespace
    policy fields); a label set whose policy value is unset (e.g. no backlog
    quota) is not evaluated.

    A disabled rule (``enabled`` false) is not evaluated. Disabling it closes its open alerts at once, as
    Alertmanager does with an alert whose rule stops sending it: a firing one resolves (and its channels
    get the "resolved" notification, so an incident opened by it closes), a pending one is dropped. The
    built-in rules are seeded once (``DefaultRuleMarker``): seeding again never re-enables a disabled one
    nor re-creates a deleted one.
    """

    name = models.CharField(max_length=200, unique=True)
    metric = models.CharField(max_length=64)
    scope_type = models.CharField(max_length=10, choices=ScopeType.choices, default=ScopeType.ALL)
    scope = models.CharField(max_length=300, blank=True)  # namespace, "namespace/shard" or node name
    comparator = models.CharField(max_length=2, choices=Comparator.choices, default=Comparator.GT)
    threshold = models.FloatField()
    threshold_policy = models.CharField(max_length=64, blank=True)
    for_s = models.PositiveIntegerField(default=0)
    severity = models.CharField(max_length=10, choices=Severity.choices, default=Severity.WARNING)
    channels = models.ManyToManyField(Channel, blank=True, related_name="rules")
    enabled = models.BooleanField(default=True)
    description = models.TextField(blank=True)
    default_key = models.CharField(max_length=64, null=True, blank=True, unique=True)  # set on built-in rules
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class DefaultRuleMarker(models.Model):
    """A built-in rule was created once; deleting the rule later does not bring it back."""

    key = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)


class AlertState(models.TextChoices):
    """pending (the condition holds, not yet for ``for_s``) → firing → resolved; a pending alert that
    clears is deleted, so every resolved alert fired."""

    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"


OPEN_STATES = (AlertState.PENDING, AlertState.FIRING)


class Alert(models.Model):
    """One episode of a rule's condition holding for one label set; at most one open per (rule, labels).

    History outlives its rule: deleting a rule leaves ``rule`` null, and ``rule_name``, ``metric`` and
    ``severity`` (copied from the rule when the alert opens, and kept in step while it is open) still say
    what the alert was about. Only alerts that fired are kept once closed: a pending alert whose condition
    clears before the rule's ``for`` duration never was an alert (as in Prometheus) and is deleted.
    """

    rule = models.ForeignKey(AlertRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="alerts")
    rule_name = models.CharField(max_length=200, blank=True)
    metric = models.CharField(max_length=64, blank=True)
    severity = models.CharField(max_length=10, choices=Severity.choices, default=Severity.WARNING)
    labels_key = models.CharField(max_length=600)  # "namespace=orders,shard=0"
    labels = models.JSONField(default=dict)
    state = models.CharField(max_length=10, choices=AlertState.choices, default=AlertState.PENDING)
    value = models.FloatField(null=True)
    threshold = models.FloatField(null=True)
    summary = models.CharField(max_length=500, blank=True)
    started_at = models.DateTimeField()
    fired_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    silenced_until = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "labels_key"], condition=Q(state__in=["pending", "firing"]), name="alerts_one_open"
            )
        ]
        indexes = [models.Index(fields=["state", "-started_at", "-id"]), models.Index(fields=["rule", "state"])]

    def snapshot_rule(self, rule: AlertRule) -> None:
        """Copy what the history shows of the rule (it may be renamed or deleted later)."""
        self.rule_name, self.metric, self.severity = rule.name, rule.metric, rule.severity

    def __str__(self) -> str:
        return f"{self.rule_name} [{self.labels_key}] {self.state}"


class EventKind(models.TextChoices):
    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"
    ACKNOWLEDGED = "acknowledged"
    SILENCED = "silenced"


class AlertEvent(models.Model):
    """A transition or an operator action on an alert."""

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=15, choices=EventKind.choices)
    at = models.DateTimeField()
    value = models.FloatField(null=True, blank=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    detail = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["at", "id"]


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    SENDING = "sending"
    RETRYING = "retrying"
    SENT = "sent"
    FAILED = "failed"
    SKIPPED = "skipped"  # silenced or the channel disabled when its turn came


class Notification(models.Model):
    """One delivery of one event to one channel, retried with backoff."""

    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="notifications")
    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="notifications")
    event = models.ForeignKey(AlertEvent, on_delete=models.CASCADE, related_name="notifications")
    status = models.CharField(max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    next_attempt_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "next_attempt_at"])]
