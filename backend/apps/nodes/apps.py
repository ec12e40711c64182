from django.apps import AppConfig


class NodesConfig(AppConfig):
    name = "backend.apps.nodes"
    label = "nodes"
