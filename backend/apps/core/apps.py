from celery.signals import task_postrun, task_prerun
from django.apps import AppConfig
from django.core.signals import request_finished, request_started
from django.db.models.signals import post_migrate


class CoreConfig(AppConfig):
    name = "backend.apps.core"
    label = "core"

    def ready(self) -> None:
        # Django app loading: apps.py is imported while the registry fills, before the models it needs exist.
        from backend.apps.core import (
            checks,  # noqa: F401  (registers the settings checks)
            request_ids,
        )
        from backend.apps.core.services import ensure_platform_defaults

        post_migrate.connect(ensure_platform_defaults, sender=self)
        request_started.connect(request_ids.request_started, weak=False)
        request_finished.connect(request_ids.request_finished, weak=False)
        task_prerun.connect(request_ids.task_started, weak=False)
        task_postrun.connect(request_ids.task_finished, weak=False)
