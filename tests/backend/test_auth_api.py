from __future__ import annotations

from rest_framework.test import APIClient

from tests.backend.conftest import make_user


def test_login_me_logout_with_csrf(db):
    make_user("alice", "operator")
    client = APIClient(enforce_csrf_checks=True)
    csrf = client.get("/api/auth/csrf").json()["csrftoken"]
    assert (
        client.post("/api/auth/login", {"username": "alice", "password": "pw-for-tests-123"}, format="json").status_code
        == 403
    )  # no CSRF header: refused
    client.credentials(HTTP_X_CSRFTOKEN=csrf)
    response = client.post("/api/auth/login", {"username": "alice", "password": "pw-for-tests-123"}, format="json")
    assert response.status_code == 200
    assert response.json() == {"username": "alice", "role": "operator"}
    # Django rotates the CSRF token at login.
    client.credentials(HTTP_X_CSRFTOKEN=client.get("/api/auth/csrf").json()["csrftoken"])
    assert client.get("/api/auth/me").json()["role"] == "operator"
    assert client.post("/api/auth/logout").status_code == 204
    assert client.get("/api/auth/me").status_code in (401, 403)


def test_wrong_password_is_a_clear_400(db):
    make_user("bob", "viewer")
    response = APIClient().post("/api/auth/login", {"username": "bob", "password": "nope"}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_credentials" and body["detail"] == "Wrong username or password."


def test_login_is_throttled(db, settings):
    client = APIClient()
    codes = [
        client.post("/api/auth/login", {"username": "x", "password": "y"}, format="json").status_code for _ in range(12)
    ]
    assert codes[:10] == [400] * 10
    assert codes[-1] == 429


def test_roles_from_groups_and_superuser(db):
    from django.contrib.auth.models import User

    from backend.apps.core.roles import has_role, role_of

    assert role_of(make_user("v", None)) == "viewer"
    op = make_user("o", "operator")
    assert role_of(op) == "operator" and has_role(op, "viewer") and not has_role(op, "admin")
    root = User.objects.create_superuser("root", password="pw-for-tests-123")
    assert role_of(root) == "admin"
