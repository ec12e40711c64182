import django_filters

from backend.apps.core.filters import UtcDateTimeFilter
from backend.apps.runs.models import TaskRun


class TaskRunFilter(django_filters.FilterSet):
    namespace = django_filters.CharFilter(field_name="namespace__name")
    node = django_filters.CharFilter(field_name="node__name")
    since = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte")
    active = django_filters.BooleanFilter(method="filter_active")
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
