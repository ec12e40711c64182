from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from backend.apps.core.models import Heartbeat
from backend.apps.core.services import BEAT_HEARTBEAT, record_heartbeat
from backend.apps.nodes.models import StorageNode

COMPONENTS = {"database", "broker", "node", "worker", "beat"}


def test_health_is_public_and_names_every_component(api_as):
    body = api_as(None).get("/api/health").json()
    assert set(body["components"]) == COMPONENTS
    assert body["components"]["database"]["ok"] is True
    assert body["components"]["broker"]["ok"] is True  # the real Redis broker
    # No node registered, no worker, no beat: degraded, and each says why.
    assert body["status"] == "degraded"
    assert "no storage node" in body["components"]["node"]["detail"]
    assert body["components"]["worker"]["ok"] is False
    assert body["components"]["beat"]["ok"] is False


def test_health_reports_a_real_node(api_as, registered_node):
    node = api_as(None).get("/api/health").json()["components"]["node"]
    assert node["ok"] is True, node
    assert registered_node.name in node["detail"]


def test_health_reports_an_unreachable_node(api_as, db):
    StorageNode.objects.create(name="gone", url="http://127.0.0.1:9", token="x")
    node = api_as(None).get("/api/health").json()["components"]["node"]
    assert node["ok"] is False
    assert "gone" in node["detail"] and "unavailable" in node["detail"]


def test_beat_heartbeat_fresh_then_stale(api_as, settings):
    record_heartbeat(BEAT_HEARTBEAT)
    beat = api_as(None).get("/api/health").json()["components"]["beat"]
    assert beat["ok"] is True and beat["last_heartbeat"]
    Heartbeat.objects.filter(name=BEAT_HEARTBEAT).update(
        at=timezone.now() - timedelta(seconds=settings.BEAT_HEARTBEAT_STALE_S + 5)
    )
    beat = api_as(None).get("/api/health").json()["components"]["beat"]
    assert beat["ok"] is False and "stale" in beat["detail"]


def test_platform_schedules_exist_after_migrate(db):
    from django_celery_beat.models import PeriodicTask

    tasks = set(PeriodicTask.objects.values_list("task", flat=True))
    assert "backend.apps.core.tasks.beat_heartbeat" in tasks
    assert "backend.apps.namespaces.tasks.push_pending_namespaces" in tasks


def test_a_frequent_platform_task_expires_after_one_interval(db):
    """A message of a frequent task not started within its interval is dropped (workers were down or behind):
    the next one comes on time instead of a burst of stale copies."""
    from django_celery_beat.models import PeriodicTask

    frequent = PeriodicTask.objects.exclude(interval=None).filter(name__startswith="platform: ")
    assert frequent.count() >= 8
    for task in frequent:
        assert task.expire_seconds == max(task.interval.every, 30), task.name
    assert PeriodicTask.objects.get(name="platform: tick lifecycle schedules").expire_seconds == 30  # every 1 s
    collect = PeriodicTask.objects.get(name="platform: collect metrics")
    assert collect.expire_seconds == max(settings.METRICS_INTERVAL_S, 30)
