from django.contrib import admin

from backend.apps.reports.models import LifecycleReportRow


@admin.register(LifecycleReportRow)
class LifecycleReportRowAdmin(admin.ModelAdmin):
    """Read-only: rows come from the ``lifecycle-report`` Spark job."""

    list_display = ("namespace", "day", "records", "bytes", "expired_ratio", "duplicate_key_ratio", "generated_at")
    list_filter = ("day",)
    search_fields = ("namespace__name",)
    readonly_fields = [f.name for f in LifecycleReportRow._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
