"""Metrics history: a normalized series table and two narrow time-series tables.

- :class:`MetricSeries`: one row per (name, labels); it also caches the last
  value, so "now" views (summary, ``/metrics``, alert evaluation) never scan
  samples.
- :class:`Sample`: raw points (epoch ms, value), kept 24 h.
- :class:`Rollup`: 5-minute aggregates (count, sum, min, max), kept 30 days.

Time is stored as epoch milliseconds (bigint): bucket arithmetic is plain
integer math on every database.
"""

from django.db import models


class MetricSeries(models.Model):
    name = models.CharField(max_length=64)
    node = models.CharField(max_length=100, blank=True, default="")
    namespace = models.CharField(max_length=200, blank=True, default="")
    shard = models.IntegerField(null=True, blank=True)
    queue = models.CharField(max_length=200, blank=True, default="")
    # Canonical "name|node|namespace|shard|queue": the identity (NULL shards make a composite unique key leaky).
    key = models.CharField(max_length=600, unique=True)
    last_ts = models.BigIntegerField(null=True, blank=True)
    last_value = models.FloatField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "metric series"
        indexes = [
            models.Index(fields=["name", "namespace", "shard"]),
            models.Index(fields=["name", "node"]),
            models.Index(fields=["name", "last_ts"]),
        ]

    def __str__(self) -> str:
        return self.key

    @property
    def labels(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.node:
            out["node"] = self.node
        if self.namespace:
            out["namespace"] = self.namespace
        if self.shard is not None:
            out["shard"] = self.shard
        if self.queue:
            out["queue"] = self.queue
        return out


def series_key(name: str, node: str = "", namespace: str = "", shard: int | None = None, queue: str = "") -> str:
    return f"{name}|{node}|{namespace}|{'' if shard is None else shard}|{queue}"


class Sample(models.Model):
    series = models.ForeignKey(MetricSeries, on_delete=models.CASCADE, related_name="+", db_index=False)
    ts = models.BigIntegerField()  # epoch ms
    value = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["series", "ts"], name="metrics_sample_series_ts")]
        indexes = [models.Index(fields=["ts"], name="metrics_sample_ts")]


class Rollup(models.Model):
    series = models.ForeignKey(MetricSeries, on_delete=models.CASCADE, related_name="+", db_index=False)
    bucket = models.BigIntegerField()  # epoch ms of the bucket start (5-minute aligned)
    count = models.IntegerField()
    sum = models.FloatField()
    min = models.FloatField()
    max = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["series", "bucket"], name="metrics_rollup_series_bucket")]
        indexes = [models.Index(fields=["bucket"], name="metrics_rollup_bucket")]
