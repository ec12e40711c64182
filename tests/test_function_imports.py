"""Imports inside functions in backend/ say why they are there (issue 27).

An import inside a function hides a dependency from the reader — it once hid three services ↔ tasks circles.
Import-linter counts such imports anyway (``make lint``), so the only reasons left to keep one are load order
(Django app loading, a module imported before ``django.setup()``) and optional or heavy dependencies (pyspark).
Each is kept only under a comment that says which: the comment lines right above its block of imports, or a
comment on the import itself (not just a ``noqa``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BACKEND = ROOT / "backend"
_NOT_A_REASON = re.compile(r"#\s*(noqa|type:\s*ignore)[^#(]*$")


def function_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The import statements inside a function or method of ``tree`` (at any depth)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.extend(n for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom))
    return found


def has_reason(lines: list[str], node: ast.Import | ast.ImportFrom, import_lines: set[int]) -> bool:
    """A comment on the import's own lines, or right above its block (imports and blank lines in between)."""
    assert node.end_lineno is not None
    for number in range(node.lineno, node.end_lineno + 1):
        line = lines[number - 1]
        if "#" in line and not _NOT_A_REASON.search(line):
            return True
    number = node.lineno - 1
    while number >= 1 and (number in import_lines or not lines[number - 1].strip()):
        number -= 1
    return number >= 1 and lines[number - 1].strip().startswith("#")


def unexplained(path: Path, root: Path = ROOT) -> list[str]:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    imports = function_imports(tree)
    import_lines = {
        n
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    }
    return [
        f"{path.relative_to(root)}:{node.lineno}: {lines[node.lineno - 1].strip()}"
        for node in imports
        if not has_reason(lines, node, import_lines)
    ]


def backend_files() -> list[Path]:
    return sorted(p for p in BACKEND.rglob("*.py") if "migrations" not in p.parts)


def test_every_import_inside_a_function_says_why() -> None:
    missing = [line for path in backend_files() for line in unexplained(path)]
    assert not missing, "imports inside functions without a comment saying why:\n" + "\n".join(missing)


@pytest.mark.parametrize(
    ("source", "explained"),
    [
        ("def f():\n    from a import b\n", False),
        ("def f():\n    from a import b  # noqa: F401\n", False),
        ("def f():\n    # Django app loading\n    from a import b\n\n    from c import d\n", True),
        ("def f():\n    from a import b  # noqa: F401 (registers the checks)\n", True),
        ("def f():\n    x = 1\n    # optional dependency\n    import nats\n", True),
    ],
)
def test_the_rule(tmp_path: Path, source: str, explained: bool) -> None:
    path = tmp_path / "m.py"
    path.write_text(source)
    assert (not unexplained(path, tmp_path)) is explained
