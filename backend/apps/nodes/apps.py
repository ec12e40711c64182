from django.apps import AppConfig
from django.db.models.signals import post_migrate


class NodesConfig(AppConfig):
    name = "backend.apps.nodes"
    label = "nodes"

    def ready(self) -> None:
        # Django app loading: apps.py is imported while the registry fills, before the models it needs exist.
        from backend.apps.nodes.services import ensure_node_schedules

        post_migrate.connect(ensure_node_schedules, sender=self)
