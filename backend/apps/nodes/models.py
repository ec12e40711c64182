from django.db import models


class StorageNode(models.Model):
    """A storage node process: the owner of one data directory."""

    name = models.CharField(max_length=100, unique=True)
    url = models.URLField(max_length=300)
    # Bearer token for the node's API; write-only through the API, never returned.
    token = models.CharField(max_length=300, blank=True)
    # Overrides of the built-in node policy (cleaner and disk watermarks).
    policy_overrides = models.JSONField(default=dict, blank=True)
    healthy = models.BooleanField(default=False)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.url})"
