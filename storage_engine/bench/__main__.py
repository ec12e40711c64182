"""``python -m storage_engine.bench append|read|expire|compact|tier [options] [--json]``."""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from storage_engine.bench import append, compact, expire, read, tier
from storage_engine.bench.common import add_common_arguments, data_dir, emit
from storage_engine.version import package_version

# Later benches (compact) register here; a ``--node URL`` target will
# plug in where each bench opens the engine.
BENCHES: dict[str, ModuleType] = {
    "append": append,
    "read": read,
    "expire": expire,
    "compact": compact,
    "tier": tier,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m storage_engine.bench", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="bench", required=True)
    for name, module in BENCHES.items():
        bench_parser = sub.add_parser(name, help=(module.__doc__ or "").splitlines()[0])
        add_common_arguments(bench_parser)
        module.add_arguments(bench_parser)
    args = parser.parse_args(argv)
    with data_dir(args.data_dir) as root:
        for line in BENCHES[args.bench].run(args, root):
            emit(line, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
