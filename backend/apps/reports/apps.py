from django.apps import AppConfig


class ReportsConfig(AppConfig):
    name = "backend.apps.reports"
    label = "reports"
