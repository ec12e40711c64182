"""Writes of the catalog: incremental sync from the nodes.

A sync compares the node's segments of each shard with the catalog rows and
writes only the difference: new segments are inserted, changed ones updated,
ones gone from the node deleted. An unchanged node touches no rows.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from django.db import transaction
from django.utils import timezone

from backend.apps.catalog.models import Segment, ShardStatus
from backend.apps.nodes.selectors import client_for
from storage_engine.api import SegmentInfo

SYNCED_FIELDS = [
    "last_offset",
    "record_count",
    "live_count",
    "size_bytes",
    "min_timestamp",
    "max_timestamp",
    "max_expire_at",
    "has_unbounded",
    "state",
    "created_at_ms",
    "modified_at_ms",
    "expired_records",
    "expired_bytes",
    "deadline",
    "expired_ratio",
]


@dataclass
class SyncResult:
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0

    def add(self, other: SyncResult) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def _values(info: SegmentInfo) -> dict[str, Any]:
    return {
        "last_offset": info.last_offset,
        "record_count": info.record_count,
        "live_count": info.live_count,
        "size_bytes": info.size_bytes,
        "min_timestamp": info.min_timestamp,
        "max_timestamp": info.max_timestamp,
        "max_expire_at": info.max_expire_at,
        "has_unbounded": info.has_unbounded,
        "state": info.state.value,
        "created_at_ms": info.created_at,
        "modified_at_ms": info.modified_at,
        "expired_records": info.expired_records,
        "expired_bytes": info.expired_bytes,
        "deadline": info.deadline,
        "expired_ratio": info.expired_records / info.record_count if info.record_count else 0.0,
    }


def sync_shard(namespace: Any, shard: int, segments: list[SegmentInfo]) -> SyncResult:
    result = SyncResult()
    existing = {row.base_offset: row for row in Segment.objects.filter(namespace=namespace, shard=shard)}
    to_create, to_update = [], []
    now = timezone.now()
    for info in segments:
        values = _values(info)
        row = existing.pop(info.base_offset, None)
        if row is None:
            to_create.append(Segment(namespace=namespace, shard=shard, base_offset=info.base_offset, **values))
        elif any(getattr(row, k) != v for k, v in values.items()):
            for k, v in values.items():
                setattr(row, k, v)
            row.synced_at = now  # bulk_update does not apply auto_now
            to_update.append(row)
        else:
            result.unchanged += 1
    with transaction.atomic():
        if to_create:
            Segment.objects.bulk_create(to_create, batch_size=1000)
        if to_update:
            Segment.objects.bulk_update(to_update, [*SYNCED_FIELDS, "synced_at"], batch_size=1000)
        if existing:
            Segment.objects.filter(pk__in=[row.pk for row in existing.values()]).delete()
    result.inserted, result.updated, result.deleted = len(to_create), len(to_update), len(existing)
    return result


STATUS_FIELDS = [
    "log_start_offset",
    "end_offset",
    "record_count",
    "live_count",
    "size_bytes",
    "segment_count",
    "expired_records",
    "expired_bytes",
]


def update_shard_status(namespace: Any, shard: int, stats: dict[str, Any]) -> bool:
    """Store a shard's current figures; returns whether anything changed (unchanged → no write)."""
    values = {k: stats.get(k, 0) for k in STATUS_FIELDS}
    row = ShardStatus.objects.filter(namespace=namespace, shard=shard).first()
    if row is None:
        ShardStatus.objects.create(namespace=namespace, shard=shard, **values)
        return True
    if all(getattr(row, k) == v for k, v in values.items()):
        return False
    ShardStatus.objects.filter(pk=row.pk).update(**values, updated_at=timezone.now())
    return True


def sync_namespace(namespace: Any) -> SyncResult:
    """Sync every shard of one namespace from the node it is placed on (raises the client's errors)."""
    from backend.apps.namespaces.selectors import hosting_nodes

    total = SyncResult()
    for node, shards in hosting_nodes(namespace):
        with client_for(node) as client:
            for shard in shards:
                total.add(sync_shard(namespace, shard, client.list_segments(namespace.name, shard)))
                update_shard_status(namespace, shard, client.shard_stats(namespace.name, shard))
    return total


def sync_node(node: Any) -> SyncResult:
    """Sync every namespace with a shard placed on ``node``."""
    from backend.apps.namespaces.models import SyncState
    from backend.apps.namespaces.selectors import namespace_list

    total = SyncResult()
    hosted = namespace_list().filter(placements__node=node, sync_state=SyncState.SYNCED).distinct()
    for namespace in hosted:
        total.add(sync_namespace(namespace))
    return total


def sync_stalest(limit: int = 50) -> SyncResult:
    """Sync up to ``limit`` namespaces, least recently synced first (a bounded periodic step).

    A namespace whose node cannot be reached is skipped until the next round.
    """
    from django.db.models import F, Max

    from backend.apps.namespaces.models import Namespace, SyncState
    from storage_engine.errors import StorageError

    total = SyncResult()
    stalest = (
        Namespace.objects.filter(sync_state=SyncState.SYNCED)
        .select_related("node")
        .annotate(last_sync=Max("shard_status__updated_at"))
        .order_by(F("last_sync").asc(nulls_first=True), "name")[:limit]
    )
    for namespace in stalest:
        try:
            total.add(sync_namespace(namespace))
        except StorageError:
            continue
    return total
