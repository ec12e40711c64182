"""Reads of the namespaces app."""

from django.db.models import QuerySet

from backend.apps.namespaces.models import Namespace


def namespace_list() -> QuerySet[Namespace]:
    return Namespace.objects.select_related("node").order_by("name")
