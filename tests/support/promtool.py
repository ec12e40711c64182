"""Prometheus's ``promtool`` for the tests that check an exposition or exported alert rules with it
(`make prometheus` installs Debian's prometheus package). A test that needs it either skips
(:data:`needs_promtool`) or fails (:func:`require_promtool`) when it is missing; the checks raise
``AssertionError`` with promtool's output when it fails in a way the caller did not ask about."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
# promtool check metrics exits with this when the exposition parsed but has lint problems (it prints them).
LINT_PROBLEMS = 3


def available() -> bool:
    return Path(PROMTOOL).exists()


needs_promtool = pytest.mark.skipif(not available(), reason="promtool missing: make prometheus")


def require_promtool() -> None:
    """Fail (not skip) the calling test when promtool is missing."""
    if not available():
        pytest.fail("promtool is missing: run `make prometheus` (Debian's prometheus package)")


def _run(args: list[str], *, stdin: str | None = None, cwd: Path | None = None) -> tuple[int, str]:
    result = subprocess.run([PROMTOOL, *args], input=stdin, cwd=cwd, capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr


def check_metrics(text: str) -> str:
    """``promtool check metrics`` on an exposition: its complaints (stdout + stderr, ``""`` when it has
    none). Raises if promtool fails otherwise (a text it cannot parse, a non-zero exit without a word)."""
    code, output = _run(["check", "metrics"], stdin=text)
    if code == 0 or (code == LINT_PROBLEMS and output.strip()):
        return output
    raise AssertionError(f"promtool check metrics exited {code}: {output}")


def check_rules(path: Path) -> str:
    """``promtool check rules`` on a rules file: its output. Raises with the output unless it exits 0."""
    code, output = _run(["check", "rules", str(path)])
    if code != 0:
        raise AssertionError(f"promtool check rules exited {code}: {output}")
    return output


def run_rule_tests(path: Path) -> str:
    """``promtool test rules`` on a unit-test file, run in its directory (its ``rule_files`` are relative
    to it): the output. Raises with the output unless every test passed (exit 0). Not named
    ``test_rules``: pytest would collect it in every test module that imports it."""
    code, output = _run(["test", "rules", path.name], cwd=path.parent)
    if code != 0:
        raise AssertionError(f"promtool test rules exited {code}: {output}")
    return output
