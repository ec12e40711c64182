from django.contrib import admin

from backend.apps.nodes.models import StorageNode


@admin.register(StorageNode)
class StorageNodeAdmin(admin.ModelAdmin):
    list_display = ("name", "url", "healthy", "last_seen_at", "policy_sync_state", "policy_version")
    exclude = ("token",)
