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


class Schedule(models.Model):
    """When the next scheduled run of one kind on one target (a namespace or a node) is due.

    Rows are derived from the effective policies by ``schedules.derive_schedules`` (never kept in step
    by hand) and fired by ``schedules.tick_schedules``, which beat starts every ``TICK_S`` seconds: a
    row whose ``next_due`` has passed starts its task and is moved to one ``interval_s`` from then.
    ``enabled`` pauses a row (the admin, the lifecycle bench); deriving never changes it.
    """

    namespace = models.ForeignKey(
        "namespaces.Namespace", null=True, blank=True, on_delete=models.CASCADE, related_name="schedules"
    )
    node = models.ForeignKey(
        "nodes.StorageNode", null=True, blank=True, on_delete=models.CASCADE, related_name="schedules"
    )
    kind = models.CharField(max_length=40)  # a run kind (``runs.Kind``), or ``schedules.DUE_POLL``
    interval_s = models.PositiveIntegerField()
    next_due = models.DateTimeField(db_index=True)
    last_started = models.DateTimeField(null=True, blank=True)
    enabled = models.BooleanField(default=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(namespace__isnull=False, node__isnull=True)
                | models.Q(namespace__isnull=True, node__isnull=False),
                name="schedule_targets_a_namespace_or_a_node",
            ),
            models.UniqueConstraint(
                fields=["namespace", "kind"],
                condition=models.Q(namespace__isnull=False),
                name="one_schedule_per_namespace_and_kind",
            ),
            models.UniqueConstraint(
                fields=["node", "kind"], condition=models.Q(node__isnull=False), name="one_schedule_per_node_and_kind"
            ),
        ]

    def __str__(self) -> str:
        target = f"namespace {self.namespace_id}" if self.namespace_id else f"node {self.node_id}"
        return f"{self.kind} of {target} every {self.interval_s} s, next {self.next_due.isoformat()}"
