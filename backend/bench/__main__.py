"""``python -m backend.bench api|lifecycle [options] [--json]``.

Runs against its own database (a temporary SQLite file unless ``--database-url``
names another, e.g. a scratch PostgreSQL database), never the development one.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import django

from backend.bench import lifecycle as lifecycle_bench


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backend.bench")
    sub = parser.add_subparsers(dest="bench", required=True)
    api = sub.add_parser("api", help="seed 1,000 namespaces and 1,000,000 segments, time the list endpoints")
    api.add_argument("--namespaces", type=int, default=1_000)
    api.add_argument("--segments", type=int, default=1_000_000)
    api.add_argument("--requests", type=int, default=50, help="timed requests per endpoint")
    api.add_argument("--database-url", default=None, help="default: a temporary SQLite file")
    api.add_argument("--json", action="store_true")

    lifecycle_bench.add_arguments(sub.add_parser("lifecycle", help="do the lifecycle tasks keep up under load?"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix=f"{args.bench}-bench-") as scratch:
        os.environ["DATABASE_URL"] = args.database_url or f"sqlite:///{Path(scratch) / 'bench.sqlite3'}"
        if args.bench == "lifecycle":
            os.environ["CELERY_BROKER_URL"] = args.redis_url  # the bench reads the queues its worker uses
        os.environ.setdefault("VAR_DIR", scratch)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.config.settings")

        django.setup()
        if args.bench == "api":
            # Django app loading: the API bench imports models, so only after django.setup() above.
            from backend.bench import api as api_bench

            for line in api_bench.run(args):
                api_bench.emit(line, args.json)
        else:
            for line in lifecycle_bench.run(args, Path(scratch)):
                lifecycle_bench.emit(line, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
