"""``compaction-plan``: key compaction of a namespace computed in Spark, for namespaces whose key map does
not fit one node's memory; the node then rewrites its segments by the plan without building a map.

Input: the namespace's sealed segments as the node lists them (``--node-url``, or ``--offline`` on a
directory no node runs on: :mod:`spark_jobs.source`), their files read from ``--data-dir`` on the executors
with the engine's own reader (:mod:`spark_jobs.segments`); the active segment is never part of a plan.
Records the node marks dead are read too, marked: the engine's key map counts every stored record, so a
dead record still supersedes its key's earlier ones, but it is never kept. Spark computes key → latest
offset per shard over all of them (a window over ``(namespace, shard, key)``, i.e. a shuffle by key, not a
map on one machine) and applies the engine's keep rule
(:func:`spark_jobs.transforms.with_compaction_keep`):

- the latest record of a key is kept, earlier ones are dropped; records without a key are kept;
- dead records are dropped;
- expired records are dropped: effective expiry ``min(expire_at, timestamp + ttl)`` ≤ ``--now-ms``, with
  the namespace TTL from ``--ttl-ms`` (or, with ``--node-url``, the namespace's policy on the node);
- tombstones: a latest tombstone is **kept**. Its delete horizon starts when the node first cleans it
  (the node's cleaner checkpoint, which the files do not hold), so the plan leaves it and the node's own
  compaction drops it once ``delete_retention_ms`` has passed.

So the plan equals the node's own ``compact()`` at the same ``now`` when the plan covers what the node
would clean: a first pass (or any pass) with ``delete_retention_ms`` > 0, ``min_compaction_lag_ms`` 0
(the plan covers every sealed segment; the node would stop at the first segment newer than the lag), and
no segment sealed or rewritten between the plan and its application (the node refuses a base that is not
a sealed segment any more).

Output (under ``--output``, default ``<lake path>/compaction-plans/<namespace>``, overwritten): Parquet
rows ``namespace, shard, segment_base, keep_offsets, records, kept`` and ``_plan.json``::

    {"namespace", "now_ms", "ttl_ms", "segments", "records", "kept",
     "shards": {"<shard>": {"<segment base>": [offsets to keep, ascending]}}}

Every sealed segment is in the plan, those with nothing to drop too (so the node's cleaner checkpoint
covers the whole range), and a segment with nothing to keep has an empty list (the node drops it whole).
With ``--node-url`` the plan is submitted per shard (``NodeClient.compact_with_plan``, bearer token from
``$NODE_TOKEN``) unless ``--plan-only``, and the node's results are in the summary printed on stdout (exit
code 3 when the node refuses a shard's plan; the shards before it are compacted, and a rerun computes a
fresh plan).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.config import (
    DEFAULT_APP_NAME_PREFIX,
    ENV_NODE_TOKEN,
    ConfigError,
    JobConfig,
    add_common_arguments,
    node_token,
)
from spark_jobs.lake import LakeFileSystem, check_overwrite_target, resolve_output
from spark_jobs.registry import register
from spark_jobs.schema import SEGMENT_BASE, SHARD
from spark_jobs.segments import DEAD_MARK, SegmentFile, segment_records
from spark_jobs.session import session_for
from spark_jobs.source import add_source_arguments, data_dir_of, source_from_args
from spark_jobs.transforms import KEPT_OFFSETS, compaction_plan
from storage_engine.errors import StorageError

JOB_NAME = "compaction-plan"
PLAN_JSON = "_plan.json"
EXIT_NODE_FAILED = 3
NODE_TIMEOUT_S = 600.0  # a plan rewrites segments: far longer than an ordinary node call

Plan = dict[int, dict[int, list[int]]]  # shard → segment base → offsets to keep


def build_plan(
    spark: SparkSession, segments: Sequence[SegmentFile], namespace: str, now_ms: int, ttl_ms: int | None
) -> DataFrame:
    """The plan rows of ``namespace``'s sealed ``segments`` (lazy; no segment: empty)."""
    sealed = [s for s in segments if s.namespace == namespace and s.sealed]
    return compaction_plan(segment_records(spark, sealed, dead=DEAD_MARK), now_ms, ttl_ms)


def plan_from_rows(rows: Sequence[Any]) -> Plan:
    """``{shard: {base: [offsets]}}`` from collected plan rows."""
    plan: Plan = {}
    for row in rows:
        plan.setdefault(int(row[SHARD]), {})[int(row[SEGMENT_BASE])] = [int(o) for o in row[KEPT_OFFSETS]]
    return plan


def plan_to_json(namespace: str, now_ms: int, ttl_ms: int | None, rows: Sequence[Any]) -> dict[str, Any]:
    plan = plan_from_rows(rows)
    return {
        "namespace": namespace,
        "now_ms": now_ms,
        "ttl_ms": ttl_ms,
        "segments": len(rows),
        "records": sum(int(r["records"]) for r in rows),
        "kept": sum(int(r["kept"]) for r in rows),
        "shards": {
            str(shard): {str(base): offsets for base, offsets in sorted(bases.items())}
            for shard, bases in sorted(plan.items())
        },
    }


def submit_plan(node_url: str, token: str, namespace: str, plan: Plan) -> dict[int, dict[str, Any]]:
    """Apply the plan on the node, one shard at a time; the node's result per shard."""
    from storage_engine.node_api.client import NodeClient

    results: dict[int, dict[str, Any]] = {}
    with NodeClient(node_url, token, timeout_s=NODE_TIMEOUT_S) as client:
        for shard, keep in sorted(plan.items()):
            results[shard] = client.compact_with_plan(namespace, shard, keep)
    return results


def namespace_ttl_from_node(node_url: str, token: str, namespace: str) -> int | None:
    from storage_engine.node_api.client import NodeClient

    with NodeClient(node_url, token) as client:
        return client.get_namespace(namespace).policy.ttl_ms


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m spark_jobs {JOB_NAME}",
        description="Compute a namespace's key compaction in Spark (key → latest offset over its sealed "
        "segments, the engine's keep rule) and write, per segment, the offsets to keep; with --node-url "
        "submit it so the node rewrites the segments without building its own key map.",
    )
    parser.add_argument("--namespace", required=True, help="the namespace to plan")
    add_source_arguments(
        parser,
        node_url_help="the node that lists the sealed segments and dead records, and that the plan is submitted "
        f"to unless --plan-only (token from env {ENV_NODE_TOKEN})",
    )
    parser.add_argument(
        "--plan-only", action="store_true", help="with --node-url: write the plan, do not submit it to the node"
    )
    parser.add_argument("--now-ms", type=int, help="'now' for expiry, ms since the epoch (default: the clock)")
    parser.add_argument("--ttl-ms", type=int, help="the namespace TTL (default: none, or the node's policy)")
    parser.add_argument("--output", help="plan directory or URI (default <lake path>/compaction-plans/<namespace>)")
    add_common_arguments(parser)
    return parser


@register(JOB_NAME, "Key compaction plan computed in Spark (latest offset per key); optionally applied on the node.")
def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    args = build_parser().parse_args(argv)
    config = JobConfig.from_args(args, app_name=f"{DEFAULT_APP_NAME_PREFIX}-{JOB_NAME}")
    token = node_token(args.node_url)
    if args.ttl_ms is not None and args.ttl_ms < 1:
        raise ConfigError(f"--ttl-ms must be a positive integer, got {args.ttl_ms}")
    if args.plan_only and not args.node_url:
        raise ConfigError("--plan-only goes with --node-url (without a node nothing is submitted anyway)")
    data_dir = data_dir_of(JOB_NAME, args.data_dir)
    if data_dir is None:
        return 2
    source = source_from_args(args, data_dir)
    if not args.output:
        config.check_local_lake(JOB_NAME)
    output = resolve_output(args.output or config.lake_path / "compaction-plans" / args.namespace)
    check_overwrite_target(output, config.lake_path)
    now_ms = int(time.time() * 1000) if args.now_ms is None else args.now_ms
    ttl_ms = args.ttl_ms
    if ttl_ms is None and args.node_url:
        ttl_ms = namespace_ttl_from_node(args.node_url, token, args.namespace)

    started = time.perf_counter()
    segments = source.segments(namespaces=[args.namespace])
    with session_for(config, spark) as session:
        plan_df = build_plan(session, segments, args.namespace, now_ms, ttl_ms).orderBy(SHARD, SEGMENT_BASE)
        plan_df.coalesce(1).write.mode("overwrite").parquet(output)
        rows = session.read.parquet(output).orderBy(SHARD, SEGMENT_BASE).collect()
        body = plan_to_json(args.namespace, now_ms, ttl_ms, rows)
        LakeFileSystem(session, output).write_bytes_atomic(PLAN_JSON, json.dumps(body, sort_keys=True).encode())
    summary: dict[str, Any] = {
        "job": JOB_NAME,
        "namespace": args.namespace,
        "output": output,
        "now_ms": now_ms,
        "ttl_ms": ttl_ms,
        "segments": body["segments"],
        "records": body["records"],
        "kept": body["kept"],
        "seconds": round(time.perf_counter() - started, 3),
        "applied": None,
    }
    exit_code = 0
    if args.node_url and rows and not args.plan_only:
        try:
            applied = submit_plan(args.node_url, token, args.namespace, plan_from_rows(rows))
        except StorageError as exc:
            print(f"python -m spark_jobs {JOB_NAME}: error: the node refused the plan: {exc}", file=sys.stderr)
            summary["applied"] = False
            exit_code = EXIT_NODE_FAILED
        else:
            summary["applied"] = {
                str(shard): {k: r.get(k) for k in ("records_removed", "bytes_reclaimed", "segments_rewritten")}
                for shard, r in applied.items()
            }
    print(json.dumps(summary, sort_keys=True), flush=True)
    return exit_code
