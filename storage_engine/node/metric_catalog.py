"""What every engine figure means on ``/metrics``: name, type and help text.

The engine counts under plain keys (``EngineStats.counters``: ``appended_records_total``,
``disk_used_ratio``…); the node publishes each as ``lcs_<key>``. Listing them here, with
their meaning, is what gives every metric a HELP line and lets a counter be published
at 0 before it first moves (a counter the engine never incremented in this process *is*
0). ``docs/metrics.md`` documents the same list; a test checks that the two agree.

Names follow Prometheus conventions: base units (bytes, seconds), ``_total`` counters,
ratios 0–1, all prefixed ``lcs_``.
"""

from __future__ import annotations

PREFIX = "lcs_"

# ShardStats attribute → (metric, help); labels namespace, shard.
SHARD_GAUGES: dict[str, tuple[str, str]] = {
    "log_start_offset": ("lcs_shard_log_start_offset", "First offset still stored in the shard."),
    "end_offset": ("lcs_shard_end_offset", "Offset the shard's next appended record will get."),
    "record_count": ("lcs_shard_stored_records", "Records stored in the shard (live and not yet reclaimed)."),
    "live_count": ("lcs_shard_live_records", "Records of the shard neither expired nor deleted (what reads return)."),
    "size_bytes": ("lcs_shard_stored_bytes", "Bytes stored in the shard's segments."),
    "local_bytes": (
        "lcs_shard_local_bytes",
        "Stored bytes of the shard with a local file (the active segment included); + remote-only = stored.",
    ),
    "remote_only_bytes": (
        "lcs_shard_remote_only_bytes",
        "Stored bytes of the shard only in the object store (local copy dropped); + local = stored.",
    ),
    "segment_count": ("lcs_shard_segments", "Segments of the shard, the active one included."),
    "expired_records": ("lcs_shard_expired_records", "Records expired but not yet reclaimed."),
    "expired_bytes": ("lcs_shard_expired_bytes", "Bytes of records expired but not yet reclaimed."),
    "expired_ratio": ("lcs_shard_expired_ratio", "Expired-not-reclaimed records / stored records (0-1)."),
    "expired_bytes_ratio": ("lcs_shard_expired_bytes_ratio", "Expired-not-reclaimed bytes / stored bytes (0-1)."),
}
SHARD_FAILED = (
    "lcs_shard_failed",
    "1 while the shard is stopped by a failure (a corrupt segment, a failed write): its reads and appends "
    "fail until the node restarts; else 0.",
)

# BacklogInfo attribute → (metric, help, divisor to base units);
# labels namespace, subscription, shard.
BACKLOG_GAUGES: dict[str, tuple[str, str, int]] = {
    "messages": (
        "lcs_subscription_backlog_messages",
        "Offsets after the subscription's cursor still stored in the shard (unacknowledged messages).",
        1,
    ),
    "live_messages": (
        "lcs_subscription_backlog_live_messages",
        "Records after the cursor a consumer will still receive (compacted and expired ones excluded).",
        1,
    ),
    "bytes": ("lcs_subscription_backlog_bytes", "Stored bytes after the subscription's cursor.", 1),
    "age_ms": (
        "lcs_subscription_backlog_age_seconds",
        "Age of the oldest unacknowledged message still visible (0 when none).",
        1000,
    ),
}

# DiskStatus attribute → (metric, help): the disk as measured at the scrape.
DISK_GAUGES: dict[str, tuple[str, str]] = {
    "used_bytes": (
        "lcs_disk_used_bytes",
        "Disk bytes used: every file under the data directory with a quota (--disk-capacity), else the "
        "filesystem's used bytes.",
    ),
    "capacity_bytes": (
        "lcs_disk_capacity_bytes",
        "Disk capacity: the quota, else the filesystem's used plus available bytes.",
    ),
    "used_ratio": (
        "lcs_disk_used_ratio",
        "lcs_disk_used_bytes / lcs_disk_capacity_bytes (0-1), compared with the node policy's disk ratios.",
    ),
    "disk_full": (
        "lcs_disk_full",
        "1 while appends are refused (disk use above lcs_disk_warning_ratio at the last measurement); else 0.",
    ),
    "pending_delete_bytes": (
        "lcs_disk_pending_delete_bytes",
        "Bytes of deleted segment files not yet removed (.deleted, waiting for a delay or a reader); part of "
        "lcs_disk_used_bytes.",
    ),
}
# NodePolicy field → (metric, help): the thresholds the disk figures are compared with.
POLICY_GAUGES: dict[str, tuple[str, str]] = {
    "disk_max_used_ratio": (
        "lcs_disk_max_used_ratio",
        "Node policy: above this disk use the file cleaner deletes expired segments early (0-1).",
    ),
    "disk_clean_forcibly_ratio": (
        "lcs_disk_clean_forcibly_ratio",
        "Node policy: above this disk use the file cleaner deletes the oldest segments, expired or not (0-1).",
    ),
    "disk_warning_ratio": (
        "lcs_disk_warning_ratio",
        "Node policy: above this disk use appends are refused (lcs_disk_full) (0-1).",
    ),
}

# Engine counter keys (EngineStats.counters) → help. Published as lcs_<key>, 0 until they move.
ENGINE_COUNTERS: dict[str, str] = {
    # appends and reads
    "append_groups_total": "Group commits: one write and one fsync for one or more produce batches.",
    "append_batches_total": "Produce batches appended.",
    "appended_records_total": "Records appended.",
    "appended_bytes_total": "Bytes appended (encoded record batches).",
    "appends_rejected_disk_full_total": "Appends refused because disk use was above disk_warning_ratio.",
    "read_requests_total": "Offset reads (fetches) served by the engine.",
    "fsyncs_total": "fsync calls on segment files.",
    # segments
    "segment_rolls_total": "Active segments sealed and replaced by a new one.",
    "segments_rewritten_total": "Sealed segments rewritten without some of their records (compaction, reclaim).",
    "segments_deleted_total": "Segments deleted from a log (retention, file cleaning, reclaim).",
    "segments_destroyed_forcibly_total": (
        "Deleted segment files removed while a reader still held them (after destroy_forcibly_after_ms)."
    ),
    "corrupt_segments_total": "Damaged segments found (checksum or framing error); their shard stops.",
    "namespaces_deleted_total": "Namespaces deleted.",
    # recovery at open
    "recovery_truncations_total": "Torn segment tails truncated when the node opened its data directory.",
    "recovery_truncated_bytes_total": "Bytes of torn segment tails truncated at open.",
    "recovery_reindexed_batches_total": "Batches indexed again at open (the index was behind the data).",
    "recovery_index_past_data_total": "Offsets the index held past the end of the data at open (dropped).",
    "recovery_swaps_finished_total": "Interrupted segment rewrites completed at open.",
    # TTL scan and read checks (the delete queue)
    "ttl_scan_runs_total": "TTL scans run.",
    "ttl_scan_entries_scanned_total": "TTL index entries read by TTL scans.",
    "ttl_scan_expired_records_total": "Expired records marked dead by TTL scans.",
    "ttl_scan_duration_seconds_total": "Time spent in TTL scans.",
    "ttl_scan_pauses_total": "Pauses a TTL scan made to let appends run.",
    "ttl_scan_waits_total": "Pauses of a TTL scan that waited for appends in flight.",
    "index_entries_deleted_total": "Index entries of expired records deleted (TTL scans and read checks).",
    "read_checks_enqueued_total": "Expired records found by reads and queued for deletion (the delete queue).",
    "read_check_drops_total": "Expired records not queued because the delete queue was full.",
    "read_check_expired_records_total": "Expired records deleted from the delete queue.",
    # retention, file cleaning, reclaim, compaction
    "retention_segments_deleted_total": "Segments deleted by retention (time or size).",
    "retention_bytes_deleted_total": "Bytes of segments deleted by retention.",
    "cleaner_runs_total": "File cleaner runs.",
    "cleaner_segments_deleted_total": "Segments deleted by the file cleaner under disk pressure.",
    "cleaner_bytes_deleted_total": "Bytes of segments deleted by the file cleaner.",
    "cleaner_forced_deletes_total": "Unexpired segments deleted by the file cleaner above disk_clean_forcibly_ratio.",
    "files_removed_total": "Deleted segment files removed from disk.",
    "files_removed_bytes_total": "Bytes of deleted segment files removed from disk.",
    "reclaim_segments_deleted_total": "Wholly expired segments dropped by reclaim.",
    "reclaim_segments_rewritten_total": "Partly expired segments rewritten by reclaim.",
    "reclaim_bytes_total": "Bytes reclaimed by reclaim (dropped and rewritten segments).",
    "compaction_runs_total": "Key compaction runs.",
    "compaction_bytes_reclaimed_total": "Bytes reclaimed by key compaction.",
    "compaction_records_removed_total": "Records removed by key compaction (superseded keys, tombstones).",
    "compaction_rounds_total": "Rounds of key compaction (a run takes one round per key-map budget).",
    "compaction_duration_seconds_total": "Time spent in key compaction.",
    # subscriptions
    "subscription_ttl_expired_total": "Messages acknowledged on subscriptions by the message TTL.",
    "backlog_evictions_total": "Subscription cursors moved by the consumer_backlog_eviction quota policy.",
    "producer_held_total": "Appends held by a producer_request_hold backlog quota.",
    "producer_rejected_total": "Appends refused by a backlog quota.",
    # tiered storage (docs/tiered-storage.md)
    "tier_segments_offloaded_total": "Sealed segments uploaded to the object store and verified.",
    "tier_bytes_offloaded_total": "Bytes of segments uploaded to the object store and verified (upload rate: rate()).",
    "tier_offload_failures_total": "Segment uploads that failed (the segment stays local and is retried).",
    "tier_offload_retries_total": "Offload steps that tried again once the backoff after a failed one had passed.",
    "tier_offload_deferred_total": "Offload steps that did not run because the object store was backing off.",
    "tier_local_copies_dropped_total": "Local copies of offloaded segments removed (local retention, disk pressure).",
    "tier_objects_deleted_total": "Objects deleted from the object store (retention, TTL, rewrites).",
    "tier_cache_hits_total": "Reads of offloaded data served from a block in the read cache.",
    "tier_cache_misses_total": "Reads of offloaded data that fetched a block from the object store.",
    "tier_cache_evictions_total": "Blocks evicted from the read cache to stay within tier_cache_bytes.",
    "tier_fetched_bytes_total": "Bytes fetched from the object store by reads (download rate: rate()).",
    "tier_fetch_failures_total": "Ranged reads from the object store that failed.",
    "tier_reads_moved_to_remote_total": "Reads that went on from the object store after their local copy went.",
    "tier_segments_recalled_total": "Offloaded segments downloaded, verified and made local again.",
    "tier_bytes_recalled_total": "Bytes downloaded by recalls of offloaded segments (download rate: rate()).",
    "tier_recall_failures_total": "Segment recalls that failed (the segment stays in the object store only).",
}

# Engine keys whose metric is not lcs_<key>: the unit goes last, before _total (Prometheus's
# convention; /v1/stats keeps the engine's keys).
RENAMED: dict[str, str] = {
    "retention_bytes_deleted_total": "lcs_retention_deleted_bytes_total",
    "cleaner_bytes_deleted_total": "lcs_cleaner_deleted_bytes_total",
    "compaction_bytes_reclaimed_total": "lcs_compaction_reclaimed_bytes_total",
    "tier_bytes_offloaded_total": "lcs_tier_offloaded_bytes_total",
    "tier_bytes_recalled_total": "lcs_tier_recalled_bytes_total",
}


def metric_name(key: str) -> str:
    """The metric publishing the engine figure ``key``."""
    return RENAMED.get(key, PREFIX + key)


# Engine gauge keys → help. Published as lcs_<key> when the engine reports them.
ENGINE_GAUGES: dict[str, str] = {
    "failed_shards": "Shards stopped by a failure (the count of lcs_shard_failed == 1).",
    "read_check_queue_length": "Expired records waiting in the delete queue.",
    "ttl_scan_last_duration_seconds": "Duration of the last TTL scan.",
    "ttl_scan_last_expired_records": "Expired records marked dead by the last TTL scan.",
    "tier_local_bytes": "Bytes of segments with a local copy (the active segments included).",
    "tier_remote_bytes": "Bytes of sealed segments in the object store (with or without a local copy).",
    "tier_remote_only_bytes": "Bytes of sealed segments only in the object store (local copy dropped).",
    "tier_offload_pending_segments": "Sealed segments of namespaces with remote storage not yet offloaded.",
    "tier_offload_lag_seconds": (
        "Offload lag: seconds since the oldest sealed segment not yet offloaded (remote storage enabled) was last "
        "written; 0 when none waits."
    ),
    "tier_cache_bytes": "Bytes of object blocks held in the read cache (bounded by tier_cache_bytes).",
}

# Engine keys never published as their own metric: the disk figures come fresh from DiskStatus
# (DISK_GAUGES), and a rate is Prometheus's to compute (rate(lcs_ttl_scan_expired_records_total)).
NOT_PUBLISHED = frozenset(
    {
        "disk_used_bytes",
        "disk_capacity_bytes",
        "disk_used_ratio",
        "disk_full",
        "disk_pending_delete_bytes",
        "ttl_scan_last_delete_rate_per_second",
    }
)
