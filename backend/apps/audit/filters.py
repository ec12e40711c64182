import django_filters

from backend.apps.audit.models import AuditEntry
from backend.apps.core.filters import UtcDateTimeFilter


class AuditEntryFilter(django_filters.FilterSet):
    since = UtcDateTimeFilter(field_name="at", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="at", lookup_expr="lt")
    actor = django_filters.CharFilter(field_name="actor_name")
    action = django_filters.CharFilter(field_name="action", lookup_expr="startswith")
    q = django_filters.CharFilter(field_name="target", lookup_expr="icontains")

    class Meta:
        model = AuditEntry
        fields = ["target_type", "target", "result"]
