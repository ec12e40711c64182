from django.apps import AppConfig


class ReportsConfig(AppConfig):
    name = "backend.apps.reports"
    label = "reports"

    def ready(self) -> None:
        # Django app loading: apps.py is imported while the registry fills, before the models it needs exist.
        # Registers the reports tasks, which the services queue by name (backend.apps.core.queueing).
        from backend.apps.reports import tasks  # noqa: F401
