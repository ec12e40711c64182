from django.contrib import admin

from backend.apps.namespaces.models import Namespace


@admin.register(Namespace)
class NamespaceAdmin(admin.ModelAdmin):
    list_display = ("name", "shards", "node", "sync_state", "created_at")
    list_filter = ("sync_state",)
    search_fields = ("name",)
