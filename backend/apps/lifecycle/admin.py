from django.contrib import admin
from django.http import HttpRequest

from backend.apps.lifecycle.models import Lease, Schedule


@admin.register(Lease)
class LeaseAdmin(admin.ModelAdmin):
    list_display = ("key", "holder", "expires_at")
    readonly_fields = ("key", "holder", "expires_at")


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    """Derived from the policies (``schedules.derive_schedules``): only ``enabled`` is the admin's to change."""

    list_display = ("kind", "namespace", "node", "interval_s", "next_due", "last_started", "enabled")
    list_filter = ("kind", "enabled")
    readonly_fields = ("namespace", "node", "kind", "interval_s", "next_due", "last_started")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
