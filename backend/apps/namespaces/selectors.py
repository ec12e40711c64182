"""Reads of the namespaces app."""

from django.db.models import QuerySet

from backend.apps.catalog.selectors import with_usage
from backend.apps.namespaces.models import Namespace
from backend.apps.runs.models import Kind
from backend.apps.runs.selectors import last_finished


def namespace_list() -> QuerySet[Namespace]:
    return Namespace.objects.select_related("node").order_by("name")


def namespace_list_with_usage() -> QuerySet[Namespace]:
    """Namespaces with size, records, segments and last scan/compaction, in a constant number of queries."""
    return with_usage(namespace_list()).annotate(
        last_scan_at=last_finished(Kind.EXPIRY_SCAN), last_compaction_at=last_finished(Kind.COMPACTION)
    )
