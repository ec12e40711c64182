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


def subscriptions_with_backlog(namespace: Namespace) -> tuple[list[dict], str]:
    """The namespace's subscriptions with their live backlog per shard from the node.

    When the node cannot be reached the subscriptions are still listed, with
    ``backlog`` null and the reason returned beside them.
    """
    from backend.apps.nodes.selectors import client_for
    from storage_engine.errors import StorageError

    rows = {
        s.name: {"name": s.name, "initial": s.initial, "created_at": s.created_at, "backlog": None}
        for s in namespace.subscriptions.order_by("name")
    }
    error = ""
    with client_for(namespace.node) as client:
        try:
            for row in client.backlog(namespace.name):
                if row["subscription"] in rows:
                    entry = rows[row["subscription"]]
                    entry["backlog"] = [*(entry["backlog"] or []), row]
        except StorageError as exc:
            error = str(exc)
    return list(rows.values()), error
