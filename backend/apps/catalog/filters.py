import django_filters

from backend.apps.catalog.models import Segment


class SegmentFilter(django_filters.FilterSet):
    namespace = django_filters.CharFilter(field_name="namespace__name")
    min_size = django_filters.NumberFilter(field_name="size_bytes", lookup_expr="gte")
    max_size = django_filters.NumberFilter(field_name="size_bytes", lookup_expr="lte")
    older_than = django_filters.NumberFilter(
        field_name="max_timestamp", lookup_expr="lt", label="max_timestamp before this epoch ms"
    )
    newer_than = django_filters.NumberFilter(
        field_name="max_timestamp", lookup_expr="gte", label="max_timestamp at or after this epoch ms"
    )
    min_expired_ratio = django_filters.NumberFilter(field_name="expired_ratio", lookup_expr="gte")

    class Meta:
        model = Segment
        fields = ["shard", "state"]
