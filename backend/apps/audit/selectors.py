"""Reads of the audit log."""

from django.db.models import QuerySet

from backend.apps.audit.models import AuditEntry


def audit_entries() -> QuerySet[AuditEntry]:
    return AuditEntry.objects.select_related("actor").order_by("-at", "-id")
