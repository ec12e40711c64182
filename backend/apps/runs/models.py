from django.conf import settings
from django.db import models
from django.utils import timezone


class Kind(models.TextChoices):
    EXPIRY_SCAN = "expiry_scan"
    RETENTION = "retention"
    FILE_CLEAN = "file_clean"
    DISK_CHECK = "disk_check"
    FORCE_DELETE = "force_delete"
    RECLAIM = "reclaim"
    COMPACTION = "compaction"
    SUBSCRIPTION_TTL = "subscription_ttl"
    BACKLOG_QUOTA = "backlog_quota"
    OFFLOAD = "offload"  # tiered storage: upload sealed segments, drop local copies past local retention
    RECALL = "recall"  # tiered storage: download local copies of offloaded segments the policy keeps local
    CATALOG_SYNC = "catalog_sync"
    LAKE_EXPORT = "lake_export"
    LIFECYCLE_REPORT = "lifecycle_report"
    COMPACTION_PLAN = "compaction_plan"
    TTL_BACKFILL = "ttl_backfill"


class State(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED = (State.SUCCEEDED, State.FAILED, State.CANCELLED)


class TaskRun(models.Model):
    """One lifecycle job or manual action: what, on what, by whom, how far, with what result."""

    kind = models.CharField(max_length=30, choices=Kind.choices)
    namespace = models.ForeignKey(
        "namespaces.Namespace", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    node = models.ForeignKey("nodes.StorageNode", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    shard = models.PositiveIntegerField(null=True, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    progress = models.FloatField(default=0.0)  # 0–1 where the job can tell; steps otherwise
    steps = models.PositiveIntegerField(default=0)
    counts = models.JSONField(default=dict, blank=True)  # e.g. entries_scanned, records_expired, segments_deleted
    bytes_reclaimed = models.BigIntegerField(default=0)
    dry_run = models.BooleanField(default=False)
    params = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    schedule = models.CharField(max_length=200, blank=True)  # the periodic task that started it, if any
    celery_task_id = models.CharField(max_length=255, blank=True)
    cancel_requested = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)  # not auto_now_add: the services pass their clock
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Scheduled sweeps fold into one row per kind, target and window (``services.fold_sweep``): the row's window
    # (``None``: a run of its own), how many sweeps it stands for (1 for any other run), and whether none of them
    # did anything (such a row is left out of the list unless asked for).
    window_start = models.DateTimeField(null=True, blank=True)
    sweeps = models.PositiveIntegerField(default=1)
    idle = models.BooleanField(default=False)
    # A folded row's start and finish span its window: how long its latest sweep took, for the duration gauges.
    last_sweep_s = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["state", "-created_at"]),
            models.Index(fields=["kind", "-created_at"]),
            models.Index(fields=["namespace", "kind", "state", "-finished_at"]),
            models.Index(fields=["kind", "window_start"]),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk} ({self.state})"


class RunChange(models.Model):
    """A namespace a run changed — records expired or removed, segments deleted, rewritten or moved between
    tiers, cursors moved (the node's ``LifecycleResult.namespaces_changed``) — and when it last did. A node-wide
    sweep names the namespaces it worked on this way: their Tasks tab lists it, and their "last scan" and "last
    compaction" are the latest such change by a run of that kind (``selectors.last_change_at``)."""

    run = models.ForeignKey(TaskRun, on_delete=models.CASCADE, related_name="changes")
    namespace = models.ForeignKey("namespaces.Namespace", on_delete=models.CASCADE, related_name="run_changes")
    changed_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "namespace"], name="one_change_per_run_and_namespace")]
        indexes = [models.Index(fields=["namespace", "-changed_at"])]

    def __str__(self) -> str:
        return f"run {self.run_id} changed namespace {self.namespace_id} at {self.changed_at.isoformat()}"
