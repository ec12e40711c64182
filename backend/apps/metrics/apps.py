from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_delete


class MetricsConfig(AppConfig):
    name = "backend.apps.metrics"
    label = "metrics"

    def ready(self) -> None:
        # Django app loading: apps.py is imported while the registry fills, before the models it needs exist.
        from backend.apps.namespaces.models import Namespace
        from backend.apps.nodes.models import StorageNode

        post_delete.connect(_namespace_deleted, sender=Namespace, dispatch_uid="metrics-namespace-deleted")
        post_delete.connect(_node_deleted, sender=StorageNode, dispatch_uid="metrics-node-deleted")
        # The web's /metrics: the Celery queues and the task runs, computed at each scrape (app loading too).
        from backend.apps.metrics.exposition import CeleryQueueCollector, TaskRunCollector, register

        register(CeleryQueueCollector())
        register(TaskRunCollector())


def _namespace_deleted(sender: Any, instance: Any, **_: Any) -> None:
    # Django app loading: this module cannot import the models (services does) at its top.
    from backend.apps.metrics.services import forget_series

    forget_series(namespace=instance.name)


def _node_deleted(sender: Any, instance: Any, **_: Any) -> None:
    # Django app loading: this module cannot import the models (services does) at its top.
    from backend.apps.metrics.services import forget_series

    forget_series(node=instance.name)
