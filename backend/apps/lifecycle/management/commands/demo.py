"""``manage.py demo``: the demo producer of ``make up`` (see :mod:`backend.demo`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from backend import demo
from backend.apps.namespaces.models import Namespace
from backend.apps.namespaces.services import create_subscription
from storage_engine.errors import UnknownNamespaceError
from storage_engine.node_api.client import NodeClient


def ensure_subscription() -> None:
    namespace_name, name = demo.SUBSCRIPTION
    namespace = Namespace.objects.filter(name=namespace_name).first()
    if namespace is None:
        raise UnknownNamespaceError(namespace_name)
    if not namespace.subscriptions.filter(name=name).exists():
        create_subscription(namespace=namespace, name=name, initial="earliest", actor=None)


class Command(BaseCommand):
    help = "Produce a realistic trickle into the demo namespaces (DEMO_PRODUCER=0 turns it off)."

    def handle(self, *args: Any, **options: Any) -> None:
        with NodeClient(settings.NODE_URL, settings.NODE_TOKEN or None, retries=0) as client:
            demo.run(client, ensure_subscription)
