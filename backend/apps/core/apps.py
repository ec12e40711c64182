from django.apps import AppConfig
from django.db.models.signals import post_migrate


class CoreConfig(AppConfig):
    name = "backend.apps.core"
    label = "core"

    def ready(self) -> None:
        from backend.apps.core import checks  # noqa: F401  (registers the settings checks)
        from backend.apps.core.services import ensure_platform_defaults

        post_migrate.connect(ensure_platform_defaults, sender=self)
