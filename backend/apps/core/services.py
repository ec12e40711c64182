"""Writes of the core app: heartbeats, role groups and platform schedules."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from backend.apps.core.models import Heartbeat
from backend.apps.core.roles import ROLES

BEAT_HEARTBEAT = "beat"

# name → (task path, interval seconds); platform-wide periodic tasks.
PLATFORM_SCHEDULES: dict[str, tuple[str, int]] = {
    "platform: beat heartbeat": ("backend.apps.core.tasks.beat_heartbeat", settings.BEAT_HEARTBEAT_INTERVAL_S),
    "platform: push pending namespaces": ("backend.apps.namespaces.tasks.push_pending_namespaces", 10),
    # At the metrics interval, so segments catch up with the figures the collection stores (incremental).
    "platform: sync segment catalog": (
        "backend.apps.catalog.tasks.sync_catalog",
        int(getattr(settings, "METRICS_INTERVAL_S", 15)),
    ),
    "platform: reap stale lifecycle runs": ("backend.apps.lifecycle.tasks.reap_stale_runs", 60),
    "platform: collect metrics": (
        "backend.apps.metrics.tasks.collect_metrics",
        int(getattr(settings, "METRICS_INTERVAL_S", 15)),
    ),
    "platform: downsample metrics": ("backend.apps.metrics.tasks.downsample_metrics", 300),
    "platform: evaluate alerts": (
        "backend.apps.alerts.tasks.evaluate_alerts",
        int(getattr(settings, "ALERTS_EVAL_INTERVAL_S", 60)),
    ),
    "platform: spark lake-export": (
        "backend.apps.reports.tasks.scheduled_lake_export",
        int(getattr(settings, "SPARK_LAKE_EXPORT_INTERVAL_S", 86400)),
    ),
    "platform: spark lifecycle-report": (
        "backend.apps.reports.tasks.scheduled_lifecycle_report",
        int(getattr(settings, "SPARK_LIFECYCLE_REPORT_INTERVAL_S", 86400)),
    ),
}


def record_heartbeat(name: str) -> Heartbeat:
    beat, _ = Heartbeat.objects.update_or_create(name=name, defaults={"at": timezone.now()})
    return beat


def upsert_interval_task(
    name: str, task: str, every_s: int, kwargs: dict[str, Any] | None = None, *, expire_s: int | None = None
) -> PeriodicTask:
    """Create or update a periodic task in django-celery-beat's scheduler (read by beat at once). With
    ``expire_s``, a message of it not started within that many seconds is dropped (the next one comes)."""
    schedule, _ = IntervalSchedule.objects.get_or_create(every=every_s, period=IntervalSchedule.SECONDS)
    periodic, _ = PeriodicTask.objects.update_or_create(
        name=name,
        defaults={
            "task": task,
            "interval": schedule,
            "kwargs": json.dumps(kwargs or {}),
            "enabled": True,
            "expire_seconds": expire_s,
        },
    )
    return periodic


@transaction.atomic
def ensure_platform_defaults(**_: Any) -> None:
    """Idempotent: role groups and platform schedules exist (runs after every migrate)."""
    for role in ROLES:
        Group.objects.get_or_create(name=role)
    for name, (task, every_s) in PLATFORM_SCHEDULES.items():
        upsert_interval_task(name, task, every_s)
