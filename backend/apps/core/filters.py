"""Filters shared by every app's list endpoints."""

from __future__ import annotations

from datetime import UTC
from typing import Any

import django_filters
from rest_framework.exceptions import ValidationError


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    """An ISO 8601 datetime, compared in UTC.

    Python accepts offsets up to ±23:59 and PostgreSQL only ±15:59: normalizing
    to UTC before the query keeps every valid input working on both databases;
    one that cannot be expressed in UTC (year 1 minus an offset) is a 400.
    """

    def filter(self, qs: Any, value: Any) -> Any:
        if value is not None:
            try:
                value = value.astimezone(UTC)
            except (OverflowError, ValueError):
                raise ValidationError({self._param(): ["is out of the representable range in UTC"]}) from None
        return super().filter(qs, value)

    def _param(self) -> str:
        """The query parameter this filter reads (the FilterSet knows it; the filter does not)."""
        filters = getattr(getattr(self, "parent", None), "filters", {})
        return next((name for name, f in filters.items() if f is self), self.field_name)


def describe_filters(filterset: type[django_filters.FilterSet], **help_texts: str) -> None:
    """Describe query parameters the FilterSet builds from its model (``Meta.fields``): their ``help_text`` is
    what the OpenAPI schema says of them."""
    for name, text in help_texts.items():
        filterset.base_filters[name].extra["help_text"] = text
