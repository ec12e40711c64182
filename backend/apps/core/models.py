from django.db import models


class Heartbeat(models.Model):
    """The last time a periodic process proved it was alive (e.g. Celery beat)."""

    name = models.CharField(max_length=100, unique=True)
    at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} @ {self.at.isoformat()}"
