"""Cursor pagination for every list: stable under inserts, fast at any depth."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination


class CursorPage(CursorPagination):
    page_size = 100
    max_page_size = 1000
    page_size_query_param = "page_size"

    def decode_cursor(self, request: Any) -> Any:
        # DRF answers a malformed cursor with 404; it is bad input: 400 naming the field.
        try:
            return super().decode_cursor(request)
        except NotFound:
            raise ValidationError({"cursor": ["is not a cursor this API issued"]}) from None


def cursor_page(ordering: str | tuple[str, ...], page_size: int = 100) -> type[CursorPage]:
    """A :class:`CursorPage` with its ordering (unique, so positions are exact) and page size."""
    return type("Page", (CursorPage,), {"ordering": ordering, "page_size": page_size})
