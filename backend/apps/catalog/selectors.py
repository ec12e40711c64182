"""Reads of the catalog: segments with filters, and per-namespace summaries."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, QuerySet, Sum
from django.db.models.functions import Coalesce

from backend.apps.catalog.models import Segment, ShardStatus


def segment_list() -> QuerySet[Segment]:
    return Segment.objects.select_related("namespace")


def shard_statuses(namespace: Any) -> QuerySet[ShardStatus]:
    return ShardStatus.objects.filter(namespace=namespace).order_by("shard")


def with_usage(namespaces: QuerySet[Any]) -> QuerySet[Any]:
    """Annotate namespaces with stored bytes/records, live records and segment count (one query)."""
    return namespaces.annotate(
        stored_bytes=Coalesce(Sum("shard_status__size_bytes"), 0),
        stored_records=Coalesce(Sum("shard_status__record_count"), 0),
        live_records=Coalesce(Sum("shard_status__live_count"), 0),
        expired_records=Coalesce(Sum("shard_status__expired_records"), 0),
        segment_count=Coalesce(Sum("shard_status__segment_count"), 0),
        shards_reported=Count("shard_status"),
    )


def expired_ratio(stored_records: int, expired_records: int) -> float:
    """Expired but not yet reclaimed ÷ stored, 0–1 (DESIGN §4)."""
    return min(1.0, expired_records / stored_records) if stored_records else 0.0


def namespace_summary(namespace: Any) -> dict[str, Any]:
    """Figures of one namespace annotated by :func:`with_usage`."""
    from backend.apps.runs.selectors import last_run_at

    return {
        "name": namespace.name,
        "stored_bytes": namespace.stored_bytes,
        "stored_records": namespace.stored_records,
        "live_records": namespace.live_records,
        "expired_ratio": expired_ratio(namespace.stored_records, namespace.expired_records),
        "segment_count": namespace.segment_count,
        "backlog_messages": _backlog_messages(namespace),
        "last_scan_at": last_run_at(namespace, "expiry_scan"),
        "last_compaction_at": last_run_at(namespace, "compaction"),
        "shards": list(shard_statuses(namespace)),
    }


def _backlog_messages(namespace: Any) -> int | None:
    """Unacknowledged messages over every subscription and shard, live from the node (None if unreachable)."""
    from backend.apps.namespaces.selectors import subscriptions_with_backlog

    if not namespace.subscriptions.exists():
        return 0
    rows, error = subscriptions_with_backlog(namespace)
    if error:
        return None
    return sum(b["messages"] for row in rows for b in row["backlog"] or [])
