"""The engine's modules import each other without a circle (issue 17).

The graph is read from the source with ``ast``: every ``import`` and ``from … import``
of a ``storage_engine`` module, at module level, inside functions and under
``TYPE_CHECKING`` alike (a lazy import inside a function still ties the modules
together; it only hides the circle until the function runs). ``from pkg import name``
is an edge to the submodule ``pkg.name`` when there is one, else to ``pkg`` itself.
Importing a submodule also runs its packages' ``__init__``; those implicit edges are
left out, as Python resolves them without a circle.

The same walk is the shared tool ``/work/shared/tools/import_cycles.py`` (outside this
repository, so not imported here); unlike it, a package's ``__init__`` keeps its edges
to its own submodules, since ``from pkg import module`` leads to the submodule here,
not to the package.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import textwrap
from collections import deque
from pathlib import Path

import pytest

import storage_engine

PACKAGE = "storage_engine"
ROOT = Path(storage_engine.__file__).resolve().parent

# Key compaction is written against CompactableShard (storage_engine.compaction.store_io); each
# adapter's shard implements it, so the compaction modules never reach an adapter's module.
ADAPTER_MODULES = {
    "storage_engine.adapters.indexed",
    "storage_engine.adapters.memory",
    "storage_engine.adapters.rocksdb",
    "storage_engine.adapters.segment",
    "storage_engine.memory.segment",
    "storage_engine.memory.shard",
    "storage_engine.segment.dead_marks",
    "storage_engine.segment.log",
    "storage_engine.segment.recovery",
    "storage_engine.segment.rewrite",
    "storage_engine.segment.shard",
    "storage_engine.segment.verify",
}
# The engine and its parts are written against the shard protocols too.
ADAPTER_FREE = {
    "storage_engine.engine",
    "storage_engine.compaction.cleaner",
    "storage_engine.compaction.store_io",
    "storage_engine.lifecycle.parts",
    "storage_engine.subscriptions.registry",
    "storage_engine.subscriptions.expiry",
    "storage_engine.subscriptions.quota",
}


def engine_modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found: dict[str, Path] = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _known(name: str, modules: set[str]) -> str | None:
    """``name`` or its nearest enclosing module that exists (``None`` outside the package)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imported_modules(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package modules ``name`` imports, wherever the statement stands in the file."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, one level up per extra dot
                package = name.split(".") if is_package else name.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            # ``from pkg import sub`` imports the submodule; ``from mod import name`` the module.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for target in targets:
            known = _known(target, modules)
            if known is not None and known != name:
                out.add(known)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = engine_modules()
    names = set(modules)
    return {name: imported_modules(name, path, names) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component: list[str] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for w in graph[todo.pop()]:
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def _path(graph: dict[str, set[str]], start: str, goal: str) -> list[str]:
    """One import chain from ``start`` to ``goal`` (breadth first; ``goal`` may be ``start``:
    a circle), for a failure message."""
    came: dict[str, str] = {}
    todo = deque([start])
    while todo:
        v = todo.popleft()
        for w in sorted(graph[v]):
            if w == goal:
                chain = [w, v]
                while chain[-1] != start:
                    chain.append(came[chain[-1]])
                return chain[::-1]
            if w not in came and w != start:
                came[w] = v
                todo.append(w)
    return []


def test_every_module_imports() -> None:
    for name in engine_modules():
        importlib.import_module(name)


def test_no_import_circle_among_engine_modules() -> None:
    graph = import_graph()
    assert len(graph) > 30 and "storage_engine.compaction" in graph  # the walk found the package
    found = circles(graph)
    chains = [" -> ".join(_path(graph, c[0], c[0]) or c) for c in found]
    assert not found, "import circles:\n" + "\n".join(chains)


@pytest.mark.parametrize("module", sorted(ADAPTER_FREE))
def test_compaction_and_lifecycle_reach_no_adapter(module: str) -> None:
    graph = import_graph()
    reached = reachable(graph, module) & ADAPTER_MODULES
    assert not reached, "\n".join(" -> ".join(_path(graph, module, m)) for m in sorted(reached))


def test_each_module_imports_first_in_a_fresh_interpreter() -> None:
    """A circle between modules shows as an ImportError only when the import starts at one of
    its members; import every module first, the package's modules forgotten in between."""
    script = textwrap.dedent(
        """
        import importlib, sys
        failed = []
        for name in sys.argv[1:]:
            for loaded in [m for m in sys.modules if m == "storage_engine" or m.startswith("storage_engine.")]:
                del sys.modules[loaded]
            try:
                importlib.import_module(name)
            except Exception as exc:
                failed.append(f"{name}: {exc!r}")
        print("\\n".join(failed))
        sys.exit(1 if failed else 0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *engine_modules()],
        cwd=ROOT.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_graph_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    """The walk itself: a lazy import inside a function and a relative import are edges."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg.b import g\n    return g\n")
    (pkg / "b.py").write_text("from . import a\n\ndef g():\n    return a\n")
    (pkg / "c.py").write_text("from .a import f\nimport pkg.b\n")
    modules = {"pkg", "pkg.a", "pkg.b", "pkg.c"}
    graph = {
        "pkg": set(),
        "pkg.a": imported_modules("pkg.a", pkg / "a.py", modules),
        "pkg.b": imported_modules("pkg.b", pkg / "b.py", modules),
        "pkg.c": imported_modules("pkg.c", pkg / "c.py", modules),
    }
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.a"} and graph["pkg.c"] == {"pkg.a", "pkg.b"}
    assert circles(graph) == [["pkg.a", "pkg.b"]]
