from django.contrib import admin

from backend.apps.nodes.models import StorageNode


@admin.register(StorageNode)
class StorageNodeAdmin(admin.ModelAdmin):
    list_display = ("name", "url", "healthy", "last_seen_at")
    exclude = ("token",)
