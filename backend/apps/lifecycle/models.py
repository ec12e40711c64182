from django.db import models


class Lease(models.Model):
    """A lock with an expiry: at most one lifecycle job per shard (or node) at a time.

    A worker that dies holding a lease cannot block the shard for longer than
    the lease: once ``expires_at`` passes, the next job takes it over.
    """

    key = models.CharField(max_length=300, unique=True)
    holder = models.CharField(max_length=100)
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.key} held by {self.holder} until {self.expires_at.isoformat()}"
