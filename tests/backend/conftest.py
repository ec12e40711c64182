from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from backend.apps.nodes.models import StorageNode
from backend.apps.nodes.services import DEFAULT_NODE_NAME


def make_user(username: str, role: str | None) -> User:
    user = User.objects.filter(username=username).first() or User.objects.create_user(
        username=username, password="pw-for-tests-123"
    )
    if role:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


@pytest.fixture
def api_as(db: Any):
    """``api_as("operator")`` → an APIClient logged in (session + CSRF enforced) with that role."""

    def make(role: str | None) -> APIClient:
        client = APIClient(enforce_csrf_checks=True)
        if role is not None:
            user = make_user(f"user-{role}", role)
            client.force_login(user)
            csrf = client.get("/api/auth/csrf").json()["csrftoken"]
            client.credentials(HTTP_X_CSRFTOKEN=csrf)
        return client

    return make


@pytest.fixture
def registered_node(db: Any, node: Any, settings: Any) -> StorageNode:
    """The real node process registered as the default node."""
    settings.NODE_URL, settings.NODE_TOKEN = node.url, node.token
    return StorageNode.objects.create(name=DEFAULT_NODE_NAME, url=node.url, token=node.token)


@pytest.fixture(autouse=True)
def _fresh_throttles() -> None:
    # Not cache.clear(): the cache is Redis, whose database the Celery broker may share.
    from backend.apps.core.throttling import reset_login_throttle

    reset_login_throttle()
