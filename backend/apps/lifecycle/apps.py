from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class LifecycleConfig(AppConfig):
    name = "backend.apps.lifecycle"
    label = "lifecycle"

    def ready(self) -> None:
        # Django app loading: apps.py is imported while the registry fills, before the models it needs exist.
        from backend.apps.core.signals import schedules_changed

        # Registers the lifecycle tasks, which the services queue by name (backend.apps.core.queueing).
        from backend.apps.lifecycle import tasks  # noqa: F401
        from backend.apps.lifecycle.schedules import ensure_tick_schedule

        schedules_changed.connect(follow_schedule_change, dispatch_uid="lifecycle-schedules")
        post_migrate.connect(ensure_tick_schedule, sender=self)


def follow_schedule_change(
    sender: Any, namespace: Any = None, node: Any = None, everything: bool = False, removed: bool = False, **_: Any
) -> None:
    """Derive the schedule table again from what changed (``core.signals.schedules_changed``). A namespace
    or node about to be deleted takes its rows with it (``Schedule``'s foreign keys cascade); the nodes that
    hosted a deleted namespace are sent on their own afterwards."""
    # Django app loading: this module cannot import the models (schedules does) at its top.
    from backend.apps.lifecycle import schedules

    if removed:
        return
    if everything:
        schedules.derive_schedules()
    elif namespace is not None:
        schedules.derive_schedules(namespace=namespace)
    elif node is not None:
        schedules.derive_schedules(node=node)
