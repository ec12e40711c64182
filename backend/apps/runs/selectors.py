"""Reads of task runs."""

from __future__ import annotations

from typing import Any

from django.db.models import OuterRef, Q, QuerySet, Subquery

from backend.apps.runs.models import State, TaskRun


def run_list() -> QuerySet[TaskRun]:
    return TaskRun.objects.select_related("namespace", "node", "started_by")


def _runs_covering(namespace: Any, kind: str) -> QuerySet[TaskRun]:
    """Successful runs of ``kind`` that covered the namespace (a model or an ``OuterRef``): runs on the
    namespace (or one of its shards), and node-wide runs (a sweep, a manual node action) on a node hosting
    one of its shards, which go over every namespace there. Dry runs changed nothing: they never count."""
    node_wide = Q(namespace__isnull=True, node__shard_placements__namespace=namespace)
    runs = TaskRun.objects.filter(Q(namespace=namespace) | node_wide, kind=kind, state=State.SUCCEEDED, dry_run=False)
    return runs.filter(finished_at__isnull=False)


def last_finished(kind: str) -> Subquery:
    """A subquery: when the last successful run of ``kind`` covering the namespace finished (see
    :func:`last_run_at`)."""
    return Subquery(_runs_covering(OuterRef("pk"), kind).order_by("-finished_at").values("finished_at")[:1])


def last_run_at(namespace: Any, kind: str) -> Any:
    """When the last successful run of ``kind`` covering the namespace finished: one on the namespace, or a
    node-wide one (e.g. the scheduled expiry-scan sweep) on a node hosting it; ``None`` if none did."""
    runs = _runs_covering(namespace, kind).order_by("-finished_at")
    return runs.values_list("finished_at", flat=True).first()
