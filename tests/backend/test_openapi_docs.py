"""The OpenAPI schema documents every operation: what it does, each of its parameters, and the errors it
answers — all of them problem details (application/problem+json, the Problem component's members)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

METHODS = ("get", "put", "post", "patch", "delete")
PROBLEM_MEMBERS = {"type", "title", "status", "detail", "code", "instance"}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    response = APIClient().get("/api/schema/?format=json")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def operations(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{method.upper()} {path}", op)
        for path, item in schema["paths"].items()
        for method, op in item.items()
        if method in METHODS
    ]


def test_every_operation_says_what_it_does(schema):
    missing = [name for name, op in operations(schema) if not (op.get("summary") or op.get("description"))]
    assert not missing, f"operations without a summary or description: {missing}"


def test_every_parameter_is_described(schema):
    missing = [
        f"{name} {p['in']}:{p['name']}"
        for name, op in operations(schema)
        for p in op.get("parameters", [])
        if not (p.get("description") or "").strip()
    ]
    assert not missing, f"parameters without a description: {missing}"


def test_every_operation_documents_its_errors_as_problem_details(schema):
    components = schema["components"]["schemas"]
    problem = components["Problem"]
    assert set(problem["required"]) >= PROBLEM_MEMBERS, problem
    for name, op in operations(schema):
        errors = {code: r for code, r in op["responses"].items() if code == "default" or code[0] in "45"}
        assert "default" in errors, f"{name} documents no catch-all error response"
        for code, response in errors.items():
            assert response.get("description"), (name, code)
            assert list(response["content"]) == ["application/problem+json"], (name, code, response)
            ref = response["content"]["application/problem+json"]["schema"]["$ref"]
            component = components[ref.rsplit("/", 1)[1]]
            assert set(component["required"]) >= PROBLEM_MEMBERS, (name, code, ref)
        if "{" in name:
            assert "404" in errors, f"{name} names an object but documents no 404"
        if "requestBody" in op or any(p["in"] == "query" for p in op.get("parameters", [])):
            assert "400" in errors, f"{name} takes input but documents no 400"


def test_views_document_their_specific_errors(schema):
    produce = schema["paths"]["/api/namespaces/{name}/messages"]["post"]["responses"]
    assert {"413", "429", "503", "507"} <= set(produce)
    browse = schema["paths"]["/api/namespaces/{name}/messages"]["get"]["responses"]
    assert browse["416"]["content"]["application/problem+json"]["schema"]["$ref"].endswith("/OutOfRange")
    cursor = schema["paths"]["/api/namespaces/{name}/subscriptions/{subscription}/cursor"]["post"]["responses"]
    assert "409" in cursor
    assert "429" in schema["paths"]["/api/auth/login"]["post"]["responses"]  # throttled
    assert "401" not in schema["paths"]["/api/auth/login"]["post"]["responses"]  # anyone may try
