from celery import shared_task

from backend.apps.nodes import services


@shared_task(ignore_result=True)
def reconcile_node_policies() -> dict[str, int]:
    """Every 30 s: push pending node policies, re-push those a node no longer enforces."""
    return services.reconcile_node_policies()
