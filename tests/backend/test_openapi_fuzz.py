"""Schemathesis against the live OpenAPI schema, authenticated as an admin:
no 5xx for any generated request, and every response matches the schema."""

from __future__ import annotations

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis import checks

from backend.config.wsgi import application
from tests.backend.conftest import make_user

CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]

# Loaded at import: schemathesis' fixture-based loader does not support pytest 9 yet.
schema = schemathesis.openapi.from_wsgi("/api/schema/", application)


@pytest.fixture
def admin_headers(db, registered_node):
    # Like Django's test client: keep the test's database connection open across requests.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    admin = make_user("fuzz-admin", "admin")
    yield {"Authorization": f"Token {Token.objects.create(user=admin).key}"}
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_no_5xx_and_responses_match_the_schema(case, admin_headers):
    case.call_and_validate(headers=admin_headers, checks=CHECKS)
