"""Job configuration from the environment and the command line, with every default in one place.

Precedence, highest first: a command-line option, then an environment variable, then the default below.

- Spark master: ``--master``, ``SPARK_MASTER``, default ``local[*]``.
- Lake root: ``--lake-path``, ``LAKE_PATH``, default ``./var/lake``; a directory, a ``file:`` URI, or an object
  store ``s3://bucket[/prefix]`` (lake-export writes there with obstore: :mod:`spark_jobs.lake_store`; endpoint
  and credentials from ``TIER_S3_ENDPOINT`` and ``AWS_*``, as the engine's tier).
- Shuffle partitions: ``--shuffle-partitions``, ``SPARK_SHUFFLE_PARTITIONS``, default 4 on a local master
  and Spark's own on a cluster.
- Driver memory: ``--driver-memory``, ``SPARK_DRIVER_MEMORY``, default ``2g``.
- Spark log level: ``--log-level``, ``SPARK_LOG_LEVEL``, default ``WARN``.
- Any other Spark setting: ``--conf KEY=VALUE`` (repeatable), as with spark-submit.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_SPARK_MASTER = "local[*]"
DEFAULT_LAKE_PATH = "./var/lake"
DEFAULT_APP_NAME_PREFIX = "lifecycle-store"
# Two cores on the reference machine: a few partitions per core keeps a local shuffle cheap.
DEFAULT_LOCAL_SHUFFLE_PARTITIONS = 4
# Modest on a 24 GiB machine that also runs the node, Django, Celery and Redis. In local mode the
# executors live inside the driver, so this is all the heap Spark gets.
DEFAULT_DRIVER_MEMORY = "2g"
DEFAULT_LOG_LEVEL = "WARN"

LOG_LEVELS = ("ALL", "DEBUG", "ERROR", "FATAL", "INFO", "OFF", "TRACE", "WARN")

ENV_SPARK_MASTER = "SPARK_MASTER"
ENV_LAKE_PATH = "LAKE_PATH"
ENV_SHUFFLE_PARTITIONS = "SPARK_SHUFFLE_PARTITIONS"
ENV_DRIVER_MEMORY = "SPARK_DRIVER_MEMORY"
ENV_LOG_LEVEL = "SPARK_LOG_LEVEL"


class ConfigError(ValueError):
    """A setting from the environment or the command line is not usable."""


ENV_NODE_TOKEN = "NODE_TOKEN"


def node_token(node_url: str | None) -> str:
    """The node's bearer token for a job that talks to ``--node-url`` ("" without one)."""
    token = os.environ.get(ENV_NODE_TOKEN, "").strip()
    if node_url and not token:
        raise ConfigError(f"--node-url needs the node's token in {ENV_NODE_TOKEN}")
    return token


@dataclass(frozen=True)
class JobConfig:
    """What every job needs to build its SparkSession and find the lake."""

    app_name: str = DEFAULT_APP_NAME_PREFIX
    spark_master: str = DEFAULT_SPARK_MASTER
    lake_path: Path = field(default_factory=lambda: Path(DEFAULT_LAKE_PATH))
    shuffle_partitions: int | None = None  # None: DEFAULT_LOCAL_SHUFFLE_PARTITIONS on local, else Spark's
    driver_memory: str = DEFAULT_DRIVER_MEMORY
    log_level: str = DEFAULT_LOG_LEVEL
    extra_conf: Mapping[str, str] = field(default_factory=dict)
    # The lake root when it is an object store (``s3://bucket/prefix``); ``lake_path`` is then not used.
    lake_store: str | None = None

    def check_local_lake(self, job: str) -> None:
        """Refuse an object-store lake in a job that reads or writes the lake through Hadoop (no S3 connector)."""
        if self.lake_store:
            raise ConfigError(
                f"{job} reads and writes the lake through Hadoop, which has no S3 connector here: give a local "
                f"--lake-path or its --output/--input (the lake at {self.lake_store} is lake-export's)"
            )

    @property
    def is_local(self) -> bool:
        """True for ``local``, ``local[N]``, ``local[*]`` and ``local-cluster[...]`` masters."""
        return self.spark_master.strip().startswith("local")

    @property
    def effective_shuffle_partitions(self) -> int | None:
        if self.shuffle_partitions is not None:
            return self.shuffle_partitions
        return DEFAULT_LOCAL_SHUFFLE_PARTITIONS if self.is_local else None

    @classmethod
    def from_env(cls, app_name: str = DEFAULT_APP_NAME_PREFIX, env: Mapping[str, str] | None = None) -> JobConfig:
        env = os.environ if env is None else env
        lake = _non_empty(env.get(ENV_LAKE_PATH)) or DEFAULT_LAKE_PATH
        return cls(
            app_name=app_name,
            spark_master=_non_empty(env.get(ENV_SPARK_MASTER)) or DEFAULT_SPARK_MASTER,
            lake_path=Path(DEFAULT_LAKE_PATH if is_store_uri(lake) else lake),
            lake_store=lake.rstrip("/") if is_store_uri(lake) else None,
            shuffle_partitions=_parse_positive_int(env.get(ENV_SHUFFLE_PARTITIONS), ENV_SHUFFLE_PARTITIONS),
            driver_memory=_non_empty(env.get(ENV_DRIVER_MEMORY)) or DEFAULT_DRIVER_MEMORY,
            log_level=_parse_log_level(env.get(ENV_LOG_LEVEL), ENV_LOG_LEVEL) or DEFAULT_LOG_LEVEL,
        )

    @classmethod
    def from_args(
        cls, args: argparse.Namespace, app_name: str = DEFAULT_APP_NAME_PREFIX, env: Mapping[str, str] | None = None
    ) -> JobConfig:
        """The environment's config with the options of :func:`add_common_arguments` laid over it."""
        config = cls.from_env(app_name=app_name, env=env)
        changes: dict[str, object] = {}
        if args.master:
            changes["spark_master"] = args.master
        if args.lake_path:
            store = is_store_uri(args.lake_path)
            changes["lake_path"] = Path(DEFAULT_LAKE_PATH if store else args.lake_path)
            changes["lake_store"] = args.lake_path.rstrip("/") if store else None
        if args.shuffle_partitions is not None:
            changes["shuffle_partitions"] = args.shuffle_partitions
        if args.driver_memory:
            changes["driver_memory"] = args.driver_memory
        if args.log_level:
            changes["log_level"] = args.log_level
        if args.conf:
            changes["extra_conf"] = parse_conf_pairs(args.conf)
        return replace(config, **changes)  # type: ignore[arg-type]


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """Options every job accepts; unset options fall back to the environment, then the defaults."""
    group = parser.add_argument_group("Spark and lake")
    group.add_argument("--master", help=f"Spark master (env {ENV_SPARK_MASTER}, default {DEFAULT_SPARK_MASTER})")
    group.add_argument(
        "--lake-path",
        help=f"root of the Parquet lake: a directory, file: URI or s3://bucket[/prefix] (lake-export; endpoint and "
        f"credentials from env TIER_S3_ENDPOINT, AWS_*) (env {ENV_LAKE_PATH}, default {DEFAULT_LAKE_PATH})",
    )
    group.add_argument(
        "--shuffle-partitions",
        type=_positive_int,
        help=f"spark.sql.shuffle.partitions (env {ENV_SHUFFLE_PARTITIONS}, "
        f"default {DEFAULT_LOCAL_SHUFFLE_PARTITIONS} on a local master)",
    )
    group.add_argument(
        "--driver-memory", help=f"spark.driver.memory (env {ENV_DRIVER_MEMORY}, default {DEFAULT_DRIVER_MEMORY})"
    )
    group.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        help=f"Spark log level (env {ENV_LOG_LEVEL}, default {DEFAULT_LOG_LEVEL})",
    )
    group.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting, as with spark-submit; may be repeated",
    )


def is_store_uri(text: str) -> bool:
    """Whether a lake location names an object store written with obstore (``s3://…``)."""
    return urlsplit(text.strip()).scheme == "s3"


def parse_conf_pairs(pairs: Sequence[str]) -> dict[str, str]:
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--conf takes KEY=VALUE, got {pair!r}")
        conf[key.strip()] = value
    return conf


def _non_empty(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return value or None


def _parse_positive_int(raw: str | None, name: str) -> int | None:
    raw = _non_empty(raw)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a positive integer, got {raw!r}") from None
    if value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {raw!r}")
    return value


def _parse_log_level(raw: str | None, name: str) -> str | None:
    raw = _non_empty(raw)
    if raw is None:
        return None
    level = raw.upper()
    if level not in LOG_LEVELS:
        raise ConfigError(f"{name} must be one of {', '.join(LOG_LEVELS)}, got {raw!r}")
    return level


def _positive_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {raw!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {raw!r}")
    return value
