from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "backend.apps.audit"
    label = "audit"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_login_failed

        from backend.apps.audit.services import record_login_failure

        user_login_failed.connect(record_login_failure, dispatch_uid="audit-login-failed")
