"""How the suite is handed out to pytest-xdist's workers (tests/support/workers.py)."""

from __future__ import annotations

from tests.support.workers import has_module_fixture, work_unit


def test_the_spark_suite_is_one_unit_and_a_module_with_a_module_fixture_is_one():
    assert work_unit("tests/spark/test_cli.py::TestInProcess::test_usage") == "tests/spark/"
    assert work_unit("tests/spark/test_lake_table.py::test_x[a]") == "tests/spark/"
    # test_console_e2e launches one system for its module; its tests go to one worker together.
    assert has_module_fixture("tests/integration/test_console_e2e.py")
    assert work_unit("tests/integration/test_console_e2e.py::test_a") == "tests/integration/test_console_e2e.py"


def test_any_other_test_is_a_unit_of_its_own():
    assert not has_module_fixture("tests/test_timing_report.py")
    assert work_unit("tests/test_timing_report.py::test_a[1]") == "tests/test_timing_report.py::test_a[1]"
    assert not has_module_fixture("tests/no_such_file.py")
