"""Django project configuration; importing it also loads the Celery app so that
``@shared_task`` binds to it (``celery -A backend.config``)."""

from backend.config.celery import app as celery_app

__all__ = ["celery_app"]
