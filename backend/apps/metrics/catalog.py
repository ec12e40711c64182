"""The fixed set of series the collector stores (the console's charts and alert evaluation), with their units.

A series is a name plus labels. Levels say which labels it carries:

- ``shard``: node, namespace, shard (one line per shard);
- ``namespace``: namespace (the shards summed, or the ratio of the sums);
- ``node``: node;
- ``queue``: queue (Celery broker queues).

These are the console's history, not an exposition: Prometheus reads the nodes'
figures on the nodes' own ``/metrics`` and the control plane's own series on
the web's (``exposition``; ``docs/metrics.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

SHARD, NAMESPACE, NODE, QUEUE = "shard", "namespace", "node", "queue"


@dataclass(frozen=True)
class SeriesDef:
    name: str
    levels: tuple[str, ...]
    unit: str  # ratio | bytes | messages | count | seconds | per_second
    help: str
    counter: bool = False


SERIES: dict[str, SeriesDef] = {
    s.name: s
    for s in [
        # per shard, and per namespace (sums; the ratio of the sums)
        SeriesDef("expired_ratio", (SHARD, NAMESPACE), "ratio", "Expired but not yet reclaimed records ÷ stored"),
        SeriesDef(
            "expired_bytes_ratio", (SHARD, NAMESPACE), "ratio", "Bytes of expired records not yet reclaimed ÷ stored"
        ),
        SeriesDef("expired_records", (SHARD, NAMESPACE), "count", "Expired records not yet reclaimed"),
        SeriesDef("expired_bytes", (SHARD, NAMESPACE), "bytes", "Bytes of expired records not yet reclaimed"),
        SeriesDef("stored_bytes", (SHARD, NAMESPACE), "bytes", "Bytes stored"),
        # Where the stored bytes are (tiered storage): local + remote only = stored, from the same answer.
        SeriesDef("local_bytes", (SHARD, NAMESPACE), "bytes", "Stored bytes with a local file"),
        SeriesDef("remote_only_bytes", (SHARD, NAMESPACE), "bytes", "Stored bytes only in the object store"),
        SeriesDef("stored_records", (SHARD, NAMESPACE), "count", "Records stored (live and not yet reclaimed)"),
        SeriesDef("live_records", (SHARD, NAMESPACE), "count", "Records neither expired nor deleted"),
        SeriesDef("segments", (SHARD, NAMESPACE), "count", "Segments"),
        SeriesDef("log_start_offset", (SHARD,), "count", "First offset still stored"),
        SeriesDef("end_offset", (SHARD,), "count", "Offset the next record will get"),
        # Backlog (DESIGN §3 "Figures", Pulsar's msgBacklog): a shard's is the sum over the subscriptions on
        # it, a namespace's the sum over its subscriptions (= over its shards); the age is the oldest one's.
        SeriesDef("backlog_messages", (SHARD, NAMESPACE), "messages", "Subscription backlog: offset distance, summed"),
        SeriesDef(
            "backlog_live_messages", (SHARD, NAMESPACE), "messages", "Subscription backlog: live records, summed"
        ),
        SeriesDef("backlog_bytes", (SHARD, NAMESPACE), "bytes", "Subscription backlog in bytes, summed"),
        SeriesDef(
            "subscription_backlog_bytes_max",
            (NAMESPACE,),
            "bytes",
            "The largest subscription's backlog bytes over its shards: what backlog_quota_bytes limits",
        ),
        SeriesDef("backlog_age_seconds", (SHARD, NAMESPACE), "seconds", "Age of the oldest unacknowledged message"),
        # from the control plane's task runs: per namespace (scans of one namespace) and per node (the
        # node-wide sweeps: scheduled and due scans)
        SeriesDef("scan_duration_seconds", (NAMESPACE, NODE), "seconds", "TTL-index scan: running time, else the last"),
        # per node
        SeriesDef("up", (NODE,), "count", "1 when the node answered the last collection"),
        SeriesDef("disk_used_ratio", (NODE,), "ratio", "Disk use of the data directory"),
        SeriesDef("disk_used_bytes", (NODE,), "bytes", "Disk bytes used"),
        SeriesDef("disk_capacity_bytes", (NODE,), "bytes", "Disk capacity"),
        SeriesDef("delete_queue_length", (NODE,), "count", "Index clean-ups queued by reads"),
        SeriesDef("delete_queue_drops_total", (NODE,), "count", "Clean-ups dropped on a full queue", True),
        SeriesDef("scan_runs_total", (NODE,), "count", "TTL-index scans run", True),
        SeriesDef("scan_deleted_records_total", (NODE,), "count", "Records deleted by TTL-index scans", True),
        SeriesDef("delete_rate", (NODE,), "per_second", "Records deleted per second (last interval)"),
        SeriesDef("compaction_runs_total", (NODE,), "count", "Compaction runs", True),
        SeriesDef("compaction_reclaimed_bytes_total", (NODE,), "bytes", "Bytes reclaimed by compaction", True),
        SeriesDef("reclaimed_bytes_total", (NODE,), "bytes", "Bytes reclaimed by every lifecycle job", True),
        SeriesDef("append_requests_total", (NODE,), "count", "Append requests served", True),
        SeriesDef("append_seconds_total", (NODE,), "seconds", "Time spent serving appends", True),
        SeriesDef("read_requests_total", (NODE,), "count", "Read requests served", True),
        SeriesDef("read_seconds_total", (NODE,), "seconds", "Time spent serving reads", True),
        SeriesDef("append_latency_seconds", (NODE,), "seconds", "Mean append latency over the last interval"),
        SeriesDef("read_latency_seconds", (NODE,), "seconds", "Mean read latency over the last interval"),
        # tiered storage (docs/tiered-storage.md): the node's tier gauges and upload failures
        SeriesDef("tier_local_bytes", (NODE,), "bytes", "Bytes of segments with a local copy"),
        SeriesDef("tier_remote_bytes", (NODE,), "bytes", "Bytes of sealed segments in the object store"),
        SeriesDef("tier_remote_only_bytes", (NODE,), "bytes", "Bytes of sealed segments only in the object store"),
        SeriesDef("tier_offload_pending_segments", (NODE,), "count", "Sealed segments waiting to be offloaded"),
        SeriesDef(
            "tier_offload_lag_seconds",
            (NODE,),
            "seconds",
            "Offload lag: how long the oldest sealed segment not yet offloaded has waited",
        ),
        SeriesDef("tier_offload_failures_total", (NODE,), "count", "Segment uploads that failed", True),
        SeriesDef(
            "tier_offload_failure_rate", (NODE,), "per_second", "Segment uploads failed per second (last interval)"
        ),
        # Celery
        SeriesDef("celery_queue_depth", (QUEUE,), "messages", "Messages waiting in a Celery queue"),
    ]
}

# The series the UI may chart (GET /api/metrics/series); no free-form queries.
UI_UNITS = {
    "expired_ratio": "ratio",
    "stored_bytes": "bytes",
    "backlog_messages": "messages",
    "backlog_live_messages": "messages",
    "delete_queue_length": "count",
    "celery_queue_depth": "messages",
    "disk_used_ratio": "ratio",
}
UI_SERIES = tuple(UI_UNITS)

# The engine's figures of a shard (storage_engine.api.ShardStats, a GET /v1/stats "shards" row) → the
# series carrying each, unchanged (DESIGN §3 "Figures"); the catalog's ShardStatus stores the same fields.
SHARD_SERIES: dict[str, str] = {
    "log_start_offset": "log_start_offset",
    "end_offset": "end_offset",
    "record_count": "stored_records",
    "live_count": "live_records",
    "size_bytes": "stored_bytes",
    "local_bytes": "local_bytes",
    "remote_only_bytes": "remote_only_bytes",
    "segment_count": "segments",
    "expired_records": "expired_records",
    "expired_bytes": "expired_bytes",
    "expired_ratio": "expired_ratio",
    "expired_bytes_ratio": "expired_bytes_ratio",
}
# Shard series a namespace's series add up (its ratios are the ratios of these sums; offsets are per shard).
SUMMED_SHARD_SERIES = (
    "stored_records",
    "live_records",
    "stored_bytes",
    "local_bytes",
    "remote_only_bytes",
    "segments",
    "expired_records",
    "expired_bytes",
)
# The engine's backlog of one subscription on one shard (storage_engine.api.BacklogInfo, a GET /v1/stats
# "subscriptions" row) → the series summing it over subscriptions; the age (``backlog_age_ms``) is a maximum.
BACKLOG_SERIES: dict[str, str] = {
    "backlog_messages": "backlog_messages",
    "backlog_live_messages": "backlog_live_messages",
    "backlog_bytes": "backlog_bytes",
}

# Engine counters (GET /v1/stats "counters") read into node series; the first key present wins.
# The engine grows its counters; missing keys mean "absent", never zero.
NODE_COUNTER_KEYS: dict[str, tuple[str, ...]] = {
    # series → the engine's counter (storage_engine: EngineStats.counters, node GET /v1/stats)
    "disk_used_ratio": ("disk_used_ratio",),
    "disk_used_bytes": ("disk_used_bytes",),
    "disk_capacity_bytes": ("disk_capacity_bytes",),
    "delete_queue_length": ("read_check_queue_length",),
    "delete_queue_drops_total": ("read_check_drops_total",),
    "scan_runs_total": ("ttl_scan_runs_total",),
    "scan_deleted_records_total": ("ttl_scan_expired_records_total",),
    "compaction_runs_total": ("compaction_runs_total",),
    "compaction_reclaimed_bytes_total": ("compaction_bytes_reclaimed_total",),
    "reclaimed_bytes_total": ("reclaim_bytes_total",),
    "tier_local_bytes": ("tier_local_bytes",),
    "tier_remote_bytes": ("tier_remote_bytes",),
    "tier_remote_only_bytes": ("tier_remote_only_bytes",),
    "tier_offload_pending_segments": ("tier_offload_pending_segments",),
    "tier_offload_lag_seconds": ("tier_offload_lag_seconds",),
    "tier_offload_failures_total": ("tier_offload_failures_total",),
}
# Node gauges that change only when segments move between tiers (an offload, a local copy dropped): a change
# makes the catalog sync the node's namespaces (their collected shard figures stay the same).
TIER_MOVE_SERIES = ("tier_remote_bytes", "tier_remote_only_bytes")
# Node HTTP routes (GET /v1/stats "http") that count as appends and as reads.
APPEND_ROUTES = ("produce_shard", "produce")
READ_ROUTES = ("fetch", "read_key", "read_tag", "offset_for_time")
