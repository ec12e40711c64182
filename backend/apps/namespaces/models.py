from django.conf import settings
from django.db import models

from backend.apps.core.models import SyncState


class Namespace(models.Model):
    """A topic: its intent lives here, its data on the node that hosts it."""

    name = models.CharField(max_length=200, unique=True)
    shards = models.PositiveIntegerField(default=1)
    node = models.ForeignKey("nodes.StorageNode", on_delete=models.PROTECT, related_name="namespaces")
    # Overrides of the cluster default policy; absent fields inherit (DESIGN §3).
    policy_overrides = models.JSONField(default=dict, blank=True)
    sync_state = models.CharField(max_length=10, choices=SyncState.choices, default=SyncState.PENDING)
    sync_error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        indexes = [models.Index(fields=["sync_state"])]

    def __str__(self) -> str:
        return self.name


class ShardPlacement(models.Model):
    """Which node hosts one shard of a namespace (DESIGN §1: shards placed on nodes).

    Every shard has exactly one row, written when the namespace is created. The
    namespace exists on every node that hosts one of its shards (same name, same
    shard count, same policy); a node holds data only for the shards placed on it,
    so producers, lifecycle runs, the catalog, metrics and the message browser all
    address a shard through its placement. ``Namespace.node`` is the node shards go
    to unless the creator placed them elsewhere. Moving a placed shard would mean
    moving its data, which the control plane does not do: placement is fixed.
    """

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="placements")
    shard = models.PositiveIntegerField()
    node = models.ForeignKey("nodes.StorageNode", on_delete=models.PROTECT, related_name="shard_placements")

    class Meta:
        ordering = ["namespace_id", "shard"]
        constraints = [models.UniqueConstraint(fields=["namespace", "shard"], name="placement_unique_shard")]

    def __str__(self) -> str:
        return f"{self.namespace_id}/{self.shard}@{self.node_id}"


class Subscription(models.Model):
    """A named cursor per shard on a namespace; the node keeps the cursors, this row the intent."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="subscriptions")
    name = models.CharField(max_length=200)
    initial = models.CharField(max_length=10, default="earliest")  # earliest | latest
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["namespace_id", "name"]
        constraints = [models.UniqueConstraint(fields=["namespace", "name"], name="subscription_unique_name")]

    def __str__(self) -> str:
        return f"{self.namespace_id}/{self.name}"
