from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "backend.apps.catalog"
    label = "catalog"
