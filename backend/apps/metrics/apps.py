from django.apps import AppConfig


class MetricsConfig(AppConfig):
    name = "backend.apps.metrics"
    label = "metrics"
