from drf_spectacular.utils import extend_schema
from rest_framework.generics import ListAPIView

from backend.apps.audit.filters import AuditEntryFilter
from backend.apps.audit.selectors import audit_entries
from backend.apps.audit.serializers import AuditEntryOutputSerializer
from backend.apps.core.pagination import cursor_page


@extend_schema(tags=["audit"])
class AuditEntryListView(ListAPIView):
    """The audit log, newest first; viewers may read it."""

    serializer_class = AuditEntryOutputSerializer
    pagination_class = cursor_page(("-at", "-id"), page_size=50)
    filterset_class = AuditEntryFilter

    def get_queryset(self):
        return audit_entries()
