"""Where the suite's time goes, from a JUnit XML report: the slowest tests and the time per directory.

``make test`` writes ``var/test-results.xml``; ``python -m tests.support.timing_report var/test-results.xml``
prints the Markdown tables that ``docs/testing.md`` publishes; ``--write-durations tests/durations.json``
records the tests over 5 s, which the workers take first (tests/support/workers.py). Times are a test's own
(setup, call and teardown as pytest reports them), summed over the tests of a directory; under xdist they
overlap, so a directory's sum is work, not wall time.
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import PurePosixPath


@dataclass(frozen=True)
class TestTime:
    nodeid: str
    seconds: float

    @property
    def directory(self) -> str:
        return str(PurePosixPath(self.nodeid.split("::", 1)[0]).parent)


def read_report(path: str) -> list[TestTime]:
    """Every test case of the report with its time; the node id is rebuilt from JUnit's classname."""
    root = ET.parse(path).getroot()
    times: list[TestTime] = []
    for case in root.iter("testcase"):
        # classname is "tests.backend.test_x" or "tests.backend.test_x.TestClass": the file is the last test_ part.
        parts = case.get("classname", "").split(".")
        file_end = max((i for i, part in enumerate(parts) if part.startswith("test_")), default=len(parts) - 1) + 1
        nodeid = "/".join(parts[:file_end]) + ".py::" + "::".join([*parts[file_end:], case.get("name", "")])
        times.append(TestTime(nodeid, float(case.get("time", "0") or 0)))
    return times


def slowest_table(times: list[TestTime], count: int) -> str:
    rows = sorted(times, key=lambda t: t.seconds, reverse=True)[:count]
    lines = ["| # | seconds | test |", "|---:|---:|---|"]
    lines += [f"| {i} | {t.seconds:.1f} | `{t.nodeid}` |" for i, t in enumerate(rows, 1)]
    return "\n".join(lines)


def directory_table(times: list[TestTime]) -> str:
    seconds: dict[str, float] = defaultdict(float)
    tests: dict[str, int] = defaultdict(int)
    for t in times:
        seconds[t.directory] += t.seconds
        tests[t.directory] += 1
    lines = ["| directory | tests | seconds (summed) |", "|---|---:|---:|"]
    for directory in sorted(seconds, key=seconds.__getitem__, reverse=True):
        lines.append(f"| `{directory}` | {tests[directory]} | {seconds[directory]:.0f} |")
    lines.append(f"| all | {len(times)} | {sum(seconds.values()):.0f} |")
    return "\n".join(lines)


LONG_S = 5.0


def long_tests(times: list[TestTime]) -> dict[str, float]:
    """The tests over :data:`LONG_S`, longest first, with their seconds (what ``tests/durations.json`` holds)."""
    long = sorted((t for t in times if t.seconds > LONG_S), key=lambda t: t.seconds, reverse=True)
    return {t.nodeid: round(t.seconds, 1) for t in long}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="a JUnit XML file written by pytest --junitxml")
    parser.add_argument("--slowest", type=int, default=50)
    parser.add_argument("--write-durations", metavar="PATH", help="write the tests over 5 s as JSON to PATH")
    args = parser.parse_args(argv)
    times = read_report(args.report)
    if args.write_durations:
        with open(args.write_durations, "w") as out:
            json.dump(long_tests(times), out, indent=1)
            out.write("\n")
    print(f"## The {args.slowest} slowest tests\n\n{slowest_table(times, args.slowest)}\n")
    print(f"## Time per directory\n\n{directory_table(times)}")


if __name__ == "__main__":
    main()
