"""``lifecycle-report``: what is stored, what has expired but is not reclaimed yet, and what compaction would
free, per namespace and UTC day, as of a given "now".

Input: the exported lake (``--source lake``, default) or the node's segment files read directly
(``--source segments``: sealed and active segments as the node lists them, ``--node-url`` or ``--offline``,
:mod:`spark_jobs.source`; the active one up to the bytes the node has committed; records the node marks dead
count as expired, not yet reclaimed, as in the engine's figures). The figures are those of
:func:`spark_jobs.transforms.lifecycle_aggregates`; namespace TTLs come from
``--ttl NS=MS`` (repeatable) and/or a JSON policies file (``--policies``: ``{"orders": 3600000}`` or
``{"orders": {"ttl_ms": 3600000, ...}}``; ``--ttl`` wins).

Output: Parquet under ``--output`` (default ``<lake path>/reports/lifecycle``, overwritten), the JSON report
next to it as ``_report.json`` (and in ``--json-output`` if given), a one-line JSON summary on stdout, and with
``--post-url`` the JSON ``{"generated_at", "rows"}`` POSTed to the control plane with
``Authorization: Token $CONTROL_PLANE_TOKEN``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
from pyspark.sql import DataFrame, Row, SparkSession

from spark_jobs.config import DEFAULT_APP_NAME_PREFIX, ConfigError, JobConfig, add_common_arguments
from spark_jobs.jobs.lake_export import DATASET
from spark_jobs.lake import LakeFileSystem, check_overwrite_target, resolve_output
from spark_jobs.registry import register
from spark_jobs.schema import DATE, EXPORT_LAKE_SCHEMA, NAMESPACE
from spark_jobs.segments import DEAD_MARK, segment_records
from spark_jobs.session import session_for
from spark_jobs.source import add_source_arguments, source_of
from spark_jobs.transforms import lifecycle_namespace_totals, lifecycle_report

JOB_NAME = "lifecycle-report"
SOURCES = ("lake", "segments")
ENV_TOKEN = "CONTROL_PLANE_TOKEN"
REPORT_JSON = "_report.json"
POST_TIMEOUT_S = 30.0
POST_ATTEMPTS = 3
EXIT_POST_FAILED = 3


class PostError(RuntimeError):
    """The control plane did not accept the report."""


def parse_ttl_pairs(pairs: Sequence[str]) -> dict[str, int]:
    """``["orders=3600000", ...]`` → ``{"orders": 3600000}``; a positive integer of ms per namespace."""
    ttls: dict[str, int] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name = name.strip()
        try:
            ttl = int(raw)
        except ValueError:
            ttl = 0
        if not sep or not name or ttl < 1:
            raise ConfigError(f"--ttl takes NAMESPACE=MILLISECONDS (a positive integer), got {pair!r}")
        ttls[name] = ttl
    return ttls


def load_policies_file(path: str | Path) -> dict[str, int]:
    """Namespace TTLs from a JSON file: ``{ns: ttl_ms}`` or ``{ns: {"ttl_ms": …, …}}`` (null = no TTL)."""
    try:
        body = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--policies {path}: {exc}") from None
    if not isinstance(body, dict):
        raise ConfigError(f"--policies {path}: expected an object mapping namespace to TTL or policy")
    ttls: dict[str, int] = {}
    for name, entry in body.items():
        ttl = entry.get("ttl_ms") if isinstance(entry, dict) else entry
        if ttl is None:
            continue
        if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 1:
            raise ConfigError(f"--policies {path}: ttl_ms of {name!r} must be a positive integer, got {ttl!r}")
        ttls[name] = ttl
    return ttls


def read_lake(spark: SparkSession, path: str) -> DataFrame:
    """The exported lake with its explicit schema (partition columns typed, not inferred)."""
    return spark.read.schema(EXPORT_LAKE_SCHEMA).parquet(path)


def _json_value(value: Any) -> Any:
    if isinstance(value, Row):
        return {k: _json_value(v) for k, v in value.asDict().items()}
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def rows_to_json(rows: Sequence[Row], now_ms: int) -> list[dict[str, Any]]:
    return [{**{k: _json_value(v) for k, v in row.asDict().items()}, "now_ms": now_ms} for row in rows]


def post_report(
    url: str, payload: Mapping[str, Any], token: str, *, transport: httpx.BaseTransport | None = None
) -> int:
    """POST ``payload`` as JSON with ``Authorization: Token <token>``; retry transport errors and 5xx.

    Returns the HTTP status; raises :class:`PostError` on a 4xx or when every attempt failed.
    """
    headers = {"Authorization": f"Token {token}"}
    last_error = ""
    with httpx.Client(timeout=POST_TIMEOUT_S, transport=transport) as client:
        for attempt in range(POST_ATTEMPTS):
            if attempt:
                time.sleep(0.5 * 2 ** (attempt - 1))
            try:
                response = client.post(url, json=payload, headers=headers)
            except httpx.HTTPError as exc:
                last_error = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code < 400:
                return response.status_code
            last_error = f"HTTP {response.status_code}: {response.text[:500]}"
            if response.status_code < 500:
                break
    raise PostError(f"POST {url} failed: {last_error}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m spark_jobs {JOB_NAME}",
        description="Lifecycle figures per namespace and UTC day: stored records and bytes, expired but not "
        "reclaimed, record lifetimes, time past expiry, duplicate keys and what compaction would reclaim.",
    )
    parser.add_argument("--source", choices=SOURCES, default="lake", help="read the lake (default) or segments")
    parser.add_argument("--input", help=f"the exported lake dataset (default <lake path>/{DATASET})")
    add_source_arguments(
        parser,
        data_dir_help="the node's data directory for --source segments, readable at the same path by every executor",
        several_nodes=True,
    )
    parser.add_argument("--now-ms", type=int, help="'now' for expiry, ms since the epoch (default: the clock)")
    parser.add_argument("--ttl", action="append", default=[], metavar="NS=MS", help="namespace TTL (repeatable)")
    parser.add_argument(
        "--namespace", action="append", default=[], help="report only this namespace (repeatable; default all)"
    )
    parser.add_argument("--policies", help="JSON file of namespace TTLs: {ns: ttl_ms} or {ns: {ttl_ms: …}}")
    parser.add_argument("--output", help="Parquet report directory or URI (default <lake path>/reports/lifecycle)")
    parser.add_argument("--json-output", help="also write the JSON report to this local file")
    parser.add_argument("--post-url", help=f"POST the JSON report here (token from env {ENV_TOKEN})")
    add_common_arguments(parser)
    return parser


@register(JOB_NAME, "Lifecycle report per namespace and day: expired ratio, lifetimes, compaction potential.")
def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    args = build_parser().parse_args(argv)
    config = JobConfig.from_args(args, app_name=f"{DEFAULT_APP_NAME_PREFIX}-{JOB_NAME}")
    ttls = load_policies_file(args.policies) if args.policies else {}
    ttls.update(parse_ttl_pairs(args.ttl))
    token = os.environ.get(ENV_TOKEN, "").strip()
    if args.post_url and not token:
        raise ConfigError(f"--post-url needs the control plane token in {ENV_TOKEN}")
    now_ms = int(time.time() * 1000) if args.now_ms is None else args.now_ms
    if not args.output or (args.source == "lake" and not args.input):
        config.check_local_lake(JOB_NAME)
    output = resolve_output(args.output or config.lake_path / "reports" / "lifecycle")
    check_overwrite_target(output, config.lake_path)
    source = resolve_output(args.input or config.lake_path / DATASET)
    segments = None
    if args.source == "segments":
        segment_source = source_of(JOB_NAME, args)
        if segment_source is None:
            return 2
        source = str(segment_source.data_dir or ",".join(n.url for n in segment_source.all_nodes))
        segments = segment_source.segments(namespaces=args.namespace, include_active=True)

    with session_for(config, spark) as session:
        records = read_lake(session, source) if segments is None else segment_records(session, segments, dead=DEAD_MARK)
        if args.namespace:  # a run for some namespaces reports on them only
            records = records.where(records[NAMESPACE].isin(args.namespace))
        report = lifecycle_report(records, now_ms=now_ms, ttls=ttls).orderBy(NAMESPACE, DATE)
        report.coalesce(1).write.mode("overwrite").parquet(output)
        # The JSON is made from what was written, so both outputs agree and the report is computed once.
        rows = session.read.parquet(output).orderBy(NAMESPACE, DATE).collect()
        totals = lifecycle_namespace_totals(records, now_ms=now_ms, ttls=ttls).orderBy(NAMESPACE).collect()
        generated_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        body = {
            "generated_at": generated_at,
            "now_ms": now_ms,
            "source": args.source,
            "input": source,
            "ttl_ms": ttls,
            "rows": rows_to_json(rows, now_ms),
            "namespaces": rows_to_json(totals, now_ms),
        }
        text = json.dumps(body, sort_keys=True, indent=1)
        LakeFileSystem(session, output).write_bytes_atomic(REPORT_JSON, text.encode())
    if args.json_output:
        Path(args.json_output).write_text(text + "\n")

    summary: dict[str, Any] = {
        "job": JOB_NAME,
        "source": args.source,
        "output": output,
        "rows": len(body["rows"]),
        "namespaces": len(body["namespaces"]),
        "now_ms": now_ms,
        "generated_at": generated_at,
        "posted": None,
    }
    exit_code = 0
    if args.post_url:
        try:
            summary["posted"] = post_report(args.post_url, {"generated_at": generated_at, "rows": body["rows"]}, token)
        except PostError as exc:
            print(f"python -m spark_jobs {JOB_NAME}: error: {exc}", file=sys.stderr)
            summary["posted"] = False
            exit_code = EXIT_POST_FAILED
    print(json.dumps(summary, sort_keys=True), flush=True)
    return exit_code
