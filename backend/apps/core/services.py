"""Writes of the core app: heartbeats, role groups and platform schedules."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from backend.apps.core.models import Heartbeat
from backend.apps.core.roles import ROLES

BEAT_HEARTBEAT = "beat"


@dataclass(frozen=True)
class PlatformSchedule:
    """A platform-wide periodic task: every ``every_s`` seconds or at a ``cron`` time (five crontab fields)."""

    task: str
    every_s: int | None = None
    cron: str | None = None


METRICS_INTERVAL_S = settings.METRICS_INTERVAL_S
PLATFORM_SCHEDULES: dict[str, PlatformSchedule] = {
    "platform: beat heartbeat": PlatformSchedule(
        "backend.apps.core.tasks.beat_heartbeat", settings.BEAT_HEARTBEAT_INTERVAL_S
    ),
    "platform: push pending namespaces": PlatformSchedule("backend.apps.namespaces.tasks.push_pending_namespaces", 10),
    # At the metrics interval, so segments catch up with the figures the collection stores (incremental).
    "platform: sync segment catalog": PlatformSchedule("backend.apps.catalog.tasks.sync_catalog", METRICS_INTERVAL_S),
    "platform: reap stale lifecycle runs": PlatformSchedule("backend.apps.lifecycle.tasks.reap_stale_runs", 60),
    "platform: collect metrics": PlatformSchedule("backend.apps.metrics.tasks.collect_metrics", METRICS_INTERVAL_S),
    "platform: downsample metrics": PlatformSchedule("backend.apps.metrics.tasks.downsample_metrics", 300),
    "platform: evaluate alerts": PlatformSchedule(
        "backend.apps.alerts.tasks.evaluate_alerts", settings.ALERTS_EVAL_INTERVAL_S
    ),
    "platform: spark lake-export": PlatformSchedule(
        "backend.apps.reports.tasks.scheduled_lake_export", cron=settings.SPARK_LAKE_EXPORT_CRON
    ),
    "platform: spark lifecycle-report": PlatformSchedule(
        "backend.apps.reports.tasks.scheduled_lifecycle_report", cron=settings.SPARK_LIFECYCLE_REPORT_CRON
    ),
}


def record_heartbeat(name: str) -> Heartbeat:
    beat, _ = Heartbeat.objects.update_or_create(name=name, defaults={"at": timezone.now()})
    return beat


# A message of an interval task not started within one interval (at least this long, so that clocks a little
# apart never drop a fresh one) expires: after the workers were down or behind, the queued copies are dropped
# rather than run back to back, and the next one comes on time. Daily crontab tasks never expire.
MIN_EXPIRE_S = 30


def interval_expiry_s(every_s: int) -> int:
    return max(every_s, MIN_EXPIRE_S)


def upsert_interval_task(name: str, task: str, every_s: int, kwargs: dict[str, Any] | None = None) -> PeriodicTask:
    """Create or update a periodic task in django-celery-beat's scheduler (read by beat at once); its messages
    expire after ``interval_expiry_s``."""
    schedule, _ = IntervalSchedule.objects.get_or_create(every=every_s, period=IntervalSchedule.SECONDS)
    return _upsert(name, task, kwargs, interval_expiry_s(every_s), interval=schedule, crontab=None)


def upsert_crontab_task(name: str, task: str, cron: str, kwargs: dict[str, Any] | None = None) -> PeriodicTask:
    """Create or update a periodic task at the times of ``cron`` (minute hour day month weekday, in
    ``CELERY_TIMEZONE``); a task that was on an interval moves to the crontab."""
    minute, hour, day_of_month, month_of_year, day_of_week = cron.split()
    schedule, _ = CrontabSchedule.objects.get_or_create(
        minute=minute,
        hour=hour,
        day_of_month=day_of_month,
        month_of_year=month_of_year,
        day_of_week=day_of_week,
        timezone=settings.CELERY_TIMEZONE,
    )
    return _upsert(name, task, kwargs, None, interval=None, crontab=schedule)


def _upsert(name: str, task: str, kwargs: dict[str, Any] | None, expire_s: int | None, **schedule: Any) -> PeriodicTask:
    periodic, _ = PeriodicTask.objects.update_or_create(
        name=name,
        defaults={
            "task": task,
            "kwargs": json.dumps(kwargs or {}),
            "enabled": True,
            "expire_seconds": expire_s,
            **schedule,
        },
    )
    return periodic


@transaction.atomic
def ensure_platform_defaults(**_: Any) -> None:
    """Idempotent: role groups and platform schedules exist (runs after every migrate)."""
    for role in ROLES:
        Group.objects.get_or_create(name=role)
    for name, schedule in PLATFORM_SCHEDULES.items():
        if schedule.cron is not None:
            upsert_crontab_task(name, schedule.task, schedule.cron)
        else:
            assert schedule.every_s is not None
            upsert_interval_task(name, schedule.task, schedule.every_s)
