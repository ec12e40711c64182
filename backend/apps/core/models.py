from django.db import models


class SyncState(models.TextChoices):
    """Where a desired state saved here stands on the node it belongs to (a namespace, a node policy)."""

    SYNCED = "synced"
    PENDING = "pending"  # saved here, not yet taken by the node; retried by a periodic task
    FAILED = "failed"  # the node refused it; sync_error says why


class Heartbeat(models.Model):
    """The last time a periodic process proved it was alive (e.g. Celery beat)."""

    name = models.CharField(max_length=100, unique=True)
    at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} @ {self.at.isoformat()}"
