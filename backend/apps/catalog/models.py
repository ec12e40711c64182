from django.db import models


class Segment(models.Model):
    """A synced copy of one segment's metadata on a node (the node is the source of truth)."""

    namespace = models.ForeignKey("namespaces.Namespace", on_delete=models.CASCADE, related_name="segments")
    shard = models.PositiveIntegerField()
    base_offset = models.BigIntegerField()
    last_offset = models.BigIntegerField()
    record_count = models.BigIntegerField()
    live_count = models.BigIntegerField()
    size_bytes = models.BigIntegerField()
    min_timestamp = models.BigIntegerField(null=True)
    max_timestamp = models.BigIntegerField(null=True)
    max_expire_at = models.BigIntegerField(null=True)
    has_unbounded = models.BooleanField(default=True)
    state = models.CharField(max_length=12)
    created_at_ms = models.BigIntegerField()
    modified_at_ms = models.BigIntegerField()
    # The engine's figures (storage_engine.api.SegmentInfo), carried unchanged: expired but not yet
    # reclaimed records and bytes, and when every record will have expired (namespace TTL included).
    expired_records = models.BigIntegerField(default=0)
    expired_bytes = models.BigIntegerField(default=0)
    deadline = models.BigIntegerField(null=True)
    # expired_records ÷ record_count (catalog.figures.ratio; the engine gives no segment ratio): kept for
    # filtering and sorting.
    expired_ratio = models.FloatField(default=0.0)
    # Where its bytes are (tiered storage, storage_engine.api.SegmentTier): local, both (local and in the
    # object store) or remote (the local copy dropped); the active segment and one being uploaded are local.
    tier = models.CharField(max_length=8, default="local")
    synced_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["namespace_id", "shard", "base_offset"]
        constraints = [
            models.UniqueConstraint(fields=["namespace", "shard", "base_offset"], name="segment_unique_position")
        ]
        indexes = [
            models.Index(fields=["state", "id"]),
            # A state filter walking the list's ordering (namespace, shard, base offset) without a sort.
            models.Index(fields=["state", "namespace", "shard", "base_offset", "id"], name="segment_state_position"),
            models.Index(fields=["size_bytes", "id"]),
            models.Index(fields=["max_timestamp", "id"]),
            models.Index(fields=["expired_ratio", "id"]),
            models.Index(fields=["namespace", "state"]),
            # A tier filter walking the list's ordering, as the state one does.
            models.Index(fields=["tier", "namespace", "shard", "base_offset", "id"], name="segment_tier_position"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace_id}/{self.shard}/{self.base_offset:020d}"


class ShardStatus(models.Model):
    """Current figures of one shard from its node: the engine's ``ShardStats`` fields, carried unchanged,
    and the shard's subscription backlog (summed over its subscriptions). Written by every metrics
    collection from the node's ``/v1/stats`` (``collected_at``), and by a catalog sync of the shard.
    """

    namespace = models.ForeignKey("namespaces.Namespace", on_delete=models.CASCADE, related_name="shard_status")
    shard = models.PositiveIntegerField()
    log_start_offset = models.BigIntegerField(default=0)
    end_offset = models.BigIntegerField(default=0)
    record_count = models.BigIntegerField(default=0)
    live_count = models.BigIntegerField(default=0)
    size_bytes = models.BigIntegerField(default=0)
    segment_count = models.IntegerField(default=0)
    # Expired but not yet reclaimed: every stored record past its effective expiry, or dead (the engine's).
    expired_records = models.BigIntegerField(default=0)
    expired_bytes = models.BigIntegerField(default=0)
    expired_ratio = models.FloatField(default=0.0)
    expired_bytes_ratio = models.FloatField(default=0.0)
    # Subscription backlog on this shard, summed over the subscriptions (BacklogInfo messages, live_messages,
    # bytes); written by the metrics collection only.
    backlog_messages = models.BigIntegerField(default=0)
    backlog_live_messages = models.BigIntegerField(default=0)
    backlog_bytes = models.BigIntegerField(default=0)
    # Where the shard's stored bytes are (tiered storage; the engine's ShardStats split, catalog.figures): with a
    # local file, and only in the object store. size_bytes = local_bytes + remote_only_bytes, written together
    # from one node answer like every figure above.
    local_bytes = models.BigIntegerField(default=0)
    remote_only_bytes = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)  # when a figure last changed
    collected_at = models.DateTimeField(null=True, blank=True)  # the last collection that reported the shard
    segments_synced_at = models.DateTimeField(null=True, blank=True)  # the last segment catalog sync of it

    class Meta:
        ordering = ["namespace_id", "shard"]
        constraints = [models.UniqueConstraint(fields=["namespace", "shard"], name="shard_status_unique")]

    def __str__(self) -> str:
        return f"{self.namespace_id}/{self.shard}"
