from django.contrib import admin

from backend.apps.runs.models import TaskRun


@admin.register(TaskRun)
class TaskRunAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "namespace", "node", "shard", "state", "progress", "bytes_reclaimed", "created_at")
    list_filter = ("kind", "state")
    readonly_fields = [f.name for f in TaskRun._meta.fields]
