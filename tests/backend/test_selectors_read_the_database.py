"""Selectors only read the database (HackSoft's styleguide, issue 17): a read that calls a node lives in
the app's services, its ``browser`` or the nodes gateway, never in ``selectors.py``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APPS = Path(__file__).resolve().parents[2] / "backend" / "apps"
NODE_CALLERS = {"storage_engine.node_api.client", "httpx", "requests", "backend.apps.nodes.gateway"}


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


@pytest.mark.parametrize("path", sorted(APPS.glob("*/selectors.py")), ids=lambda p: p.parent.name)
def test_selectors_import_nothing_that_calls_a_node(path: Path) -> None:
    names = imported(path)
    callers = {n for n in names if any(n == c or n.startswith(c + ".") for c in NODE_CALLERS)}
    assert not callers, f"{path.parent.name}/selectors.py imports {sorted(callers)}"
    assert not any(n.endswith(".client_for") for n in names)
