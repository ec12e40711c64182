from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "backend.apps.runs"
    label = "runs"
