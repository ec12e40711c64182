"""Reads of the catalog: segments with filters, and per-namespace figures. Database reads only."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Min, Q, QuerySet, Sum
from django.db.models.functions import Coalesce

from backend.apps.catalog.figures import TIER_SPLIT, ratio
from backend.apps.catalog.models import Segment, ShardStatus
from backend.apps.namespaces.selectors import namespace_list
from backend.apps.runs.models import Kind
from backend.apps.runs.selectors import last_change, last_finished


def segment_list() -> QuerySet[Segment]:
    return Segment.objects.select_related("namespace")


def shard_statuses(namespace: Any) -> QuerySet[ShardStatus]:
    return ShardStatus.objects.filter(namespace=namespace).order_by("shard")


def with_usage(namespaces: QuerySet[Any]) -> QuerySet[Any]:
    """Annotate namespaces with their shards' figures summed (one query): stored bytes and records, live and
    expired records and bytes, segments, the stored bytes' local / remote-only split, and the subscription backlog
    (messages, live, bytes). Every figure is a sum over the same rows, so stored = local + remote only."""
    return namespaces.annotate(
        stored_bytes=Coalesce(Sum("shard_status__size_bytes"), 0),
        stored_records=Coalesce(Sum("shard_status__record_count"), 0),
        live_records=Coalesce(Sum("shard_status__live_count"), 0),
        expired_records=Coalesce(Sum("shard_status__expired_records"), 0),
        expired_bytes=Coalesce(Sum("shard_status__expired_bytes"), 0),
        segment_count=Coalesce(Sum("shard_status__segment_count"), 0),
        backlog_messages=Coalesce(Sum("shard_status__backlog_messages"), 0),
        backlog_live_messages=Coalesce(Sum("shard_status__backlog_live_messages"), 0),
        **{name: Coalesce(Sum(f"shard_status__{name}"), 0) for name in TIER_SPLIT},
        shards_reported=Count("shard_status"),
        shards_uncollected=Count("shard_status", filter=Q(shard_status__collected_at__isnull=True)),
        collected_at=Min("shard_status__collected_at"),
    )


def expired_ratio(stored_records: int, expired_records: int) -> float:
    """A namespace's expired ratio: its shards' expired records ÷ their stored records (DESIGN §3, §4)."""
    return ratio(expired_records, stored_records)


def _last(what: str, change: tuple[Any, int | None]) -> dict[str, Any]:
    """``last_<what>_at`` and ``last_<what>_run``: when the run that last did that work changed the namespace,
    and which run it was (the console links to it)."""
    return {f"last_{what}_at": change[0], f"last_{what}_run": change[1]}


def namespace_summary(namespace: Any) -> dict[str, Any]:
    """Figures of one namespace annotated by :func:`with_usage`: the sums of its shards' rows, as the last
    metrics collection (or sync) stored them. The backlog is null until a collection has reported every
    shard."""
    backlog_known = namespace.shards_reported > 0 and namespace.shards_uncollected == 0
    return {
        "name": namespace.name,
        "stored_bytes": namespace.stored_bytes,
        "stored_records": namespace.stored_records,
        "live_records": namespace.live_records,
        "expired_records": namespace.expired_records,
        "expired_bytes": namespace.expired_bytes,
        "expired_ratio": expired_ratio(namespace.stored_records, namespace.expired_records),
        "expired_bytes_ratio": ratio(namespace.expired_bytes, namespace.stored_bytes),
        "segment_count": namespace.segment_count,
        **{name: getattr(namespace, name) for name in TIER_SPLIT},
        "backlog_messages": namespace.backlog_messages if backlog_known else None,
        "backlog_live_messages": namespace.backlog_live_messages if backlog_known else None,
        "collected_at": namespace.collected_at,
        **_last("scan", last_change(namespace, Kind.EXPIRY_SCAN)),
        **_last("compaction", last_change(namespace, Kind.COMPACTION)),
        "shards": list(shard_statuses(namespace)),
    }


def namespace_list_with_usage() -> QuerySet[Any]:
    """Namespaces with size, records, segments and last scan/compaction, in a constant number of queries."""
    return with_usage(namespace_list()).annotate(
        last_scan_at=last_finished(Kind.EXPIRY_SCAN), last_compaction_at=last_finished(Kind.COMPACTION)
    )
