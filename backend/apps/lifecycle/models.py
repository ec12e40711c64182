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


class DueSweep(models.Model):
    """The next deadline-driven sweep of one kind on one node (issue 15): at most one pending.

    ``token`` names the Celery task that is to run it; a task whose token no longer matches
    was superseded by an earlier due time and does nothing. ``due_ms`` is the node's due
    time (node clock) the sweep was scheduled for, ``eta`` when it runs, ``fired`` whether
    it started a run: a due time no later than a fired one's was not cleared by that run
    (off-peak hours, a subscription holding retention back...), so it is left to the beat
    schedule instead of being retried at once.
    """

    node = models.ForeignKey("nodes.StorageNode", on_delete=models.CASCADE, related_name="due_sweeps")
    kind = models.CharField(max_length=40)
    due_ms = models.BigIntegerField()
    eta = models.DateTimeField()
    token = models.CharField(max_length=40, blank=True, default="")
    fired = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node", "kind"], name="one_due_sweep_per_node_and_kind")]

    def __str__(self) -> str:
        return f"{self.kind} of {self.node_id} due at {self.due_ms} (eta {self.eta.isoformat()})"
