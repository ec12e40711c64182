from django.contrib import admin

from backend.apps.runs.models import TaskRun


@admin.register(TaskRun)
class TaskRunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "kind",
        "namespace",
        "node",
        "shard",
        "state",
        "sweeps",
        "window_start",
        "bytes_reclaimed",
        "created_at",
    )
    list_filter = ("kind", "state", "idle")
    readonly_fields = [f.name for f in TaskRun._meta.fields]
