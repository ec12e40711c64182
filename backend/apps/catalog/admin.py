from django.contrib import admin

from backend.apps.catalog.models import Segment, ShardStatus


class ReadOnlyAdmin(admin.ModelAdmin):
    """The data belongs to the nodes: the catalog is a synced copy."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Segment)
class SegmentAdmin(ReadOnlyAdmin):
    list_display = ("namespace", "shard", "base_offset", "state", "size_bytes", "record_count", "expired_ratio")
    list_filter = ("state",)
    list_select_related = ("namespace",)


@admin.register(ShardStatus)
class ShardStatusAdmin(ReadOnlyAdmin):
    list_display = ("namespace", "shard", "log_start_offset", "end_offset", "size_bytes", "segment_count")
