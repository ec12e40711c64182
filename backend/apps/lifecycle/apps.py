from typing import Any

from django.apps import AppConfig


class LifecycleConfig(AppConfig):
    name = "backend.apps.lifecycle"
    label = "lifecycle"

    def ready(self) -> None:
        from backend.apps.core.signals import schedules_changed

        schedules_changed.connect(follow_schedule_change, dispatch_uid="lifecycle-schedules")


def follow_schedule_change(
    sender: Any, namespace: Any = None, node: Any = None, everything: bool = False, removed: bool = False, **_: Any
) -> None:
    """Keep the beat schedules in step with what changed (``core.signals.schedules_changed``)."""
    from backend.apps.lifecycle import services

    if everything:
        services.sync_all_schedules()
    elif namespace is not None and removed:
        services.remove_namespace_schedules(namespace)
    elif namespace is not None:
        services.sync_namespace_schedules(namespace)
    elif node is not None and removed:
        services.remove_node_schedules(node)
    elif node is not None:
        services.sync_node_schedules(node)
