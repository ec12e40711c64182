"""Writes of the catalog: incremental sync from the nodes, and the shards' figures from each collection.

A sync compares the node's segments of each shard with the catalog rows and
writes only the difference: new segments are inserted, changed ones updated,
ones gone from the node deleted. An unchanged node touches no rows. It runs at
the metrics interval, shards whose figures changed since their last sync
first (:func:`sync_stalest`). Every metrics collection also stores each
shard's figures from the same ``/v1/stats`` answer as its samples
(:func:`record_collected_figures`), so the namespace pages, Overview and the
alerts read one set of numbers.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, fields
from typing import Any

from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import Case, F, IntegerField, Max, Min, Q, When
from django.utils import timezone

from backend.apps.catalog.figures import TIER_SPLIT, ratio
from backend.apps.catalog.models import Segment, ShardStatus
from backend.apps.namespaces.models import Namespace, SyncState
from backend.apps.namespaces.selectors import hosting_nodes, namespace_list
from backend.apps.nodes import gateway
from storage_engine.api import SegmentInfo
from storage_engine.errors import StorageError

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
    "tier",
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
        "expired_ratio": ratio(info.expired_records, info.record_count),
        "tier": info.tier.value,
    }


def sync_shard(namespace: Any, shard: int, segments: list[SegmentInfo]) -> SyncResult:
    """Write the difference between the node's ``segments`` of one shard and the catalog's rows.

    Two syncs of the same shard may overlap (the bootstrap's, the periodic one and the one a metrics
    collection queues, in different processes, all at start-up): both may find a segment missing and
    insert it. The insert is an upsert on the segment's position (``segment_unique_position``), so the
    later one updates the row the earlier one wrote instead of failing with an ``IntegrityError``.
    """
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
            Segment.objects.bulk_create(
                to_create,
                batch_size=1000,
                update_conflicts=True,
                unique_fields=["namespace", "shard", "base_offset"],
                update_fields=[*SYNCED_FIELDS, "synced_at"],
            )
        if to_update:
            Segment.objects.bulk_update(to_update, [*SYNCED_FIELDS, "synced_at"], batch_size=1000)
        if existing:
            Segment.objects.filter(pk__in=[row.pk for row in existing.values()]).delete()
    result.inserted, result.updated, result.deleted = len(to_create), len(to_update), len(existing)
    return result


# The engine's ShardStats fields a ShardStatus carries (a sync and a collection both write them, all of them from
# one node answer: stored = local + remote only holds in every row).
STATUS_FIELDS = [
    "log_start_offset",
    "end_offset",
    "record_count",
    "live_count",
    "size_bytes",
    "segment_count",
    "expired_records",
    "expired_bytes",
    "expired_ratio",
    "expired_bytes_ratio",
    *TIER_SPLIT,
]
# The shard's backlog, summed over its subscriptions: from a collection only.
BACKLOG_FIELDS = ["backlog_messages", "backlog_live_messages", "backlog_bytes"]
RATIO_FIELDS = {"expired_ratio", "expired_bytes_ratio"}


def _status_values(figures: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """The node's values as they are (ratios as floats, counts as integers), 0 for a missing one."""
    return {k: float(figures.get(k) or 0) if k in RATIO_FIELDS else int(figures.get(k) or 0) for k in names}


def update_shard_status(namespace: Any, shard: int, stats: dict[str, Any]) -> bool:
    """Store a shard's current figures (one ``ShardStats`` answer as a dict, its stored bytes and their local /
    remote-only split together); returns whether anything changed (unchanged → no write).

    A metrics collection or another sync may create the shard's row between this one's look and its insert
    (the first sync at start-up races them): the insert then fails on ``shard_status_unique`` inside its own
    savepoint, and the row that won is updated instead."""
    row = ShardStatus.objects.filter(namespace=namespace, shard=shard).first()
    values = _status_values(stats, STATUS_FIELDS)
    if row is None:
        try:
            with transaction.atomic():
                ShardStatus.objects.create(namespace=namespace, shard=shard, **values)
            return True
        except IntegrityError:
            row = ShardStatus.objects.get(namespace=namespace, shard=shard)
    if all(getattr(row, k) == v for k, v in values.items()):
        return False
    ShardStatus.objects.filter(pk=row.pk).update(**values, updated_at=timezone.now())
    return True


def mark_tiers_stale(namespaces: Any) -> int:
    """The shards of ``namespaces`` (a queryset or list) are due for a segment sync: an offload moved their
    segments between tiers, which may change no figure a metrics collection sees (an uploaded segment keeps its
    local copy: its bytes stay local). Returns the shards marked."""
    return ShardStatus.objects.filter(namespace__in=namespaces).update(updated_at=timezone.now())


def record_collected_figures(figures: dict[tuple[str, int], dict[str, Any]], at: Any) -> int:
    """Store the shards' figures of one metrics collection: (namespace, shard) → ``ShardStats`` fields and
    the backlog sums. Rows are created or updated only where a figure changed; every reported row gets
    ``collected_at``. Shards of namespaces the control plane does not know are skipped. Returns how many
    shards are new or had their data change (not only their backlog): their segments are due for a sync.
    """
    if not figures:
        return 0
    names = {ns for ns, _ in figures}
    namespaces = {n.name: n for n in Namespace.objects.filter(name__in=names).only("id", "name", "shards")}
    existing = {
        (row.namespace_id, row.shard): row
        for row in ShardStatus.objects.filter(namespace_id__in=[n.pk for n in namespaces.values()])
    }
    to_create, to_update, seen = [], [], []
    data_changed = 0
    now = timezone.now()
    for (ns, shard), found in sorted(figures.items()):
        namespace = namespaces.get(ns)
        if namespace is None or not 0 <= shard < namespace.shards:
            continue
        values = _status_values(found, [*STATUS_FIELDS, *BACKLOG_FIELDS])
        row = existing.get((namespace.pk, shard))
        if row is None:
            to_create.append(ShardStatus(namespace=namespace, shard=shard, collected_at=at, **values))
            continue
        seen.append(row.pk)
        changed = [k for k, v in values.items() if getattr(row, k) != v]
        if changed:
            for k in changed:
                setattr(row, k, values[k])
            if set(changed) - set(BACKLOG_FIELDS):  # the shard's data changed: its segments are due for a sync
                row.updated_at = now  # bulk_update does not apply auto_now
                data_changed += 1
            to_update.append(row)
    with transaction.atomic():
        if to_create:
            # A sync may have created a row meanwhile (start-up): this collection's figures update it.
            ShardStatus.objects.bulk_create(
                to_create,
                batch_size=500,
                update_conflicts=True,
                unique_fields=["namespace", "shard"],
                update_fields=[*STATUS_FIELDS, *BACKLOG_FIELDS, "collected_at", "updated_at"],
            )
        if to_update:
            ShardStatus.objects.bulk_update(to_update, [*STATUS_FIELDS, *BACKLOG_FIELDS, "updated_at"], batch_size=500)
        if seen:
            ShardStatus.objects.filter(pk__in=seen).update(collected_at=at)
    return len(to_create) + data_changed


def sync_namespace(namespace: Any) -> SyncResult:
    """Sync every shard of one namespace from the node it is placed on (raises the client's errors)."""
    total = SyncResult()

    def sync_hosted(client: Any, shards: list[int]) -> None:
        for shard in shards:
            result = sync_shard(namespace, shard, client.list_segments(namespace.name, shard))
            changed = update_shard_status(namespace, shard, client.shard_stats(namespace.name, shard))
            _mark_synced(namespace, shard, changed or result.inserted + result.updated + result.deleted > 0)
            total.add(result)

    gateway.on_each(hosting_nodes(namespace), sync_hosted)
    return total


def _unsynced(namespace: Any, shard: int) -> Any:
    """The shard's status row if its segments were never synced or its figures changed since."""
    rows = ShardStatus.objects.filter(namespace=namespace, shard=shard)
    return rows.filter(Q(segments_synced_at__isnull=True) | Q(updated_at__gt=F("segments_synced_at")))


def _mark_synced(namespace: Any, shard: int, changed: bool) -> None:
    """Note the shard's segments as synced now, when that news something (an unchanged, already clean
    shard writes nothing)."""
    if changed or _unsynced(namespace, shard).exists():
        ShardStatus.objects.filter(namespace=namespace, shard=shard).update(segments_synced_at=timezone.now())


def sync_node(node: Any) -> SyncResult:
    """Sync every namespace with a shard placed on ``node``."""
    total = SyncResult()
    hosted = namespace_list().filter(placements__node=node, sync_state=SyncState.SYNCED).distinct()
    for namespace in hosted:
        total.add(sync_namespace(namespace))
    return total


SYNC_ROTATION = "catalog:sync-rotation"  # cache key: the last up-to-date namespace a periodic sync visited


def sync_stalest(limit: int = 50) -> SyncResult:
    """Sync up to ``limit`` namespaces (a bounded periodic step, at the metrics interval).

    First those never synced or whose shard figures changed since their last sync (a collection saw new
    records, expiry or reclamation), least recently synced first; the rest of the batch goes round the
    up-to-date ones in name order, continuing where the previous run stopped. A namespace whose node
    cannot be reached is skipped until the next round.
    """
    synced = (
        Namespace.objects.filter(sync_state=SyncState.SYNCED)
        .select_related("node")
        .annotate(last_sync=Min("shard_status__segments_synced_at"), changed=Max("shard_status__updated_at"))
        .annotate(
            stale=Case(
                When(Q(last_sync__isnull=True) | Q(changed__gt=F("last_sync")), then=1),
                default=0,
                output_field=IntegerField(),
            )
        )
    )
    batch = list(synced.filter(stale=1).order_by(F("last_sync").asc(nulls_first=True), "name")[:limit])
    if len(batch) < limit:
        try:
            after = str(cache.get(SYNC_ROTATION) or "")
        except Exception:  # no cache: start from the first name
            after = ""
        current = synced.filter(stale=0).order_by("name")
        more = list(current.filter(name__gt=after)[: limit - len(batch)])
        more += list(current.filter(name__lte=after)[: limit - len(batch) - len(more)])
        if more:
            with contextlib.suppress(Exception):
                cache.set(SYNC_ROTATION, more[-1].name, None)
        batch += more
    total = SyncResult()
    for namespace in batch:
        try:
            total.add(sync_namespace(namespace))
        except StorageError:
            continue
    return total
