"""Cursor pagination for every list: stable under inserts, fast at any depth."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination


class CursorPage(CursorPagination):
    page_size = 100
    max_page_size = 1000
    page_size_query_param = "page_size"
    # The same number under the name most APIs give it (Kafka's and Pulsar's admin tools, the console's links).
    limit_query_param = "limit"

    def decode_cursor(self, request: Any) -> Any:
        # DRF answers a malformed cursor with 404; it is bad input: 400 naming the field.
        try:
            return super().decode_cursor(request)
        except NotFound:
            raise ValidationError({"cursor": ["is not a cursor this API issued"]}) from None

    def get_page_size(self, request: Any) -> int:
        """``page_size`` or ``limit`` (one of them): an integer from 1 to ``max_page_size``, else a 400 naming the
        parameter and its range. DRF's own reading drops a bad value silently and serves the default page."""
        given = [name for name in (self.page_size_query_param, self.limit_query_param) if name in request.query_params]
        if not given:
            return self.page_size
        if len(given) > 1:
            raise ValidationError({self.limit_query_param: [f"give {' or '.join(given)}, not both"]})
        name = given[0]
        raw = request.query_params[name].strip()
        rule = f"must be an integer from 1 to {self.max_page_size}"
        if not raw.isdigit() or not 1 <= int(raw) <= self.max_page_size:
            raise ValidationError({name: [rule]})
        return int(raw)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        size = f"from 1 to {self.max_page_size}; default {self.page_size}"
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["description"] = f"results per page ({size}); or give limit"
                parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": self.max_page_size}
        parameters.append(
            {
                "name": self.limit_query_param,
                "required": False,
                "in": "query",
                "description": f"results per page, as page_size ({size})",
                "schema": {"type": "integer", "minimum": 1, "maximum": self.max_page_size},
            }
        )
        return parameters


def cursor_page(ordering: str | tuple[str, ...], page_size: int = 100) -> type[CursorPage]:
    """A :class:`CursorPage` with its ordering (unique, so positions are exact) and page size."""
    return type("Page", (CursorPage,), {"ordering": ordering, "page_size": page_size})
