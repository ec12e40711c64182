"""Reads of lifecycle reports."""

from __future__ import annotations

from django.db.models import QuerySet

from backend.apps.namespaces.models import Namespace
from backend.apps.reports.models import LifecycleReportRow


def lifecycle_report(namespace: Namespace, days: int) -> QuerySet[LifecycleReportRow]:
    """The namespace's ``days`` most recent report days, newest first."""
    return LifecycleReportRow.objects.filter(namespace=namespace).order_by("-day")[:days]
