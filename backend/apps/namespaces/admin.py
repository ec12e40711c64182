from django.contrib import admin

from backend.apps.namespaces.models import Namespace, ShardPlacement


class ShardPlacementInline(admin.TabularInline):
    """Placement is fixed at creation (moving a shard would move its data): shown, not edited."""

    model = ShardPlacement
    extra = 0
    can_delete = False
    readonly_fields = ("shard", "node")

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Namespace)
class NamespaceAdmin(admin.ModelAdmin):
    list_display = ("name", "shards", "node", "sync_state", "created_at")
    list_filter = ("sync_state",)
    search_fields = ("name",)
    inlines = [ShardPlacementInline]
