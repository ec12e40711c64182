from django.apps import AppConfig


class NamespacesConfig(AppConfig):
    name = "backend.apps.namespaces"
    label = "namespaces"
