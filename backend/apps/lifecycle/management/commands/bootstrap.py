"""Idempotent first-start setup: the default node, an admin account, the demo data.

The admin password comes from ``ADMIN_PASSWORD``, or is generated and printed
once (when the account is created); it is never written to disk by us.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from backend import demo
from backend.apps.lifecycle.schedules import derive_schedules
from backend.apps.namespaces.models import Namespace
from backend.apps.namespaces.services import create_namespace
from backend.apps.nodes.services import ensure_default_node

DEMO_NAMESPACES = demo.NAMESPACES


class Command(BaseCommand):
    help = "Create the default node, the admin account and (with --demo) demo namespaces."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--demo", action="store_true", help="seed demo namespaces")

    def handle(self, *args: Any, **options: Any) -> None:
        node = ensure_default_node()
        self.stdout.write(f"storage node: {node.name} at {node.url}")
        self._ensure_admin()

        self.stdout.write(f"lifecycle schedules: {derive_schedules()} in place")
        if options["demo"]:
            for name, shards in DEMO_NAMESPACES:
                if not Namespace.objects.filter(name=name).exists():
                    ns = create_namespace(name=name, shards=shards, policy=demo.POLICIES.get(name))
                    self.stdout.write(f"demo namespace {ns.name}: {ns.sync_state}")

    def _ensure_admin(self) -> None:
        username = os.environ.get("ADMIN_USERNAME", "admin")
        given = os.environ.get("ADMIN_PASSWORD", "")
        user_model = get_user_model()
        user = user_model.objects.filter(username=username).first()
        if user is None:
            password = given or secrets.token_urlsafe(12)
            user_model.objects.create_superuser(username=username, email="", password=password)
            shown = "(from ADMIN_PASSWORD)" if given else password
            self.stdout.write(self.style.SUCCESS(f"LOGIN username={username} password={shown}"))
        elif given:
            user.set_password(given)
            user.save(update_fields=["password"])
            self.stdout.write(f"LOGIN username={username} password=(from ADMIN_PASSWORD)")
        else:
            self.stdout.write(
                f"LOGIN username={username} password=(printed when it was created; set ADMIN_PASSWORD to reset)"
            )
