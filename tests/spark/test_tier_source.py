"""Spark and the object-store tier (issue 19): lake-export reads segments a node offloaded (and whose local
copies it dropped) from the store through the engine's reader, on a machine without the node's data directory;
a namespace whose shards are on two nodes is exported whole; the lake itself is written to S3 and read back.

Real engines write and offload the data (``file://`` tiers and SeaweedFS), real nodes list it, real Spark
(local) exports it; the ground truth is what the nodes serve through the engine."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from pyspark.sql import SparkSession

from spark_jobs.config import DEFAULT_LAKE_PATH, ConfigError, JobConfig
from spark_jobs.jobs import lake_export
from spark_jobs.jobs.lake_export import build_parser, fingerprint, main, pyarrow_partitioning
from spark_jobs.lake import LakeFileSystem
from spark_jobs.lake_store import ObjectLake, swap_in_store
from spark_jobs.manifest import MANIFEST_DIR, load_manifest
from spark_jobs.segments import SegmentFile, decode_segment_table
from spark_jobs.source import node_segment_files, node_tokens, source_from_args
from storage_engine import open_engine
from storage_engine.api import NewRecord, Record, SegmentTier
from storage_engine.clock import ManualClock
from storage_engine.config import EngineConfig
from storage_engine.node_api.client import NodeClient
from storage_engine.policies.policy import NamespacePolicy
from tests.spark.engine_data import HOUR_MS, START_MS
from tests.spark.helpers import DAY_MS
from tests.storage_engine.tier_util import BUCKET, Seaweed, Tier, seaweed_fixture, tier_fixture
from tests.support.processes import NodeProc, start_node

pytestmark = pytest.mark.spark

__all__ = ["seaweed_fixture", "tier_fixture"]

NS = "orders"  # 2 shards, local copies dropped after the offload: remote
KEPT = "audit"  # 1 shard, local copies kept: both
# (namespace, shard, offset, timestamp, key, tags, headers as sorted pairs, value, expire_at)
Row = tuple[object, ...]


def _policy(local_retention_ms: int | None) -> NamespacePolicy:
    # segment_ms: far beyond the data's age (2023), so the node never seals an idle active segment on its own
    return NamespacePolicy(
        segment_bytes=1024,
        segment_ms=20 * 365 * DAY_MS,
        retention_ms=None,
        remote_storage_enabled=True,
        local_retention_ms=local_retention_ms,
    )


def write_offloaded(
    data_dir: Path, tier_uri: str, shards: dict[str, set[int]], *, batches: int = 12, seed: int = 5
) -> None:
    """Namespaces ``orders`` (2 shards) and ``audit`` (1) with remote storage; records appended to the
    ``shards`` given (a node hosts only its placed shards), every sealed segment offloaded; ``orders`` drops
    its local copies (remote), ``audit`` keeps them (both). Some records expire (an explicit past expire_at)."""
    rng = random.Random(seed)
    clock = ManualClock(START_MS)
    engine = open_engine(EngineConfig(data_dir=data_dir, adapter="segment", tier_uri=tier_uri), clock=clock)
    try:
        engine.create_namespace(NS, 2, _policy(0))
        engine.create_namespace(KEPT, 1, _policy(None))
        for i in range(batches):
            for name, placed in shards.items():
                for shard in sorted(placed):
                    ts = START_MS + i * HOUR_MS // 2 + rng.randrange(1000)
                    batch = []
                    for _ in range(rng.randint(1, 4)):
                        key = None if rng.random() < 0.3 else f"k{rng.randrange(5)}".encode()
                        value = None if key is not None and rng.random() < 0.1 else rng.randbytes(rng.randint(20, 120))
                        expire_at = ts + 30_000 if rng.random() < 0.3 else None
                        headers = (("trace", rng.randbytes(4)),) if rng.random() < 0.4 else ()
                        tags = tuple(rng.sample(("eu", "us", "vip", "é"), k=rng.randint(0, 2)))
                        batch.append(
                            NewRecord(
                                value=value, key=key, timestamp=ts, tags=tags, headers=headers, expire_at=expire_at
                            )
                        )
                    engine.append(name, shard, batch)
            clock.set(START_MS + (i + 1) * HOUR_MS // 2)
        while engine.offload(None).more:
            pass
    finally:
        engine.close()


@contextmanager
def serving(data_dir: Path, tier_uri: str, token: str = "test-token") -> Iterator[tuple[NodeProc, NodeClient]]:
    node = start_node(data_dir, token=token, extra=["--tier-uri", tier_uri])
    try:
        with NodeClient(node.url, node.token) as client:
            yield node, client
    finally:
        node.stop()


def mark_expired_dead(client: NodeClient) -> None:
    for ns in (NS, KEPT):
        while client.lifecycle_step(ns, "expire-scan", manual=True).more:
            pass


def _row(ns: str, shard: int, r: Record) -> Row:
    pairs = r.headers.items() if isinstance(r.headers, dict) else r.headers
    key, value = r.key, r.value
    return (
        ns,
        shard,
        r.offset,
        r.timestamp,
        None if key is None else bytes(key),
        tuple(r.tags),
        tuple(sorted((k, bytes(v)) for k, v in pairs)),
        None if value is None else bytes(value),
        r.expire_at,
    )


def engine_truth(client: NodeClient, segments: list[SegmentFile]) -> set[Row]:
    """Every record of the sealed ``segments`` the node serves through the engine (reads leave dead and
    expired records out), as rows."""
    rows: set[Row] = set()
    last: dict[tuple[str, int], int] = {}
    for s in segments:
        last[(s.namespace, s.shard)] = max(last.get((s.namespace, s.shard), -1), s.last_offset)
    for (ns, shard), last_offset in last.items():
        offset = 0
        while offset <= last_offset:
            got = client.read(ns, shard, offset, max_records=1000)
            rows |= {_row(ns, shard, r) for r in got.records if r.offset <= last_offset}
            if got.next_offset <= offset:
                break
            offset = got.next_offset
    return rows


def listed_truth(segments: list[SegmentFile]) -> set[Row]:
    """The records of ``segments`` the node does not count dead, decoded as an executor does."""
    rows: set[Row] = set()
    for s in segments:
        for r in decode_segment_table(s).to_pylist():
            rows.add(_lake_row(r))
    return rows


def _lake_row(r: dict[str, Any]) -> Row:
    headers = r["headers"]
    pairs = headers.items() if isinstance(headers, dict) else headers
    return (
        r["namespace"],
        r["shard"],
        r["offset"],
        r["timestamp"],
        r["key"],
        tuple(r["tags"]),
        tuple(sorted((k, bytes(v)) for k, v in pairs)),
        r["value"],
        r["expire_at"],
    )


def lake_rows(lake: Path) -> list[Row]:
    table = ds.dataset(str(lake), format="parquet", partitioning=pyarrow_partitioning()).to_table()
    return [_lake_row(r) for r in table.to_pylist()]


def download_lake(store: ObjectLake, into: Path) -> Path:
    """Every object of a lake in an object store, copied to ``into`` (Spark has no S3 connector here)."""
    for obj in store.tier.list(""):
        target = into / obj.key
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(store.tier.get(obj.key))
    return into


def export(spark: SparkSession, capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    assert main(argv, spark=spark) == 0
    out = capsys.readouterr().out.strip().splitlines()
    return dict(json.loads(out[-1]))


# -- one node, every segment in the store ---------------------------------------------------------------------


def test_export_from_the_tier_without_the_data_dir_every_record_dead_ones_out(
    spark: SparkSession,
    tier: Tier,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A node whose namespaces are offloaded (orders: local copies dropped; audit: kept), exported from a
    machine without its data directory (``--data-dir ''``): every sealed segment read from the store, each
    record once and field for field what the engine serves; after the TTL scan marks records dead, the next
    run replaces their leaves and the lake holds exactly what the engine serves. On S3 the lake is written to
    the store as well and read back."""
    data_dir = tmp_path / "data"
    write_offloaded(data_dir, tier.uri, {NS: {0, 1}, KEPT: {0}})
    lake_uri = f"s3://{BUCKET}/{uuid.uuid4().hex}/records" if tier.kind == "s3" else str(tmp_path / "lake")
    with serving(data_dir, tier.uri) as (node, client):
        monkeypatch.setenv("NODE_TOKEN", node.token)
        segments = node_segment_files(client, None)
        tiers = {(s.namespace, s.tier) for s in segments}
        assert tiers == {(NS, "remote"), (KEPT, "both")}, tiers
        assert all(s.from_tier and s.readable and s.path == "" for s in segments)
        for s in segments:
            if s.tier == "remote":
                assert not list(
                    (data_dir / "segments").joinpath(*s.key.split("/")[:2]).glob(f"{s.base_offset:020d}*.log")
                )

        argv = ["--data-dir", "", "--node-url", node.url, "--output", lake_uri, "--table", ""]
        first = export(spark, capsys, argv)
        assert first["segments_new"] == first["segments_sealed"] == first["segments_from_tier"] == len(segments)
        assert first["segments_unreadable"] == 0 and first["table"] is None
        lake = download_lake(ObjectLake(lake_uri), tmp_path / "copy") if tier.kind == "s3" else Path(lake_uri)
        if tier.kind == "s3":
            assert first["bytes_uploaded"] > 0 and not (lake / "_staging").exists()
            assert (lake / MANIFEST_DIR / "manifest-0000000001.json").exists()
        rows = lake_rows(lake)
        assert len(rows) == len(set(rows)) == first["records_written"]
        assert set(rows) == listed_truth(segments)

        # The TTL scan marks the expired records dead: their leaves are replaced, dead records leave the lake.
        mark_expired_dead(client)
        after = node_segment_files(client, None)
        assert any(s.dead for s in after)
        second = export(spark, capsys, argv)
        # (the node's own TTL scan may have marked some dead before the first run: those are unchanged now)
        assert 0 < second["segments_replaced"] <= sum(1 for s in after if s.dead) and second["segments_new"] == 0
        truth = engine_truth(client, after)
        assert all(r[8] is None for r in truth)  # every explicit expire_at has passed
        lake = download_lake(ObjectLake(lake_uri), tmp_path / "copy2") if tier.kind == "s3" else Path(lake_uri)
        rows = lake_rows(lake)
        assert len(rows) == len(set(rows))
        assert set(rows) == truth == listed_truth(after)
        if tier.kind == "s3":  # read back by Spark too, from the copy
            assert spark.read.parquet(str(lake)).count() == len(truth)

        # Nothing changed: nothing exported again.
        third = export(spark, capsys, argv)
        assert third["segments_exported"] == 0 and third["segments_unchanged"] == len(after)


def test_both_segments_read_from_file_or_store_decode_alike_and_fingerprint_as_one_version(
    tier: Tier, tmp_path: Path
) -> None:
    """A ``both`` segment: the file with the data directory here, the object with ``--prefer-tier`` (or
    without it); the same rows either way, and the two fingerprints are one version (no re-export when the
    local copy goes)."""
    data_dir = tmp_path / "data"
    write_offloaded(data_dir, tier.uri, {KEPT: {0}, NS: {0}}, batches=6)
    with serving(data_dir, tier.uri) as (_node, client):
        local = node_segment_files(client, data_dir, namespaces=[KEPT])
        stored = node_segment_files(client, data_dir, namespaces=[KEPT], prefer_tier=True)
        remote = node_segment_files(client, data_dir, namespaces=[NS])
    assert local and all(s.tier == SegmentTier.BOTH.value and not s.from_tier for s in local)
    assert all(s.from_tier and s.object_key for s in stored)
    assert remote and all(s.from_tier and s.tier == "remote" for s in remote)  # no local file to read
    for a, b in zip(local, stored, strict=True):
        assert decode_segment_table(a).equals(decode_segment_table(b))
        assert fingerprint(a).same_version(fingerprint(b)) and fingerprint(a) != fingerprint(b)
    # a local copy dropped after the listing: the executor falls back to the object
    gone = local[0]
    Path(gone.path).unlink()
    assert decode_segment_table(gone).equals(decode_segment_table(stored[0]))


# -- two nodes hosting one namespace --------------------------------------------------------------------------


def test_a_namespace_on_two_nodes_is_exported_whole(
    spark: SparkSession,
    seaweed: Seaweed,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """orders/0 on node A, orders/1 and audit/0 on node B, each node with its own prefix in one S3 bucket. The
    job runs where A's data directory is (A's ``both`` segments read locally) but B's is not: B's segments
    come from the store. A sealed segment B has not offloaded yet is unreadable here: reported, left out,
    exported by the next run once B offloads it. The lake then holds both nodes' records, as they serve them."""
    for name, value in seaweed.env.items():
        monkeypatch.setenv(name, value)
    prefix = uuid.uuid4().hex
    tier_a, tier_b = f"s3://{BUCKET}/{prefix}/node-a", f"s3://{BUCKET}/{prefix}/node-b"
    dir_a, dir_b = tmp_path / "a" / "data", tmp_path / "b" / "data"
    write_offloaded(dir_a, tier_a, {NS: {0}}, seed=11)
    write_offloaded(dir_b, tier_b, {NS: {1}, KEPT: {0}}, seed=12)
    lake = tmp_path / "lake"
    with serving(dir_a, tier_a, "token-a") as (node_a, client_a), serving(dir_b, tier_b, "token-b") as (node_b, b):
        monkeypatch.delenv("NODE_TOKEN", raising=False)
        monkeypatch.setenv("NODE_TOKENS", json.dumps({node_a.url: "token-a", node_b.url + "/": "token-b"}))
        # B seals more of orders/1 without offloading it yet: only on B's disk.
        for i in range(40):
            b.append(NS, 1, [NewRecord(value=b"late-%d" % i + b"x" * 100, key=b"late")])
        mark_expired_dead(client_a)
        mark_expired_dead(b)
        local_only = [s for s in node_segment_files(b, None) if s.tier == "local" and s.sealed]
        assert local_only and not any(s.readable for s in local_only)

        argv = ["--data-dir", str(dir_a), "--node-url", node_a.url, "--node-url", node_b.url, "--output", str(lake)]
        argv += ["--table", ""]
        first = export(spark, capsys, argv)
        assert first["segments_unreadable"] == len(local_only)
        assert set(first["unreadable"]) == {s.key for s in local_only}
        assert not {s.key for s in local_only} & set(first["replaced"])

        while b.lifecycle_step(NS, "offload").more:
            pass
        second = export(spark, capsys, argv)
        assert second["segments_unreadable"] == 0 and second["segments_new"] == len(local_only)

        seg_a = node_segment_files(client_a, dir_a)
        seg_b = node_segment_files(b, None)
        assert {s.shard for s in seg_a if s.namespace == NS} == {0}
        assert {s.shard for s in seg_b if s.namespace == NS} == {1}
        truth = engine_truth(client_a, seg_a) | engine_truth(b, seg_b)
        rows = lake_rows(lake)
        assert len(rows) == len(set(rows))
        assert set(rows) == truth
        assert {(r[0], r[1]) for r in rows} == {(NS, 0), (NS, 1), (KEPT, 0)}


# -- options ----------------------------------------------------------------------------------------------------


def test_node_tokens_and_node_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env = {"NODE_TOKENS": json.dumps({"http://a:1/": "ta"}), "NODE_TOKEN": "fallback"}
    assert node_tokens(["http://a:1", "http://b:2"], env) == {"http://a:1": "ta", "http://b:2": "fallback"}
    with pytest.raises(ConfigError, match="no token for the node http://b:2"):
        node_tokens(["http://b:2"], {"NODE_TOKENS": "{}"})
    with pytest.raises(ConfigError, match="JSON object"):
        node_tokens(["http://b:2"], {"NODE_TOKENS": "[1]"})

    monkeypatch.setenv("NODE_TOKENS", json.dumps({"http://a:1": "ta", "http://b:2": "tb"}))
    args = build_parser().parse_args(
        [
            *("--node-url", "http://a:1", "--node-url", "http://b:2", "--node-data-dir", f"http://b:2={tmp_path}"),
            *("--tier-uri", "s3://bucket/x", "--prefer-tier"),
        ]
    )
    source = source_from_args(args, tmp_path / "a")
    assert [(n.url, n.token, n.data_dir) for n in source.all_nodes] == [
        ("http://a:1", "ta", tmp_path / "a"),
        ("http://b:2", "tb", tmp_path),
    ]
    assert source.prefer_tier and source.tier_uri == "s3://bucket/x"
    assert "tb" not in repr(source)  # tokens stay out of logs
    bad = build_parser().parse_args(["--node-url", "http://a:1", "--node-data-dir", "http://c:3=/x"])
    with pytest.raises(ConfigError, match="not a --node-url"):
        source_from_args(bad, None)


def test_object_lake_swap_replaces_a_leaf_in_one_put(tmp_path: Path) -> None:
    """The object-store swap: a new leaf appears, a replaced leaf keeps its object name (one PUT replaces it),
    an emptied leaf goes; each upload is checked by its size."""
    store = ObjectLake((tmp_path / "lake").as_uri())
    leaf = "namespace=a/date=2024-01-01/shard=0/segment_base=0"
    gone = "namespace=a/date=2024-01-02/shard=0/segment_base=0"
    store.tier.put(f"{leaf}/part-old.parquet", b"old rows")
    store.tier.put(f"{gone}/part-old.parquet", b"old rows")
    staged = tmp_path / "staged"
    for rel in (f"{leaf}/part-new.parquet", "namespace=b/date=2024-01-01/shard=1/segment_base=5/part-new.parquet"):
        (staged / rel).parent.mkdir(parents=True, exist_ok=True)
        (staged / rel).write_bytes(b"new rows " + rel.encode())
    (staged / "_SUCCESS").write_bytes(b"")
    (staged / leaf / ".part-new.parquet.crc").write_bytes(b"crc")
    current = {leaf: ["part-old.parquet"], gone: ["part-old.parquet"]}
    counts, uploaded = swap_in_store(store, staged, current)
    assert (counts.added, counts.replaced, counts.emptied) == (1, 1, 1)
    files = dict(store.data_files())
    assert set(files) == {
        f"{leaf}/part-old.parquet",
        "namespace=b/date=2024-01-01/shard=1/segment_base=5/part-new.parquet",
    }
    assert store.read_bytes(f"{leaf}/part-old.parquet").startswith(b"new rows ")
    assert uploaded == sum(files.values())
    store.write_bytes_atomic("_manifest/manifest-0000000001.json", b"{}")
    with pytest.raises(FileExistsError):
        store.write_bytes_atomic("_manifest/manifest-0000000001.json", b"{}")
    assert store.list_names("_manifest") == ["manifest-0000000001.json"]
    assert "_manifest/manifest-0000000001.json" not in files


def test_an_object_that_vanishes_while_read_leaves_its_segment_for_the_next_run(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An object deleted (retention) or replaced under a new generation (a rewrite) after the driver
    fingerprinted it: the executor reads nothing, the run sees the object gone after the write, leaves the
    segment's staged rows out and out of the manifest (the lake keeps what it had), and exports the rest."""
    tier_uri = (tmp_path / "tier").as_uri()
    data_dir = tmp_path / "data"
    write_offloaded(data_dir, tier_uri, {NS: {0}}, batches=6)
    with serving(data_dir, tier_uri) as (_node, client):
        segments = node_segment_files(client, None)
    victim = segments[0]
    assert victim.from_tier and victim.object_key

    real = lake_export.fingerprints_of

    def fingerprint_then_lose_one(listed: list[SegmentFile]) -> dict[SegmentFile, object]:
        found = real(listed)
        (tmp_path / "tier" / str(victim.object_key)).unlink()
        return found  # type: ignore[return-value]

    monkeypatch.setattr(lake_export, "fingerprints_of", fingerprint_then_lose_one)
    lake = tmp_path / "lake"
    result = lake_export.run_export(spark, segments, str(lake))
    assert result.vanished == [victim.key] and victim.key not in result.exported
    assert len(result.exported) == len(segments) - 1
    manifest = load_manifest(LakeFileSystem(spark, str(lake)))
    assert victim.key not in manifest.segments and len(manifest.segments) == len(segments) - 1
    rows = lake_rows(lake)
    assert set(rows) == listed_truth(segments[1:]) and len(rows) == result.records_written


def test_an_s3_lake_path_is_lake_exports_and_refused_by_jobs_that_go_through_hadoop() -> None:
    args = build_parser().parse_args(["--lake-path", "s3://bucket/lake/", "--node-url", "http://a:1"])
    config = JobConfig.from_args(args)
    assert config.lake_store == "s3://bucket/lake" and config.lake_path == Path(DEFAULT_LAKE_PATH)
    assert JobConfig.from_env(env={"LAKE_PATH": "s3://bucket/x"}).lake_store == "s3://bucket/x"
    assert JobConfig.from_env(env={"LAKE_PATH": "/srv/lake"}).lake_store is None
    with pytest.raises(ConfigError, match="no S3 connector"):
        config.check_local_lake("lifecycle-report")
