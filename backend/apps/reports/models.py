"""Lifecycle report rows: what the ``lifecycle-report`` Spark job computed per namespace and UTC day.

One row per (namespace, day); a new report replaces the rows of the days it covers (see
:func:`backend.apps.reports.services.store_lifecycle_report`). Field names follow the job's JSON
(``spark_jobs.transforms.lifecycle_aggregates``), except ``date`` which is ``day`` here.
"""

from django.db import models


class LifecycleReportRow(models.Model):
    namespace = models.ForeignKey("namespaces.Namespace", on_delete=models.CASCADE, related_name="report_rows")
    day = models.DateField()  # UTC day of the records' timestamps
    records = models.BigIntegerField()
    bytes = models.BigIntegerField()  # encoded record bytes
    expired_records = models.BigIntegerField()  # expired at now_ms, not yet reclaimed
    expired_bytes = models.BigIntegerField()
    expired_ratio = models.FloatField(null=True, blank=True)  # expired ÷ stored records; null when none stored
    expired_bytes_ratio = models.FloatField(null=True, blank=True)
    unbounded_records = models.BigIntegerField()  # no effective expiry
    # Record lifetimes (effective expiry − timestamp): percentiles and a histogram of counts per bucket.
    lifetime_p50_ms = models.BigIntegerField(null=True, blank=True)
    lifetime_p90_ms = models.BigIntegerField(null=True, blank=True)
    lifetime_p99_ms = models.BigIntegerField(null=True, blank=True)
    lifetime_histogram = models.JSONField(default=dict)
    # How long expired records have survived past their expiry (now − expiry).
    overdue_p50_ms = models.BigIntegerField(null=True, blank=True)
    overdue_p90_ms = models.BigIntegerField(null=True, blank=True)
    overdue_p99_ms = models.BigIntegerField(null=True, blank=True)
    overdue_max_ms = models.BigIntegerField(null=True, blank=True)
    keyed_records = models.BigIntegerField()
    superseded_records = models.BigIntegerField()  # not the latest for their key: compaction drops them
    superseded_bytes = models.BigIntegerField()  # what compaction would reclaim
    duplicate_key_ratio = models.FloatField(null=True, blank=True)  # superseded ÷ keyed
    now_ms = models.BigIntegerField()  # the "now" the report judged expiry at
    generated_at = models.DateTimeField()
    received_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["namespace_id", "-day"]
        constraints = [models.UniqueConstraint(fields=["namespace", "day"], name="lifecycle_report_unique_day")]

    def __str__(self) -> str:
        return f"{self.namespace_id}/{self.day}"


# The lifetime histogram's buckets, in order (spark_jobs.transforms.LIFETIME_BUCKETS; upper bounds inclusive).
LIFETIME_BUCKETS = ("le_1m", "le_1h", "le_1d", "le_7d", "le_30d", "gt_30d")

# The measures a lifecycle report row carries, as the Spark job posts them (one list for every reader).
REPORT_FIELDS = (
    "records",
    "bytes",
    "expired_records",
    "expired_bytes",
    "expired_ratio",
    "expired_bytes_ratio",
    "unbounded_records",
    "lifetime_p50_ms",
    "lifetime_p90_ms",
    "lifetime_p99_ms",
    "lifetime_histogram",
    "overdue_p50_ms",
    "overdue_p90_ms",
    "overdue_p99_ms",
    "overdue_max_ms",
    "keyed_records",
    "superseded_records",
    "superseded_bytes",
    "duplicate_key_ratio",
    "now_ms",
)
