from django.conf import settings
from django.db import models


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
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["state", "-created_at"]),
            models.Index(fields=["kind", "-created_at"]),
            models.Index(fields=["namespace", "kind", "state", "-finished_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk} ({self.state})"
