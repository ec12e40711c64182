"""``python -m backend.bench api [--namespaces N] [--segments M] [--database-url URL] [--json]``.

Runs against its own database (a temporary SQLite file unless ``--database-url``
names another, e.g. a scratch PostgreSQL database), never the development one.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backend.bench")
    sub = parser.add_subparsers(dest="bench", required=True)
    api = sub.add_parser("api", help="seed 1,000 namespaces and 1,000,000 segments, time the list endpoints")
    api.add_argument("--namespaces", type=int, default=1_000)
    api.add_argument("--segments", type=int, default=1_000_000)
    api.add_argument("--requests", type=int, default=50, help="timed requests per endpoint")
    api.add_argument("--database-url", default=None, help="default: a temporary SQLite file")
    api.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="api-bench-") as scratch:
        os.environ["DATABASE_URL"] = args.database_url or f"sqlite:///{Path(scratch) / 'bench.sqlite3'}"
        os.environ.setdefault("VAR_DIR", scratch)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.config.settings")
        import django

        django.setup()
        from backend.bench import api as api_bench

        for line in api_bench.run(args):
            api_bench.emit(line, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
