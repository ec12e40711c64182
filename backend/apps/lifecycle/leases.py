"""Leases: locks with an expiry, in the database so they work on SQLite and
PostgreSQL alike and survive a broker restart."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from backend.apps.lifecycle.models import Lease
from backend.apps.namespaces.models import Namespace
from backend.apps.nodes.models import StorageNode


def acquire(key: str, holder: str, ttl_s: float, now: datetime | None = None) -> bool:
    """Take ``key`` for ``holder`` for ``ttl_s`` seconds unless another holder has it unexpired.

    Re-acquiring by the same holder extends the lease; an expired lease is taken over.
    """
    now = now or timezone.now()
    until = now + timedelta(seconds=ttl_s)
    if Lease.objects.filter(Q(expires_at__lte=now) | Q(holder=holder), key=key).update(holder=holder, expires_at=until):
        return True
    try:
        with transaction.atomic():
            Lease.objects.create(key=key, holder=holder, expires_at=until)
        return True
    except IntegrityError:
        return False


def acquire_all(keys: Sequence[str], holder: str, ttl_s: float, now: datetime | None = None) -> bool:
    """All of ``keys`` or none (taken in sorted order, so two jobs never deadlock)."""
    taken: list[str] = []
    for key in sorted(keys):
        if not acquire(key, holder, ttl_s, now):
            release_all(taken, holder)
            return False
        taken.append(key)
    return True


def release_all(keys: Sequence[str], holder: str) -> None:
    Lease.objects.filter(key__in=list(keys), holder=holder).delete()


def shard_keys(namespace: Namespace, shard: int | None) -> list[str]:
    """The leases a job on one shard, or on every shard of a namespace, needs."""
    shards = range(namespace.shards) if shard is None else [shard]
    return [f"shard:{namespace.pk}:{s}" for s in shards]


def node_keys(node: StorageNode, kind: str = "") -> list[str]:
    """A node-level job's lease: one per kind, so a sweep, file cleaning and a disk check of the same node
    may run side by side (the engine runs one lifecycle call at a time anyway)."""
    return [f"node:{node.pk}:{kind}" if kind else f"node:{node.pk}"]
