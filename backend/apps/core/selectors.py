"""Reads of the core app: the health of every component of the system."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

# The project's Celery app (backend.config.celery), current once Django's settings load: the apps never import
# backend.config, whose URLs import them.
from celery import current_app as celery_app
from django.conf import settings
from django.db import connection
from django.utils import timezone
from kombu import Connection

from backend.apps.core.models import Heartbeat
from backend.apps.core.services import BEAT_HEARTBEAT


@dataclass
class ComponentHealth:
    ok: bool
    detail: str
    last_heartbeat: datetime | None = None


def check_database() -> ComponentHealth:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return ComponentHealth(True, f"{connection.vendor} reachable")
    except Exception as exc:  # any driver error means "down"
        return ComponentHealth(False, f"{connection.vendor}: {exc}")


def check_broker(timeout_s: float = 2) -> ComponentHealth:
    url = settings.CELERY_BROKER_URL
    transport = url.split("://", 1)[0]
    options = {**settings.CELERY_BROKER_TRANSPORT_OPTIONS, "socket_timeout": timeout_s}
    try:
        with Connection(url, transport_options=options, connect_timeout=timeout_s) as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout_s)
        return ComponentHealth(True, f"{transport} broker reachable")
    except Exception as exc:
        return ComponentHealth(False, f"{transport} broker: {exc}")


def readiness() -> dict[str, ComponentHealth]:
    """What the web needs to serve requests: its database and its broker (checked with short timeouts, so
    a probe answers within about a second). Nodes, worker and beat are reported by ``/api/health``."""
    return {"database": check_database(), "broker": check_broker(timeout_s=0.5)}


def check_worker() -> ComponentHealth:
    try:
        replies = celery_app.control.ping(timeout=1.5)
    except Exception as exc:
        return ComponentHealth(False, f"ping failed: {exc}")
    if not replies:
        return ComponentHealth(False, "no Celery worker answered a ping")
    return ComponentHealth(True, f"{len(replies)} worker(s): " + ", ".join(sorted(k for r in replies for k in r)))


def check_beat() -> ComponentHealth:
    beat = Heartbeat.objects.filter(name=BEAT_HEARTBEAT).first()
    if beat is None:
        return ComponentHealth(False, "no heartbeat recorded yet: is celery beat running?")
    age = (timezone.now() - beat.at).total_seconds()
    ok = age <= settings.BEAT_HEARTBEAT_STALE_S
    detail = f"last heartbeat {age:.0f}s ago" + ("" if ok else f" (stale after {settings.BEAT_HEARTBEAT_STALE_S}s)")
    return ComponentHealth(ok, detail, beat.at)
