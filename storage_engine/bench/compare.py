"""Before and after: one benchmark run on two checkouts, interleaved, in one process tree.

``python -m storage_engine.bench.compare --before DIR [--after DIR] [--rounds N] -- BENCH ARGS...``
runs ``python -m storage_engine.bench BENCH ARGS... --json`` in each checkout (its own code on
``PYTHONPATH``) ``N`` times, alternating before/after so both see the same machine load, and prints one
JSON object per result line of the benchmark: the headline figure (throughput, or time when the
benchmark reports only that) of each run, the medians and after ÷ before (above 1: faster for a
throughput, slower for a time). A restructuring must keep every ratio within noise of 1.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HIGHER_IS_BETTER = ("msgs_per_s", "mb_per_s", "reads_per_s")
LOWER_IS_BETTER = ("seconds", "p99_ms", "p50_ms")


def run_once(tree: Path, bench: list[str]) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-m", "storage_engine.bench", *bench, "--json"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def identity(row: dict[str, Any]) -> str:
    """What a result line measures (the same line of both checkouts has the same identity)."""
    keys = ("bench", "system", "adapter", "stored", "records", "engine")
    return "/".join(str(row[k]) for k in keys if k in row)


def headline(row: dict[str, Any]) -> tuple[str, float] | None:
    for key in (*HIGHER_IS_BETTER, *LOWER_IS_BETTER):
        if isinstance(row.get(key), int | float):
            return key, float(row[key])
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the checkout to compare against")
    parser.add_argument("--after", type=Path, default=Path.cwd(), help="the checkout under test (default: here)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each checkout, interleaved (default 3)")
    parser.add_argument("bench", nargs=argparse.REMAINDER, help="-- then the benchmark and its arguments")
    args = parser.parse_args(argv)
    bench = [a for a in args.bench if a != "--"]
    if not bench:
        parser.error("name a benchmark after --, e.g. -- append --records 100000")
    runs: dict[str, dict[str, list[float]]] = {}
    metric: dict[str, str] = {}
    for _ in range(args.rounds):
        for side, tree in (("before", args.before), ("after", args.after)):
            for row in run_once(tree.resolve(), bench):
                found = headline(row)
                if found is None:
                    continue
                name = identity(row)
                metric[name] = found[0]
                runs.setdefault(name, {"before": [], "after": []})[side].append(found[1])
    for name, sides in runs.items():
        if not (sides["before"] and sides["after"]):
            continue
        before, after = statistics.median(sides["before"]), statistics.median(sides["after"])
        print(
            json.dumps(
                {
                    "result": name,
                    "metric": metric[name],
                    "before": sides["before"],
                    "after": sides["after"],
                    "median_before": before,
                    "median_after": after,
                    "after_vs_before": round(after / before, 3) if before else None,
                    "higher_is_better": metric[name] in HIGHER_IS_BETTER,
                }
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
