from django.db import models

from backend.apps.core.models import SyncState


class StorageNode(models.Model):
    """A storage node process: the owner of one data directory."""

    name = models.CharField(max_length=100, unique=True)
    url = models.URLField(max_length=300)
    # Bearer token for the node's API; write-only through the API, never returned.
    token = models.CharField(max_length=300, blank=True)
    # Overrides of the built-in node policy (cleaner and disk watermarks).
    policy_overrides = models.JSONField(default=dict, blank=True)
    # Whether the node enforces the effective node policy, as namespaces track theirs:
    # pending until the node answers a push with the same values and its policy version
    # (persisted by the node); the reconcile task pushes again when the node reports
    # another version or other values (a restart on a wiped data directory, a direct PUT).
    policy_sync_state = models.CharField(max_length=10, choices=SyncState.choices, default=SyncState.PENDING)
    policy_sync_error = models.TextField(blank=True)
    policy_version = models.PositiveBigIntegerField(null=True, blank=True)  # last confirmed by the node
    policy_synced_at = models.DateTimeField(null=True, blank=True)
    healthy = models.BooleanField(default=False)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.url})"
