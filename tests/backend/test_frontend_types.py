"""The frontend's generated API types (frontend/src/api/schema.d.ts) match the control plane's OpenAPI
schema as it is now: a serializer change without `make api-types` fails here, not in a browser."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"
GENERATOR = FRONTEND / "node_modules" / ".bin" / "openapi-typescript"


def test_the_generated_api_types_are_fresh(tmp_path: Path) -> None:
    if not GENERATOR.exists():
        pytest.fail(f"{GENERATOR} is missing: `make ui` installs the frontend's tools (make test does)")
    schema = tmp_path / "openapi.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(schema))
    generated = tmp_path / "schema.d.ts"
    subprocess.run([str(GENERATOR), str(schema), "-o", str(generated)], check=True, capture_output=True, timeout=120)
    committed = FRONTEND / "src" / "api" / "schema.d.ts"
    assert generated.read_text() == committed.read_text(), "frontend/src/api/schema.d.ts is stale: run `make api-types`"
