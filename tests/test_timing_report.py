"""The report docs/testing.md is made from: slowest tests and time per directory, read from pytest's JUnit XML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.timing_report import directory_table, main, read_report, slowest_table

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.backend.test_runs" name="test_a_day" time="81.25"/>
<testcase classname="tests.backend.test_runs" name="test_fold[3600]" time="0.5"/>
<testcase classname="tests.spark.test_cli.TestInProcess" name="test_usage" time="2.0"/>
<testcase classname="tests.test_compose" name="test_teardown" time="15.0"/>
</testsuite></testsuites>
"""


@pytest.fixture
def report(tmp_path: Path) -> str:
    path = tmp_path / "results.xml"
    path.write_text(REPORT)
    return str(path)


def test_node_ids_and_directories_come_from_junit_classnames(report: str):
    times = {t.nodeid: t for t in read_report(report)}
    assert set(times) == {
        "tests/backend/test_runs.py::test_a_day",
        "tests/backend/test_runs.py::test_fold[3600]",
        "tests/spark/test_cli.py::TestInProcess::test_usage",
        "tests/test_compose.py::test_teardown",
    }
    assert times["tests/spark/test_cli.py::TestInProcess::test_usage"].directory == "tests/spark"
    assert times["tests/test_compose.py::test_teardown"].directory == "tests"


def test_slowest_first_and_directories_summed(report: str):
    times = read_report(report)
    slowest = slowest_table(times, 2).splitlines()
    assert slowest[2] == "| 1 | 81.2 | `tests/backend/test_runs.py::test_a_day` |"
    assert slowest[3] == "| 2 | 15.0 | `tests/test_compose.py::test_teardown` |" and len(slowest) == 4
    directories = directory_table(times).splitlines()
    assert directories[2] == "| `tests/backend` | 2 | 82 |"
    assert directories[-1] == "| all | 4 | 99 |"


def test_the_command_prints_both_tables(report: str, capsys: pytest.CaptureFixture[str]):
    main([report, "--slowest", "3"])
    out = capsys.readouterr().out
    assert "## The 3 slowest tests" in out and "## Time per directory" in out and "`tests/spark` | 1 | 2 |" in out


def test_the_durations_file_holds_the_tests_over_five_seconds(report: str, tmp_path: Path):
    out = tmp_path / "durations.json"
    main([report, "--write-durations", str(out)])
    assert json.loads(out.read_text()) == {
        "tests/backend/test_runs.py::test_a_day": 81.2,
        "tests/test_compose.py::test_teardown": 15.0,
    }
