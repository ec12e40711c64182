"""How the suite is handed out to pytest-xdist's workers (tests/support/workers.py)."""

from __future__ import annotations

import socket
from pathlib import Path

from _pytest.nodeid import coerce_node_id

from tests.support.processes import FIRST_PORT, free_port
from tests.support.workers import (
    give_each_test_its_own_id,
    has_module_fixture,
    known_durations,
    longest_first,
    work_unit,
)


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


class Item:
    """The two things give_each_test_its_own_id reads and writes of a pytest item: its name and its id."""

    def __init__(self, nodeid: str, name: str) -> None:
        self._id, self.name = coerce_node_id(nodeid), name

    @property
    def nodeid(self) -> str:
        return str(self._id)


def test_items_sharing_an_id_get_their_names_back_and_others_keep_theirs():
    fuzz = "tests/backend/test_openapi_fuzz.py::test_no_5xx"
    items = [Item(fuzz, "test_no_5xx[GET /api/actions]"), Item(fuzz, "test_no_5xx[POST /api/actions]")]
    alone = Item("tests/test_x.py::test_y[1]", "test_y[1]")
    give_each_test_its_own_id([*items, alone])  # type: ignore[list-item]
    assert [i.nodeid for i in items] == [f"{fuzz}[GET /api/actions]", f"{fuzz}[POST /api/actions]"]
    assert alone.nodeid == "tests/test_x.py::test_y[1]"


def test_each_worker_takes_ports_from_its_own_block_below_the_ephemeral_range(monkeypatch):
    ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    seen = {}
    for worker in ("gw0", "gw1", "gw5"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        seen[worker] = {free_port() for _ in range(20)}
        assert all(FIRST_PORT <= port < ephemeral for port in seen[worker]), seen[worker]
    assert not seen["gw0"] & seen["gw1"] and not seen["gw1"] & seen["gw5"]
    with socket.socket() as taken:  # a port something listens on is never handed out
        monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        assert taken.getsockname()[1] not in {free_port() for _ in range(200)}


def test_long_single_tests_go_first_and_a_shared_modules_tests_keep_their_order(tmp_path):
    story = "tests/integration/test_console_e2e.py"  # a module fixture: one unit, run step after step
    items = [
        Item("tests/a.py::test_quick", "test_quick"),
        Item(f"{story}::test_01", "test_01"),
        Item(f"{story}::test_02", "test_02"),
        Item("tests/b.py::test_day", "test_day"),
        Item("tests/c.py::test_hour", "test_hour"),
    ]
    durations = {"tests/b.py::test_day": 90.0, "tests/c.py::test_hour": 40.0, f"{story}::test_02": 30.0}
    ordered = [i.nodeid for i in longest_first(items, durations)]  # type: ignore[arg-type]
    assert ordered == [
        "tests/b.py::test_day",
        "tests/c.py::test_hour",
        "tests/a.py::test_quick",
        f"{story}::test_01",
        f"{story}::test_02",
    ]
    assert known_durations(tmp_path / "missing.json") == {}
    (tmp_path / "d.json").write_text('{"tests/b.py::test_day": 90}')
    assert known_durations(tmp_path / "d.json") == {"tests/b.py::test_day": 90.0}
