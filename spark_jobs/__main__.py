"""``python -m spark_jobs <job> [options]``: run a registered job.

Exit codes: the job's own (0 on success); 2 for a usage error (no job, unknown job, bad option or
setting, an output that would overwrite the lake root); 1 when Java for Spark is missing.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from spark_jobs.config import (
    DEFAULT_DRIVER_MEMORY,
    DEFAULT_LAKE_PATH,
    DEFAULT_LOCAL_SHUFFLE_PARTITIONS,
    DEFAULT_LOG_LEVEL,
    DEFAULT_SPARK_MASTER,
    ENV_DRIVER_MEMORY,
    ENV_LAKE_PATH,
    ENV_LOG_LEVEL,
    ENV_SHUFFLE_PARTITIONS,
    ENV_SPARK_MASTER,
    ConfigError,
)
from spark_jobs.lake import UnsafeOutputError
from spark_jobs.registry import UnknownJobError, get_job, jobs, load_jobs
from spark_jobs.session import JavaNotFoundError

PROG = "python -m spark_jobs"
EXIT_USAGE = 2
EXIT_ENVIRONMENT = 1


def usage() -> str:
    return f"usage: {PROG} <job> [options]   ({PROG} <job> --help for a job's options)"


def help_text() -> str:
    listed = jobs()
    width = max((len(job.name) for job in listed), default=0)
    env_help = [
        (ENV_SPARK_MASTER, f"Spark master (default {DEFAULT_SPARK_MASTER})"),
        (ENV_LAKE_PATH, f"root of the Parquet lake (default {DEFAULT_LAKE_PATH})"),
        (ENV_SHUFFLE_PARTITIONS, f"spark.sql.shuffle.partitions (default {DEFAULT_LOCAL_SHUFFLE_PARTITIONS} on local)"),
        (ENV_DRIVER_MEMORY, f"spark.driver.memory (default {DEFAULT_DRIVER_MEMORY})"),
        (ENV_LOG_LEVEL, f"Spark log level (default {DEFAULT_LOG_LEVEL})"),
        ("JAVA_HOME", "Java 17+ for Spark (default: java on PATH)"),
    ]
    env_width = max(len(name) for name, _ in env_help)
    lines = [
        usage(),
        "",
        "Spark jobs of the lifecycle store.",
        "",
        "jobs:",
        *(f"  {job.name.ljust(width)}  {job.summary}" for job in listed),
        "",
        "environment (a job's options override it):",
        *(f"  {name.ljust(env_width)}  {text}" for name, text in env_help),
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    load_jobs()
    if not args:
        print(usage(), file=sys.stderr)
        print(f"error: no job given; jobs: {', '.join(job.name for job in jobs())}", file=sys.stderr)
        return EXIT_USAGE
    if args[0] in ("-h", "--help", "help"):
        print(help_text())
        return 0
    name, rest = args[0], args[1:]
    try:
        job = get_job(name)
    except UnknownJobError as exc:
        print(usage(), file=sys.stderr)
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return job.main(rest)
    except (ConfigError, UnsafeOutputError) as exc:
        print(f"{PROG} {name}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except JavaNotFoundError as exc:
        print(f"{PROG} {name}: error: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT


if __name__ == "__main__":
    sys.exit(main())
