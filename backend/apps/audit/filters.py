import django_filters

from backend.apps.audit.models import AuditEntry
from backend.apps.core.filters import UtcDateTimeFilter, describe_filters


class AuditEntryFilter(django_filters.FilterSet):
    since = UtcDateTimeFilter(field_name="at", lookup_expr="gte", help_text="entries at or after this ISO 8601 time")
    until = UtcDateTimeFilter(field_name="at", lookup_expr="lt", help_text="entries before this ISO 8601 time")
    actor = django_filters.CharFilter(field_name="actor_name", help_text="entries by this user (their username)")
    action = django_filters.CharFilter(
        field_name="action",
        lookup_expr="startswith",
        help_text="entries whose action starts with this (namespace. for every namespace action)",
    )
    q = django_filters.CharFilter(
        field_name="target", lookup_expr="icontains", help_text="entries whose target contains this, any case"
    )

    class Meta:
        model = AuditEntry
        fields = ["target_type", "target", "result"]


describe_filters(
    AuditEntryFilter,
    target_type="entries about this kind of object (namespace, node, policy, subscription…)",
    target="entries about this object (its name, exactly)",
    result="entries with this result: ok, failed or denied",
)
