from django.contrib import admin

from backend.apps.policies.models import ClusterPolicy


@admin.register(ClusterPolicy)
class ClusterPolicyAdmin(admin.ModelAdmin):
    list_display = ("id", "updated_at", "updated_by")
    readonly_fields = ("overrides", "updated_at", "updated_by")  # edit through the API: it validates and audits
