from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AlertsConfig(AppConfig):
    name = "backend.apps.alerts"
    label = "alerts"

    def ready(self) -> None:
        # Django app loading: apps.py is imported while the registry fills, before the models it needs exist.
        from backend.apps.alerts.services import ensure_default_rules

        post_migrate.connect(ensure_default_rules, sender=self)
        # The web's /metrics: open alerts and the rules' thresholds, computed at each scrape (app loading too).
        from backend.apps.alerts.exposition import AlertCollector
        from backend.apps.metrics.exposition import register

        register(AlertCollector())
        # Registers the alert tasks, which delivery queues by name (backend.apps.core.queueing).
        from backend.apps.alerts import tasks  # noqa: F401
