from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class LifecycleConfig(AppConfig):
    name = "backend.apps.lifecycle"
    label = "lifecycle"

    def ready(self) -> None:
        from backend.apps.core.signals import schedules_changed
        from backend.apps.lifecycle.schedules import ensure_tick_schedule

        schedules_changed.connect(follow_schedule_change, dispatch_uid="lifecycle-schedules")
        post_migrate.connect(ensure_tick_schedule, sender=self)


def follow_schedule_change(
    sender: Any, namespace: Any = None, node: Any = None, everything: bool = False, removed: bool = False, **_: Any
) -> None:
    """Derive the schedule table again from what changed (``core.signals.schedules_changed``). A namespace
    or node about to be deleted takes its rows with it (``Schedule``'s foreign keys cascade); the nodes that
    hosted a deleted namespace are sent on their own afterwards."""
    from backend.apps.lifecycle import schedules

    if removed:
        return
    if everything:
        schedules.derive_schedules()
    elif namespace is not None:
        schedules.derive_schedules(namespace=namespace)
    elif node is not None:
        schedules.derive_schedules(node=node)
