from drf_spectacular.utils import extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.pagination import CursorPagination

from backend.apps.audit.filters import AuditEntryFilter
from backend.apps.audit.selectors import audit_entries
from backend.apps.audit.serializers import AuditEntryOutputSerializer


class AuditPagination(CursorPagination):
    ordering = ("-at", "-id")
    page_size = 50
    max_page_size = 500
    page_size_query_param = "page_size"


@extend_schema(tags=["audit"])
class AuditEntryListView(ListAPIView):
    """The audit log, newest first; viewers may read it."""

    serializer_class = AuditEntryOutputSerializer
    pagination_class = AuditPagination
    filterset_class = AuditEntryFilter

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return audit_entries()
