from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "backend.apps.audit"
    label = "audit"

    def ready(self) -> None:
        # Django app loading: apps.py is imported while the registry fills, before the models it needs exist.
        from django.contrib.auth.signals import user_login_failed

        from backend.apps.audit.services import record_denied_write, record_login_failure
        from backend.apps.core.signals import write_denied

        user_login_failed.connect(record_login_failure, dispatch_uid="audit-login-failed")
        write_denied.connect(record_denied_write, dispatch_uid="audit-write-denied")
