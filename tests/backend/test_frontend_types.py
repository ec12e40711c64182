"""The frontend's generated API types (frontend/src/api/schema.d.ts) match the control plane's OpenAPI
schema as it is now: a serializer change without `make api-types` fails here, not in a browser."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"
GENERATOR = FRONTEND / "node_modules" / ".bin" / "openapi-typescript"


def generator_command(schema: Path, output: Path) -> list[str]:
    """`npm run api-types` (frontend/package.json) with its options, reading `schema` and writing `output`."""
    args = shlex.split(json.loads((FRONTEND / "package.json").read_text())["scripts"]["api-types"])
    assert args[0] == "openapi-typescript", args
    args[args.index("-o") + 1] = str(output)
    return [str(GENERATOR), *(str(schema) if a == "../var/openapi.json" else a for a in args[1:])]


def test_the_generated_api_types_are_fresh(tmp_path: Path) -> None:
    if not GENERATOR.exists():
        pytest.fail(f"{GENERATOR} is missing: `make ui` installs the frontend's tools (make test does)")
    schema = tmp_path / "openapi.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(schema))
    generated = tmp_path / "schema.d.ts"
    subprocess.run(generator_command(schema, generated), check=True, capture_output=True, timeout=120)
    committed = FRONTEND / "src" / "api" / "schema.d.ts"
    assert generated.read_text() == committed.read_text(), "frontend/src/api/schema.d.ts is stale: run `make api-types`"
