"""The frontend's generated API types (frontend/src/api/schema.d.ts) match the control plane's OpenAPI
schema as it is now: a serializer change without `make api-types` fails here, not in a browser. The
frontend calls the API only through the openapi-fetch client typed by those `paths` (src/api/client.ts),
so `npm run typecheck` refuses a call the schema does not describe; no other module calls fetch."""

from __future__ import annotations

import json
import re
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


CLIENT = FRONTEND / "src" / "api" / "client.ts"
FETCH_CALL = re.compile(r"(?<![\w$])fetch\s*\(")


def without_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"(^|[^:\"'`])//.*$", r"\1", text, flags=re.M)


def test_the_api_client_is_generated_from_the_schema_types() -> None:
    package = json.loads((FRONTEND / "package.json").read_text())
    version = package["dependencies"]["openapi-fetch"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"openapi-fetch is pinned exactly, not {version!r}"
    client = CLIENT.read_text()
    assert 'import type { paths } from "./schema";' in client
    assert re.search(r"createClient<paths>\(", client), "the client is openapi-fetch's, typed by the generated paths"


def test_no_module_but_the_client_calls_fetch() -> None:
    # layout.test.ts is the frontend's own copy of this check, and names what it looks for.
    sources = [
        p for p in (FRONTEND / "src").rglob("*.ts*") if not p.name.endswith(".d.ts") and p.name != "layout.test.ts"
    ]
    assert CLIENT in sources
    callers = [
        str(p.relative_to(FRONTEND))
        for p in sources
        if p != CLIENT and FETCH_CALL.search(without_comments(p.read_text()))
    ]
    assert callers == [], f"only src/api/client.ts may call fetch: {callers}"
    assert FETCH_CALL.search("await fetch('/api/x')") and not FETCH_CALL.search("q.refetch()")
