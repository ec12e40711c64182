from django.apps import AppConfig


class PoliciesConfig(AppConfig):
    name = "backend.apps.policies"
    label = "policies"
