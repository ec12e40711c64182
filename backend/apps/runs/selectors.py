"""Reads of task runs."""

from __future__ import annotations

from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery

from backend.apps.runs.models import State, TaskRun


def run_list() -> QuerySet[TaskRun]:
    return TaskRun.objects.select_related("namespace", "node", "started_by")


def last_finished(kind: str) -> Subquery:
    """A subquery: when the namespace's last successful run of ``kind`` finished."""
    runs = TaskRun.objects.filter(namespace=OuterRef("pk"), kind=kind, state=State.SUCCEEDED)
    return Subquery(runs.order_by("-finished_at").values("finished_at")[:1])


def last_run_at(namespace: Any, kind: str) -> Any:
    run = TaskRun.objects.filter(namespace=namespace, kind=kind, state=State.SUCCEEDED).order_by("-finished_at")
    return run.values_list("finished_at", flat=True).first()
