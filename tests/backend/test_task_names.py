"""The services queue their app's tasks by name (``backend.apps.core.queueing``, issue 27): each name is that of
a task the app registers, in every process that loads Django, and the message goes through that task."""

from __future__ import annotations

from typing import Any

import pytest
from celery import current_app

from backend.apps.alerts import enqueue as alerts_enqueue
from backend.apps.alerts import tasks as alerts_tasks
from backend.apps.core.queueing import queue_task
from backend.apps.lifecycle import enqueue as lifecycle_enqueue
from backend.apps.lifecycle import tasks as lifecycle_tasks
from backend.apps.reports import enqueue as reports_enqueue
from backend.apps.reports import tasks as reports_tasks

NAMES = [
    (lifecycle_enqueue.LIFECYCLE_STEP, lifecycle_tasks.lifecycle_step),
    (lifecycle_enqueue.DUE_SWEEP, lifecycle_tasks.due_sweep),
    (alerts_enqueue.DELIVER_NOTIFICATION, alerts_tasks.deliver_notification),
    (alerts_enqueue.RESEND_TO_ALERTMANAGER, alerts_tasks.resend_to_alertmanager),
    (reports_enqueue.SPARK_JOB, reports_tasks.spark_job),
]


@pytest.mark.parametrize(("name", "task"), NAMES)
def test_each_name_is_a_registered_task(name: str, task: Any) -> None:
    assert task.name == name  # the default name (module.function) kept: messages in flight still run
    assert current_app.tasks[name] is task._get_current_object()


def test_queue_task_goes_through_the_registered_task(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(lifecycle_tasks.lifecycle_step, "apply_async", lambda args, **kw: calls.append((args, kw)))
    queue_task(lifecycle_enqueue.LIFECYCLE_STEP, (7,), queue="celery-test.node-1", countdown=5)
    assert calls == [((7,), {"queue": "celery-test.node-1", "countdown": 5})]


def test_an_unregistered_name_is_sent_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(current_app, "send_task", lambda name, **kw: sent.append((name, kw)))
    queue_task("backend.apps.nowhere.tasks.gone", (1,), queue="q")
    assert sent == [("backend.apps.nowhere.tasks.gone", {"args": (1,), "queue": "q"})]
