import django_filters

from backend.apps.catalog.figures import SEGMENT_TIERS
from backend.apps.catalog.models import Segment
from backend.apps.core.filters import describe_filters


class SegmentFilter(django_filters.FilterSet):
    namespace = django_filters.CharFilter(
        field_name="namespace__name", help_text="segments of this namespace (its name)"
    )
    min_size = django_filters.NumberFilter(
        field_name="size_bytes", lookup_expr="gte", help_text="segments of at least this many bytes"
    )
    max_size = django_filters.NumberFilter(
        field_name="size_bytes", lookup_expr="lte", help_text="segments of at most this many bytes"
    )
    older_than = django_filters.NumberFilter(
        field_name="max_timestamp", lookup_expr="lt", label="max_timestamp before this epoch ms"
    )
    newer_than = django_filters.NumberFilter(
        field_name="max_timestamp", lookup_expr="gte", label="max_timestamp at or after this epoch ms"
    )
    min_expired_ratio = django_filters.NumberFilter(
        field_name="expired_ratio", lookup_expr="gte", help_text="segments whose expired share is at least this (0..1)"
    )

    tier = django_filters.ChoiceFilter(
        choices=[(tier, tier) for tier in SEGMENT_TIERS],
        help_text="segments in this tier: local, both (local and in the object store) or remote (local copy dropped)",
    )

    class Meta:
        model = Segment
        fields = ["shard", "state"]


describe_filters(SegmentFilter, shard="segments of this shard (from 0)", state="segments in this state")
