from django.apps import AppConfig


class LifecycleConfig(AppConfig):
    name = "backend.apps.lifecycle"
    label = "lifecycle"
