"""``demo-parquet``: write a small, deterministic set of message records to the lake as Parquet.

The records are made here, seeded, so the job needs no storage node: it exercises the whole path a lake
export takes (explicit schema → partition columns → Hive-partitioned Parquet) and prints a one-line JSON
summary on stdout. Same options and seed → same rows, byte for byte.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.config import DEFAULT_APP_NAME_PREFIX, JobConfig, add_common_arguments
from spark_jobs.lake import check_overwrite_target, resolve_output, write_partitioned_parquet
from spark_jobs.registry import register
from spark_jobs.schema import OFFSET, RECORD_SCHEMA, SHARD
from spark_jobs.session import session_for
from spark_jobs.transforms import MS_PER_DAY, summarize_by_namespace_day, with_partition_columns
from storage_engine.errors import InvalidArgumentError
from storage_engine.rules.validation import validate_namespace_name

JOB_NAME = "demo-parquet"
DEMO_EPOCH_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
DEFAULT_NAMESPACES: tuple[str, ...] = ("audit-log", "orders", "payments")
TAG_POOL: tuple[str, ...] = ("blue", "green", "priority", "eu", "us", "retry")
TTL_CHOICES_MS: tuple[int, ...] = (3_600_000, MS_PER_DAY, 2 * MS_PER_DAY, 7 * MS_PER_DAY)

RecordRow = tuple[str, int, int, int, bytes | None, list[str], bytes | None, int | None]


@dataclass(frozen=True)
class DemoSpec:
    """What to generate: ``rows`` records over ``days`` UTC days from ``start_ms``."""

    rows: int = 1_000
    namespaces: tuple[str, ...] = DEFAULT_NAMESPACES
    shards: int = 2
    days: int = 3
    seed: int = 42
    start_ms: int = DEMO_EPOCH_MS
    key_null_ratio: float = 0.1
    tombstone_ratio: float = 0.05
    expire_at_ratio: float = 0.4

    def __post_init__(self) -> None:
        if self.rows < 0:
            raise ValueError("rows must be >= 0")
        if not self.namespaces:
            raise ValueError("at least one namespace is needed")
        if self.shards < 1 or self.days < 1:
            raise ValueError("shards and days must be >= 1")

    @property
    def end_ms(self) -> int:
        """End of the generated window (exclusive): the default "now" of the summary."""
        return self.start_ms + self.days * MS_PER_DAY


def generate_records(spec: DemoSpec) -> list[RecordRow]:
    """Message-like rows in :data:`~spark_jobs.schema.RECORD_SCHEMA` order, deterministic for a seed.

    Offsets are dense from 0 per (namespace, shard) and follow time order, as in a real shard; keys,
    values (tombstones) and ``expire_at`` are sometimes null; tags are 0–2 strings.
    """
    rng = random.Random(spec.seed)
    stamped = sorted(
        (spec.start_ms + rng.randrange(spec.days * MS_PER_DAY), rng.choice(spec.namespaces), rng.randrange(spec.shards))
        for _ in range(spec.rows)
    )
    next_offset: dict[tuple[str, int], int] = {}
    rows: list[RecordRow] = []
    for timestamp, namespace, shard in stamped:
        offset = next_offset.get((namespace, shard), 0)
        next_offset[(namespace, shard)] = offset + 1
        key = None if rng.random() < spec.key_null_ratio else f"key-{rng.randrange(50):03d}".encode()
        tags = sorted(rng.sample(TAG_POOL, k=rng.randint(0, 2)))
        value = None if rng.random() < spec.tombstone_ratio else rng.randbytes(rng.randint(8, 256))
        expire_at = timestamp + rng.choice(TTL_CHOICES_MS) if rng.random() < spec.expire_at_ratio else None
        rows.append((namespace, shard, offset, timestamp, key, tags, value, expire_at))
    return rows


def demo_dataframe(spark: SparkSession, spec: DemoSpec) -> DataFrame:
    """The generated records as a DataFrame with the explicit record schema."""
    return spark.createDataFrame(generate_records(spec), schema=RECORD_SCHEMA)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m spark_jobs {JOB_NAME}",
        description="Generate deterministic message records and write them as Parquet partitioned by "
        "namespace and UTC date (overwriting the output), then print a one-line JSON summary.",
    )
    defaults = DemoSpec()
    parser.add_argument("--output", help="output directory or URI (default <lake path>/demo)")
    parser.add_argument("--rows", type=_non_negative_int, default=defaults.rows, help="records (default %(default)s)")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="random seed (default %(default)s)")
    parser.add_argument(
        "--namespaces",
        type=_name_list,
        default=defaults.namespaces,
        help=f"comma-separated namespace names (default {','.join(defaults.namespaces)})",
    )
    parser.add_argument("--shards", type=_positive_int, default=defaults.shards, help="shards per namespace")
    parser.add_argument("--days", type=_positive_int, default=defaults.days, help="UTC days the records span")
    parser.add_argument(
        "--start-ms", type=int, default=defaults.start_ms, help="first day's start, ms (default 2024-01-01Z)"
    )
    parser.add_argument("--now-ms", type=int, help="'now' for the expired count, ms (default: end of the window)")
    parser.add_argument("--ttl-ms", type=_positive_int, help="namespace TTL for the expired count (default none)")
    add_common_arguments(parser)
    return parser


@register(JOB_NAME, "Write a small deterministic message dataset as Parquet, partitioned by namespace and date.")
def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    args = build_parser().parse_args(argv)
    config = JobConfig.from_args(args, app_name=f"{DEFAULT_APP_NAME_PREFIX}-{JOB_NAME}")
    spec = DemoSpec(
        rows=args.rows,
        namespaces=args.namespaces,
        shards=args.shards,
        days=args.days,
        seed=args.seed,
        start_ms=args.start_ms,
    )
    now_ms = spec.end_ms if args.now_ms is None else args.now_ms
    if not args.output:
        config.check_local_lake(JOB_NAME)
    output = resolve_output(args.output or config.lake_path / "demo")
    check_overwrite_target(output, config.lake_path)

    with session_for(config, spark) as session:
        records = with_partition_columns(demo_dataframe(session, spec))
        write_partitioned_parquet(records, output, sort_columns=(SHARD, OFFSET), mode="overwrite")
        summary = summarize_by_namespace_day(records, now_ms=now_ms, ttl_ms=args.ttl_ms).collect()

    result = {
        "job": JOB_NAME,
        "output": output,
        "rows_written": sum(row["records"] for row in summary),
        "partitions": len(summary),
        "bytes": sum(row["bytes"] for row in summary),
        "expired": sum(row["expired"] for row in summary),
        "now_ms": now_ms,
        "seed": spec.seed,
    }
    print(json.dumps(result, sort_keys=True), flush=True)
    return 0


def _positive_int(raw: str) -> int:
    value = _non_negative_int(raw)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {raw!r}")
    return value


def _non_negative_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {raw!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {raw!r}")
    return value


def _name_list(raw: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(name.strip() for name in raw.split(",") if name.strip()))
    if not names:
        raise argparse.ArgumentTypeError("needs at least one namespace name")
    for name in names:
        try:
            validate_namespace_name(name)
        except InvalidArgumentError as exc:
            raise argparse.ArgumentTypeError(f"namespace {name!r}: {exc.rule}") from None
    return names
