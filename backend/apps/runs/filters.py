import django_filters
from django.db.models import Q
from rest_framework.exceptions import ValidationError

from backend.apps.core.filters import UtcDateTimeFilter, describe_filters
from backend.apps.runs.models import RunChange, TaskRun


class TaskRunFilter(django_filters.FilterSet):
    namespace = django_filters.CharFilter(
        method="filter_namespace",
        help_text="runs on this namespace (its name), and node-wide runs that changed it (a sweep that expired or "
        "removed some of its records, see namespaces_changed)",
    )
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
    idle = django_filters.BooleanFilter(
        method="filter_idle",
        help_text="folded sweep rows whose sweeps all did nothing are left out unless asked for: true lists them "
        "too, false (the default) leaves them out",
    )

    class Meta:
        model = TaskRun
        fields = ["kind", "state", "shard"]

    def filter_queryset(self, queryset):
        if self.form.cleaned_data.get("idle") is None:
            if self.data.get("idle") not in (None, ""):  # the widget reads anything else as "not given"
                raise ValidationError({"idle": ["must be true or false"]})
            queryset = queryset.exclude(idle=True)  # not given: the readable default
        return super().filter_queryset(queryset)

    def filter_namespace(self, queryset, name, value):
        changed = RunChange.objects.filter(namespace__name=value).values("run_id")
        return queryset.filter(Q(namespace__name=value) | Q(pk__in=changed))

    def filter_active(self, queryset, name, value):
        active = queryset.filter(state__in=["queued", "running"])
        return active if value else queryset.exclude(pk__in=active.values("pk"))

    def filter_origin(self, queryset, name, value):
        return queryset.filter(schedule="") if value == "manual" else queryset.exclude(schedule="")

    def filter_idle(self, queryset, name, value):
        return queryset if value else queryset.exclude(idle=True)


describe_filters(TaskRunFilter, shard="runs on this shard (from 0)")
