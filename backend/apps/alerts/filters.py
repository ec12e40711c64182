import django_filters

from backend.apps.alerts.models import Alert, AlertState, Severity


class AlertFilter(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=AlertState.choices)
    severity = django_filters.ChoiceFilter(choices=Severity.choices)
    namespace = django_filters.CharFilter(field_name="labels__namespace")
    node = django_filters.CharFilter(field_name="labels__node")

    class Meta:
        model = Alert
        fields = ["state", "severity", "rule"]
