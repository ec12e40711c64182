import django_filters

from backend.apps.core.filters import UtcDateTimeFilter, describe_filters
from backend.apps.runs.models import TaskRun


class TaskRunFilter(django_filters.FilterSet):
    namespace = django_filters.CharFilter(field_name="namespace__name", help_text="runs on this namespace (its name)")
    node = django_filters.CharFilter(field_name="node__name", help_text="runs on this storage node (its name)")
    since = UtcDateTimeFilter(
        field_name="created_at", lookup_expr="gte", help_text="runs created at or after this ISO 8601 time"
    )
    active = django_filters.BooleanFilter(
        method="filter_active", help_text="true: queued or running runs only; false: finished ones only"
    )
    origin = django_filters.ChoiceFilter(
        choices=[("manual", "manual"), ("scheduled", "scheduled")],
        method="filter_origin",
        help_text="manual: started by someone (no schedule); scheduled: started by a schedule",
    )

    class Meta:
        model = TaskRun
        fields = ["kind", "state", "shard"]

    def filter_active(self, queryset, name, value):
        active = queryset.filter(state__in=["queued", "running"])
        return active if value else queryset.exclude(pk__in=active.values("pk"))

    def filter_origin(self, queryset, name, value):
        return queryset.filter(schedule="") if value == "manual" else queryset.exclude(schedule="")


describe_filters(TaskRunFilter, shard="runs on this shard (from 0)")
