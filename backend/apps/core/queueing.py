"""Queue a Celery task by its registered name, so a services module never imports its app's tasks module.

The shape of every app (HackSoft's Django styleguide): ``tasks.py`` is thin — it takes ids and calls
``services`` — and the services queue the tasks, after the transaction commits. A services module that
imported its tasks module would close a circle between the two files (tasks → services → tasks), hidden
until now by imports inside functions. So each app that queues its own tasks names them in a small
``enqueue.py`` (the names, and the functions that queue them with their queue, countdown or eta): the
services import ``enqueue``, the tasks import ``enqueue`` for their names (``@shared_task(name=...)``), and
neither imports the other.

:func:`queue_task` sends through the task registered under the name — its ``apply_async``, exactly as a call
on the imported task did (the same routing, options and message; a test that patches the task's
``apply_async`` still sees the call). Each app's ``AppConfig.ready`` imports its tasks module, so every
process that loads Django (web, worker, beat, ``manage.py``) has them registered; should one not be, the
message still goes out by name (``send_task``) with the same arguments and routing options.
"""

from __future__ import annotations

from typing import Any

from celery import current_app


def queue_task(name: str, args: tuple[Any, ...] = (), **options: Any) -> None:
    """``apply_async(args, **options)`` on the task registered as ``name`` (``queue``, ``countdown``, ``eta``)."""
    registered = current_app.tasks.get(name)
    if registered is not None:
        registered.apply_async(args, **options)
    else:
        current_app.send_task(name, args=args, **options)
