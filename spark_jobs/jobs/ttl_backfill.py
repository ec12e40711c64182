"""``ttl-backfill``: give already-written records an explicit TTL from a rule, by bulk-loading TTL-index
entries into the node, so the next TTL scans expire them.

When a namespace gains per-record TTLs from a rule (``--tag T`` or ``--key-prefix P``, with ``--ttl``:
``1h``, ``30m``, ``45s``, ``500ms``, ``2d`` or plain milliseconds) after data was written, Spark reads the
namespace's sealed segments as the node lists them (``--node-url``, or ``--offline`` on a directory no node
runs on: :mod:`spark_jobs.source`), their files read from ``--data-dir`` on the executors with the engine's
own reader and the records the node counts dead left out (they need no entry), and computes, for every
matching record without an earlier effective expiry, ``expire_at = timestamp + ttl``
(:func:`spark_jobs.transforms.ttl_backfill`: records that carry an explicit ``expire_at`` keep their own
entry, and nothing is added when the namespace TTL is no longer than the rule's). Records of the active
segment are not covered: run again once it is sealed.

The entries are the TTL index's own keys, encoded by the engine's
:func:`storage_engine.segment.index_keys.ttl_key` (``expire_at u64 | ns_id u32 | shard u16 | offset
u64``, big-endian), sorted by key in Spark and written by the driver, streaming the sorted partitions in
order, into one SST file with ``rocksdict.SstFileWriter`` (raw mode, as the index store). Values are
empty, which the TTL scan reads as "size and flags unknown: read the record": a backfilled record
carries no ``expire_at`` of its own, so if compaction or retention removes it first its entry stays
behind, and the scan must see that the record is gone rather than mark a missing offset dead.

The file is ``--output`` (default ``<lake path>/ttl-backfill/<namespace>/ttl-<now ms>.sst``, a local
path). With ``--node-url`` (bearer token from ``$NODE_TOKEN``) the job asks the node for the namespace id
(``GET /v1/namespaces/{ns}/ttl-index``) and its TTL, then uploads the file
(``PUT /v1/namespaces/{ns}/ttl-index``, the SST as the body): the node writes it into its import
directory, ingests it and removes it, so the job needs no filesystem shared with the node (the node
reads no file outside ``<data_dir>/import/``). The node validates every key, skips records already gone
or dead, and loads the rest atomically with RocksDB's ``ingest_external_file``. Without ``--node-url``,
``--ns-id`` names the namespace id and the file is left for ``StorageAdapter.ingest_ttl_index`` (write
it into the engine's ``ttl_import_dir()`` and pass its name).

What an ingested entry does: the next ``expire-scan`` after its ``expire_at`` marks the record dead (its
tag and key entries go) and ``reclaim`` then removes it from its segment. Reads judge visibility by the
record's own ``expire_at`` and the namespace TTL, so a backfilled record stays readable until reclaimed.
Running the job again with the same rule is harmless (same keys); with a different ``--ttl`` it adds a
second entry per record, so change a rule's TTL only after the first one's entries have fired.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType
from rocksdict import SstFileWriter

from spark_jobs.config import (
    DEFAULT_APP_NAME_PREFIX,
    ENV_NODE_TOKEN,
    ConfigError,
    JobConfig,
    add_common_arguments,
    node_token,
)
from spark_jobs.registry import register
from spark_jobs.schema import EXPIRE_AT, OFFSET, SHARD
from spark_jobs.segments import DEAD_DROP, SegmentFile, segment_records
from spark_jobs.session import session_for
from spark_jobs.source import add_source_arguments, data_dir_of, source_from_args
from spark_jobs.transforms import ttl_backfill
from storage_engine.errors import StorageError
from storage_engine.segment.index_keys import ttl_key
from storage_engine.segment.ttl_ingest import sst_options

JOB_NAME = "ttl-backfill"
TTL_KEY = "ttl_key"
TTL_VALUE = b""  # "read the record" (see the module docstring)
EXIT_NODE_FAILED = 3
NODE_TIMEOUT_S = 600.0
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)?\s*$")


def parse_duration_ms(text: str) -> int:
    """``"1h"`` → 3600000; units ms, s, m, h, d; a bare number is milliseconds; must be ≥ 1 ms."""
    match = _DURATION.match(text)
    value = int(match.group(1)) * _UNITS[match.group(2) or "ms"] if match else 0
    if value < 1:
        raise ConfigError(f"--ttl takes a positive duration such as 1h, 30m, 45s, 500ms or 3600000, got {text!r}")
    return value


def ttl_index_entries(entries: DataFrame, ns_id: int) -> DataFrame:
    """``ttl_key`` (the engine's encoding of each ``(expire_at, ns_id, shard, offset)``) next to the
    entries of :func:`~spark_jobs.transforms.ttl_backfill`, sorted by it (byte order, as RocksDB)."""

    # A plain Python UDF (no pandas needed) around the engine's encoder, so the format lives in one place.
    encode = F.udf(lambda at, shard, offset: ttl_key(at, ns_id, shard, offset), BinaryType(), useArrow=False)
    key = encode(F.col(EXPIRE_AT), F.col(SHARD), F.col(OFFSET))
    return entries.withColumn(TTL_KEY, key).orderBy(TTL_KEY)


def write_sst(sorted_keys: DataFrame, path: Path) -> int:
    """Stream the sorted ``ttl_key`` column to the driver, partition after partition, into an SST file
    at ``path``; returns the entries written (0: no file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    writer: SstFileWriter | None = None
    written = 0
    try:
        for row in sorted_keys.select(TTL_KEY).toLocalIterator():
            if writer is None:
                writer = SstFileWriter(options=sst_options())
                writer.open(str(tmp))
            writer[bytes(row[0])] = TTL_VALUE
            written += 1
        if writer is not None:
            writer.finish()
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return written


def run_backfill(
    spark: SparkSession,
    segments: Sequence[SegmentFile],
    namespace: str,
    ns_id: int,
    ttl_ms: int,
    output: Path,
    *,
    tag: str | None = None,
    key_prefix: bytes | None = None,
    namespace_ttl_ms: int | None = None,
) -> dict[str, Any]:
    """Compute the entries of ``namespace``'s sealed ``segments`` (dead records left out) and write the
    SST file ``output``."""
    started = time.perf_counter()
    segments = [s for s in segments if s.namespace == namespace and s.sealed]
    entries = ttl_backfill(
        segment_records(spark, segments, dead=DEAD_DROP),
        ttl_ms,
        tag=tag,
        key_prefix=key_prefix,
        namespace_ttl_ms=namespace_ttl_ms,
    )
    keyed = ttl_index_entries(entries, ns_id).cache()
    try:
        bounds = keyed.agg(F.min(EXPIRE_AT).alias("lo"), F.max(EXPIRE_AT).alias("hi")).first()
        written = write_sst(keyed, output)
    finally:
        keyed.unpersist()
    return {
        "job": JOB_NAME,
        "namespace": namespace,
        "ns_id": ns_id,
        "ttl_ms": ttl_ms,
        "rule": {"tag": tag} if tag is not None else {"key_prefix": (key_prefix or b"").decode(errors="replace")},
        "segments": len(segments),
        "entries": written,
        "min_expire_at": bounds["lo"] if bounds else None,
        "max_expire_at": bounds["hi"] if bounds else None,
        "sst": str(output) if written else None,
        "sst_bytes": output.stat().st_size if written else 0,
        "seconds": round(time.perf_counter() - started, 3),
        "ingested": None,
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m spark_jobs {JOB_NAME}",
        description="Give already-written records of a namespace an explicit TTL by a rule: compute their "
        "TTL-index entries from the sealed segments, write them as an SST file and (with --node-url) upload "
        "it to the node, which ingests it, so the next TTL scans expire them. Prints a JSON summary.",
    )
    parser.add_argument("--namespace", required=True, help="the namespace to backfill")
    rule = parser.add_mutually_exclusive_group(required=True)
    rule.add_argument("--tag", help="records carrying this tag")
    rule.add_argument("--key-prefix", help="records whose key starts with this (UTF-8) prefix")
    parser.add_argument("--ttl", required=True, help="the rule's TTL: 1h, 30m, 45s, 500ms, 2d or milliseconds")
    add_source_arguments(
        parser,
        node_url_help="the node that lists the sealed segments and dead records, and that the file is uploaded to "
        f"for ingestion (token from env {ENV_NODE_TOKEN})",
    )
    parser.add_argument("--ns-id", type=int, help="the namespace id (default: asked from --node-url)")
    parser.add_argument("--namespace-ttl-ms", type=int, help="the namespace TTL (default: the node's policy)")
    parser.add_argument("--output", help="the SST file (default <lake path>/ttl-backfill/<ns>/ttl-<now>.sst)")
    add_common_arguments(parser)
    return parser


@register(JOB_NAME, "Backfill explicit TTLs by tag or key prefix: TTL-index entries as an SST the node ingests.")
def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    from storage_engine.node_api.client import NodeClient

    args = build_parser().parse_args(argv)
    config = JobConfig.from_args(args, app_name=f"{DEFAULT_APP_NAME_PREFIX}-{JOB_NAME}")
    ttl_ms = parse_duration_ms(args.ttl)
    token = node_token(args.node_url)
    if not args.node_url and args.ns_id is None:
        raise ConfigError("give --ns-id, or --node-url to ask the node for it")
    data_dir = data_dir_of(JOB_NAME, args.data_dir)
    if data_dir is None:
        return 2
    source = source_from_args(args, data_dir)
    output_text = str(
        args.output or config.lake_path / "ttl-backfill" / args.namespace / f"ttl-{int(time.time() * 1000)}.sst"
    )
    if "://" in output_text or output_text.startswith("file:"):
        raise ConfigError(f"--output must be a local file, got {output_text!r}")
    output = Path(output_text).expanduser().resolve()

    ns_id, namespace_ttl_ms = args.ns_id, args.namespace_ttl_ms
    client = NodeClient(args.node_url, token, timeout_s=NODE_TIMEOUT_S) if args.node_url else None
    try:
        if client is not None:
            node_id = int(client.ttl_index_info(args.namespace)["ns_id"])
            if ns_id is not None and ns_id != node_id:
                raise ConfigError(f"--ns-id {ns_id} is not the node's id {node_id} for {args.namespace!r}")
            ns_id = node_id
            if namespace_ttl_ms is None:
                namespace_ttl_ms = client.get_namespace(args.namespace).policy.ttl_ms
        segments = source.segments(namespaces=[args.namespace])
        with session_for(config, spark) as session:
            summary = run_backfill(
                session,
                segments,
                args.namespace,
                ns_id,
                ttl_ms,
                output,
                tag=args.tag,
                key_prefix=args.key_prefix.encode() if args.key_prefix is not None else None,
                namespace_ttl_ms=namespace_ttl_ms,
            )
        exit_code = 0
        if client is not None and summary["sst"]:
            try:
                summary["ingested"] = client.upload_ttl_index(args.namespace, summary["sst"])
            except StorageError as exc:
                print(f"python -m spark_jobs {JOB_NAME}: error: the node refused the file: {exc}", file=sys.stderr)
                summary["ingested"] = False
                exit_code = EXIT_NODE_FAILED
    finally:
        if client is not None:
            client.close()
    print(json.dumps(summary, sort_keys=True), flush=True)
    return exit_code
