"""Every error of the REST API is RFC 9457 problem details (backend.apps.core.problems): one media type and
the same members for validation errors, refused credentials and roles, unknown routes and objects, wrong
methods and media types, throttling, a node's refusals and an unreachable node; pages outside /api/ keep
Django's answers."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from backend.apps.namespaces.models import Namespace
from backend.apps.nodes.models import StorageNode
from storage_engine.errors import AlreadyRunningError, DiskFullError
from storage_engine.node_api.problem import MEDIA_TYPE, TITLES, problem_type
from tests.backend.conftest import make_user


def problem(response: Any, status: int, code: str) -> dict[str, Any]:
    """The body of ``response``, checked to be problem details of ``status`` and ``code``."""
    assert response.status_code == status, (response.status_code, response.content)
    assert response["Content-Type"] == MEDIA_TYPE, response["Content-Type"]
    assert response["X-Request-ID"]
    body: dict[str, Any] = response.json()
    assert body["type"] == problem_type(code) and body["code"] == code, body
    assert body["title"] == TITLES[code] and body["status"] == status, body
    assert body["instance"] == response.wsgi_request.path, body
    assert isinstance(body["detail"], str) and body["detail"].strip(), body
    return body


def test_a_validation_error_names_each_field_and_says_it_in_a_sentence(api_as):
    response = api_as("admin").post("/api/namespaces/", {"name": "", "shards": 1, "colour": "red"}, format="json")
    body = problem(response, 400, "validation_error")
    assert set(body["errors"]) == {"colour"}  # the unknown field is refused before the others are checked
    response = api_as("admin").post("/api/namespaces/", {"name": "", "shards": 1}, format="json")
    body = problem(response, 400, "validation_error")
    assert body["errors"] == {"name": ["This field may not be blank."]}
    assert body["detail"] == "name: This field may not be blank."


def test_nested_validation_errors_have_dotted_names(api_as):
    from backend.apps.core.problems import errors_sentence, flatten_errors

    errors = flatten_errors(
        {
            "rows": {0: {"date": ["bad"], "histogram": {"non_field_errors": ["Expected a dictionary."]}}},
            "set": [{}, {"x": ["no"]}],
            "non_field_errors": ["n"],
        }
    )
    assert errors == {
        "rows.0.date": ["bad"],
        "rows.0.histogram": ["Expected a dictionary."],
        "set.1.x": ["no"],
        "non_field_errors": ["n"],
    }
    assert errors_sentence(errors) == "rows.0.date: bad. rows.0.histogram: Expected a dictionary. set.1.x: no. n."
    assert flatten_errors(["one", "two"]) == {"non_field_errors": ["one", "two"]}


def test_a_bad_query_parameter_of_the_engine_names_field_and_rule(api_as, registered_node):
    assert api_as("admin").post("/api/namespaces/", {"name": "ev", "shards": 1}, format="json").status_code == 201
    response = api_as("viewer").get("/api/namespaces/ev/messages?positions=nonsense")
    body = problem(response, 400, "invalid_argument")
    assert body["field"] == "positions" and "shard:offset" in body["rule"], body
    assert body["errors"] == {"positions": [body["rule"]]}
    assert body["detail"].startswith("positions: ")


def test_wrong_credentials_401_and_403(api_as, db):
    make_user("alice", "viewer")
    response = APIClient().post("/api/auth/login", {"username": "alice", "password": "nope"}, format="json")
    assert problem(response, 400, "invalid_credentials")["detail"] == "Wrong username or password."
    response = APIClient().get("/api/namespaces/")
    problem(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"] == "Token"
    problem(APIClient().get("/api/namespaces/", HTTP_AUTHORIZATION="Token nope"), 401, "authentication_failed")
    body = problem(
        api_as("viewer").post("/api/namespaces/", {"name": "x", "shards": 1}, format="json"), 403, "permission_denied"
    )
    assert body["detail"] == "You do not have permission to perform this action."


def test_a_refused_csrf_token_is_a_problem_and_still_audited(db):
    from backend.apps.audit.models import AuditEntry

    client = APIClient(enforce_csrf_checks=True)
    client.force_login(make_user("carol", "admin"))
    problem(client.post("/api/namespaces/", {"name": "x", "shards": 1}, format="json"), 403, "csrf_failed")
    assert AuditEntry.objects.filter(actor_name="carol", result="denied").exists()


def test_unknown_route_and_unknown_object_are_404(api_as):
    body = problem(api_as("viewer").get("/api/no/such/route"), 404, "not_found")
    assert body["detail"] == "No API route /api/no/such/route."
    problem(APIClient().post("/api/nothing-here", {}, format="json"), 404, "not_found")  # no CSRF, no login
    body = problem(api_as("viewer").get("/api/namespaces/nope/"), 404, "not_found")
    assert "No Namespace matches" in body["detail"]


def test_wrong_method_media_type_and_body(api_as):
    response = api_as("admin").put("/api/auth/me", {}, format="json")
    body = problem(response, 405, "method_not_allowed")
    assert body["allowed"] == ["GET", "HEAD", "OPTIONS"] and response["Allow"] == "GET, HEAD, OPTIONS"
    assert body["detail"] == 'Method "PUT" not allowed.'
    admin = api_as("admin")
    response = admin.post("/api/namespaces/", "name=x", content_type="text/plain")
    problem(response, 415, "unsupported_media_type")
    response = admin.post("/api/namespaces/", "{nope", content_type="application/json")
    problem(response, 400, "parse_error")
    response = admin.get("/api/namespaces/", HTTP_ACCEPT="text/csv")
    problem(response, 406, "not_acceptable")


def test_an_error_is_json_even_for_a_browser(api_as):
    response = APIClient().get("/api/namespaces/", HTTP_ACCEPT="text/html")
    problem(response, 401, "not_authenticated")


def test_throttled_logins_say_when_to_retry(db):
    for _ in range(10):
        APIClient().post("/api/auth/login", {"username": "a", "password": "b"}, format="json")
    response = APIClient().post("/api/auth/login", {"username": "a", "password": "b"}, format="json")
    body = problem(response, 429, "throttled")
    assert body["retry_after"] >= 1 and int(response["Retry-After"]) == body["retry_after"]


@pytest.fixture
def orders(api_as, registered_node):
    assert api_as("admin").post("/api/namespaces/", {"name": "orders", "shards": 1}, format="json").status_code == 201
    return "orders"


def test_a_full_disk_is_507_with_the_nodes_numbers(api_as, orders, monkeypatch):
    from backend.apps.messages import services

    def full(**_: Any) -> None:
        raise DiskFullError(0.96, 0.9)

    monkeypatch.setattr(services, "produce", full)
    response = api_as("operator").post(f"/api/namespaces/{orders}/messages", {"value": "v"}, format="json")
    body = problem(response, 507, "disk_full")
    assert (body["used_ratio"], body["warning_ratio"]) == (0.96, 0.9)
    assert body["detail"].startswith("disk full: 96.0% used")


def test_a_cursor_move_while_a_ttl_check_runs_is_409(api_as, orders, monkeypatch):
    from backend.apps.namespaces import subscriptions

    admin = api_as("admin")
    assert admin.post(f"/api/namespaces/{orders}/subscriptions", {"name": "b"}, format="json").status_code == 201

    def busy(**_: Any) -> None:
        raise AlreadyRunningError("subscription-ttl of orders/b")

    monkeypatch.setattr(subscriptions, "move_cursor", busy)
    url = f"/api/namespaces/{orders}/subscriptions/b/cursor"
    body = problem(admin.post(url, {"action": "clear", "confirm": "b"}, format="json"), 409, "already_running")
    assert body["detail"] == "subscription-ttl of orders/b is already running"


def test_an_offset_below_the_log_start_is_416_with_both_bounds(api_as, orders):
    body = problem(
        api_as("viewer").get(f"/api/namespaces/{orders}/messages?shard=0&offset=5"), 416, "offset_out_of_range"
    )
    assert (body["shard"], body["offset"], body["log_start_offset"], body["end_offset"]) == (0, 5, 0, 0), body
    assert body["below_log_start"] is False and body["namespace"] == orders


def test_an_unreachable_node_is_503(api_as, db):
    down = StorageNode.objects.create(name="down", url="http://127.0.0.1:1")
    Namespace.objects.create(name="orphan", shards=1, node=down)
    body = problem(api_as("viewer").get("/api/namespaces/orphan/messages?shard=0"), 503, "node_unavailable")
    assert "unavailable" in body["detail"]


def test_a_crash_under_api_is_a_500_problem(db, monkeypatch):
    from backend.apps.core import views

    def crash(*_: Any, **__: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(views.MeView, "get", crash)
    client = Client(raise_request_exception=False)
    client.force_login(make_user("dave", "viewer"))
    body = problem(client.get("/api/auth/me"), 500, "internal_error")
    assert "boom" not in body["detail"]


def test_pages_outside_the_api_are_unchanged(db):
    response = Client().get("/admin/")
    assert response.status_code == 302
    assert Client().get("/some/spa/route")["Content-Type"] != MEDIA_TYPE
