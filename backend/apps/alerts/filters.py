import django_filters

from backend.apps.alerts.models import Alert, AlertRule, AlertState, Severity


class AlertFilter(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=AlertState.choices, help_text="only alerts in this state")
    severity = django_filters.ChoiceFilter(choices=Severity.choices, help_text="only alerts of this severity")
    namespace = django_filters.CharFilter(
        field_name="labels__namespace", help_text="only alerts about this namespace (its name)"
    )
    node = django_filters.CharFilter(
        field_name="labels__node", help_text="only alerts about this storage node (its name)"
    )
    rule = django_filters.ModelChoiceFilter(
        queryset=AlertRule.objects.all(), help_text="only alerts of this rule (its id)"
    )

    class Meta:
        model = Alert
        fields = ["state", "severity", "rule"]
