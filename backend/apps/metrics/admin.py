from django.contrib import admin

from backend.apps.metrics.models import MetricSeries


@admin.register(MetricSeries)
class MetricSeriesAdmin(admin.ModelAdmin):
    list_display = ("name", "node", "namespace", "shard", "queue", "last_value", "last_ts")
    list_filter = ("name",)
    search_fields = ("key",)
    readonly_fields = [f.name for f in MetricSeries._meta.fields]
