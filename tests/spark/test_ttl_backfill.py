"""ttl-backfill: the rule on small in-memory DataFrames (nulls, empty input), the key encoding, and end to
end: records written by the real engine without expire_at, the job's SST ingested, a manual clock moved
past the TTL, and the engine's TTL scan marks exactly the matching records dead (reclaim then removes
them); and once through a real node with ``--node-url``, which lists the segments and dead records (a
second run finds the matching records dead and writes nothing)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from spark_jobs.config import ConfigError
from spark_jobs.jobs.ttl_backfill import main, parse_duration_ms, run_backfill, ttl_index_entries
from spark_jobs.source import engine_segment_files
from spark_jobs.transforms import backfill_match, ttl_backfill
from storage_engine import open_engine
from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.config import EngineConfig
from storage_engine.node_api.client import NodeClient
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.segment.index_keys import ttl_key
from tests.spark.conftest import NULLABLE_RECORD_SCHEMA
from tests.spark.helpers import JAN1_MS, record
from tests.support.processes import start_node

HOUR_MS = 3_600_000


def frame(spark: SparkSession, rows: list[tuple[Any, ...]]) -> DataFrame:
    return spark.createDataFrame(rows, NULLABLE_RECORD_SCHEMA)


def entries(df: DataFrame) -> set[tuple[Any, ...]]:
    return {(r["namespace"], r["shard"], r["offset"], r["expire_at"]) for r in df.collect()}


class TestRule:
    def test_tag_rule_sets_timestamp_plus_ttl(self, spark: SparkSession) -> None:
        rows = [
            record(offset=0, tags=["gdpr"]),
            record(offset=1, tags=["other", "gdpr"], shard=1),
            record(offset=2, tags=["other"]),
            record(offset=3, tags=[]),
            record(offset=4, tags=["gdpr"], expire_at=JAN1_MS + 10),  # has its own entry
            record(offset=5, tags=["gdpr"], expire_at=JAN1_MS + 10 * HOUR_MS),  # later: still left alone
        ]
        got = entries(ttl_backfill(frame(spark, rows), HOUR_MS, tag="gdpr"))
        assert got == {("orders", 0, 0, JAN1_MS + HOUR_MS), ("orders", 1, 1, JAN1_MS + HOUR_MS)}

    def test_key_prefix_rule_on_bytes(self, spark: SparkSession) -> None:
        rows = [
            record(offset=0, key=b"user:1"),
            record(offset=1, key=b"user"),  # shorter than the prefix
            record(offset=2, key=b"order:1"),
            record(offset=3, key=None),
            record(offset=4, key=b"user:\xff\x00"),
        ]
        got = entries(ttl_backfill(frame(spark, rows), 5, key_prefix=b"user:"))
        assert got == {("orders", 0, 0, JAN1_MS + 5), ("orders", 0, 4, JAN1_MS + 5)}
        every_keyed = entries(ttl_backfill(frame(spark, rows), 5, key_prefix=b""))
        assert {e[2] for e in every_keyed} == {0, 1, 2, 4}

    def test_nulls_do_not_match_or_break(self, spark: SparkSession) -> None:
        rows = [
            record(offset=0, tags=None),
            record(offset=1, tags=["gdpr"], timestamp=None),
            record(offset=2, tags=["gdpr"], shard=None),
            record(offset=None, tags=["gdpr"]),
            record(offset=4, tags=["gdpr"], namespace=None),
            record(offset=5, tags=["gdpr"], key=None, value=None),
        ]
        got = entries(ttl_backfill(frame(spark, rows), 7, tag="gdpr"))
        assert got == {(None, 0, 4, JAN1_MS + 7), ("orders", 0, 5, JAN1_MS + 7)}

    def test_a_shorter_namespace_ttl_leaves_nothing_to_add(self, spark: SparkSession) -> None:
        df = frame(spark, [record(offset=0, tags=["gdpr"])])
        assert ttl_backfill(df, HOUR_MS, tag="gdpr", namespace_ttl_ms=HOUR_MS).collect() == []
        assert len(ttl_backfill(df, HOUR_MS, tag="gdpr", namespace_ttl_ms=HOUR_MS + 1).collect()) == 1

    def test_empty_input(self, spark: SparkSession) -> None:
        assert ttl_backfill(frame(spark, []), HOUR_MS, tag="gdpr").collect() == []
        assert ttl_index_entries(ttl_backfill(frame(spark, []), HOUR_MS, tag="gdpr"), 1).collect() == []

    def test_exactly_one_rule(self) -> None:
        with pytest.raises(ValueError):
            backfill_match()
        with pytest.raises(ValueError):
            backfill_match(tag="a", key_prefix=b"b")

    def test_keys_are_the_engines_encoding_in_byte_order(self, spark: SparkSession) -> None:
        rows = [
            record(offset=300, shard=1, tags=["t"], timestamp=JAN1_MS),
            record(offset=2, shard=0, tags=["t"], timestamp=JAN1_MS + 1),
            record(offset=1, shard=2, tags=["t"], timestamp=JAN1_MS),
            record(offset=9, shard=0, tags=["t"], timestamp=JAN1_MS - 256),
        ]
        keyed = ttl_index_entries(ttl_backfill(frame(spark, rows), 100, tag="t"), 42).collect()
        keys = [bytes(r["ttl_key"]) for r in keyed]
        assert keys == sorted(keys)
        assert keys == [
            ttl_key(JAN1_MS - 156, 42, 0, 9),
            ttl_key(JAN1_MS + 100, 42, 1, 300),
            ttl_key(JAN1_MS + 100, 42, 2, 1),
            ttl_key(JAN1_MS + 101, 42, 0, 2),
        ]


@pytest.mark.parametrize(
    "text, ms", [("1h", HOUR_MS), ("30m", 1_800_000), ("45s", 45_000), ("500ms", 500), ("2d", 172_800_000), ("7", 7)]
)
def test_parse_duration(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["0", "0h", "-1h", "1w", "", "h"])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_duration_ms(text)


# -- end to end on the real engine ----------------------------------------------------------------------------
NS = "events"
POLICY = NamespacePolicy(segment_bytes=1024, reclaim_dead_ratio=0.01, retention_ms=None)
START_MS = JAN1_MS


def write_events(engine: StorageAdapter, clock: ManualClock) -> dict[tuple[int, int], dict[str, Any]]:
    """Records without expire_at (a few with one), some tagged ``gdpr``; (shard, offset) → facts."""
    engine.create_namespace(NS, 2, POLICY)
    facts: dict[tuple[int, int], dict[str, Any]] = {}
    for i in range(80):
        shard = i % 2
        gdpr = i % 3 == 0
        explicit = START_MS + 100 * HOUR_MS if i % 10 == 0 else None
        rec = NewRecord(
            value=b"v" * 60,
            key=f"user:{i}".encode() if i % 4 else None,
            tags=("gdpr",) if gdpr else ("plain",),
            expire_at=explicit,
        )
        offset = engine.append(NS, shard, [rec]).base_offset
        facts[(shard, offset)] = {"gdpr": gdpr, "explicit": explicit is not None, "timestamp": clock.now_ms()}
        clock.advance(1_000)
    return facts


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[tuple[StorageAdapter, ManualClock, Path]]:
    clock = ManualClock(START_MS)
    data_dir = tmp_path / "data"
    eng = open_engine(EngineConfig(data_dir=data_dir, adapter="segment", lifecycle_worker=False), clock=clock)
    try:
        yield eng, clock, data_dir
    finally:
        eng.close()


def sealed_offsets(engine: StorageAdapter, shard: int) -> set[int]:
    segments = engine.list_segments(NS, shard)[:-1]
    return {o for s in segments for o in range(s.base_offset, s.last_offset + 1)}


def visible(engine: StorageAdapter, shard: int) -> list[int]:
    start = engine.shard_stats(NS, shard).log_start_offset
    return [r.offset for r in engine.read(NS, shard, start, max_records=10_000).records]


def test_backfill_expires_exactly_the_matching_records(
    spark: SparkSession,
    engine: tuple[StorageAdapter, ManualClock, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    eng, clock, data_dir = engine
    facts = write_events(eng, clock)
    sealed = {(s, o) for s in range(2) for o in sealed_offsets(eng, s)}
    expected = {k for k, f in facts.items() if f["gdpr"] and not f["explicit"] and k in sealed}
    assert len(expected) >= 15 and len(sealed) < len(facts)  # the active segments are not covered

    ns_id = int(eng.ttl_index_info(NS)["ns_id"])  # type: ignore[call-overload]
    sst = eng.ttl_import_dir() / "gdpr.sst"  # the engine ingests only files of its import directory
    # The engine is open here (manual clock): it lists its segments itself, as a node would answer.
    segments = engine_segment_files(eng, data_dir, namespaces=[NS])
    summary = run_backfill(spark, segments, NS, ns_id, HOUR_MS, sst, tag="gdpr")
    assert summary["entries"] == len(expected) and summary["sst"] == str(sst) and summary["ingested"] is None
    assert summary["min_expire_at"] == min(facts[k]["timestamp"] for k in expected) + HOUR_MS

    loaded = eng.ingest_ttl_index(NS, sst.name)
    assert (loaded["ingested"], loaded["skipped"]) == (len(expected), 0)

    first = min(facts[k]["timestamp"] for k in expected) + HOUR_MS
    clock.set(first - 1)
    assert eng.expire_scan(NS, manual=True).expired_records == 0
    clock.set(max(facts[k]["timestamp"] for k in facts) + HOUR_MS)
    assert eng.expire_scan(NS, manual=True).expired_records == len(expected)
    for shard in range(2):
        stats = eng.shard_stats(NS, shard)
        assert stats.live_count == stats.record_count - sum(1 for s, _ in expected if s == shard)

    eng.reclaim(NS, manual=True)
    for shard in range(2):
        assert visible(eng, shard) == sorted(o for s, o in facts if s == shard and (s, o) not in expected)


def test_nothing_to_backfill_writes_no_file(
    spark: SparkSession,
    engine: tuple[StorageAdapter, ManualClock, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    eng, clock, data_dir = engine
    write_events(eng, clock)
    eng.close()  # no node and no engine on it now: --offline lists it
    sst = tmp_path / "none.sst"
    argv = ["--namespace", NS, "--tag", "absent", "--ttl", "10m", "--data-dir", str(data_dir), "--ns-id", "1"]
    assert main([*argv, "--offline", "--output", str(sst)], spark=spark) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["entries"] == 0 and summary["sst"] is None and not sst.exists()


def test_usage_errors(spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NODE_TOKEN", raising=False)
    base = ["--namespace", NS, "--tag", "t", "--ttl", "1h", "--data-dir", str(tmp_path)]
    with pytest.raises(ConfigError, match="--ns-id"):
        main(base, spark=spark)
    (tmp_path / "segments").mkdir()
    with pytest.raises(ConfigError, match="--offline"):
        main([*base, "--ns-id", "1"], spark=spark)  # neither a node nor --offline
    with pytest.raises(ConfigError, match="NODE_TOKEN"):
        main([*base, "--node-url", "http://127.0.0.1:9"], spark=spark)
    with pytest.raises(SystemExit):
        main(["--namespace", NS, "--tag", "t", "--key-prefix", "p", "--ttl", "1h"], spark=spark)


def test_through_a_real_node(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    node = start_node(tmp_path / "node-data", adapter="segment")
    try:
        with NodeClient(node.url, node.token) as client:
            client.create_namespace(NS, 1, POLICY)
            old = int(time.time() * 1000) - 2 * HOUR_MS  # a 1 h rule has passed for these: no sleeping
            matching = []
            for i in range(40):
                key = f"user:{i}".encode() if i % 2 else f"order:{i}".encode()
                offset = client.append(NS, 0, [NewRecord(value=b"x" * 60, key=key, timestamp=old + i)]).base_offset
                if i % 2:
                    matching.append(offset)
            segments = client.list_segments(NS, 0)
            sealed_end = segments[-1].base_offset
            expected = [o for o in matching if o < sealed_end]
            assert expected

            monkeypatch.setenv("NODE_TOKEN", node.token)
            argv = ["--namespace", NS, "--key-prefix", "user:", "--ttl", "3600000", "--node-url", node.url]
            sst = tmp_path / "node.sst"
            assert main([*argv, "--data-dir", str(node.data_dir), "--output", str(sst)], spark=spark) == 0
            summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
            assert summary["entries"] == len(expected)
            assert summary["ingested"]["ingested"] == len(expected)  # uploaded: no filesystem shared with the node
            assert summary["ingested"]["uploaded_bytes"] == sst.stat().st_size
            assert list((node.data_dir / "import").iterdir()) == []

            step = client.lifecycle_step(NS, "expire-scan", manual=True)
            assert step.expired_records == len(expected)
            stats = client.shard_stats(NS, 0)
            assert stats["record_count"] - stats["live_count"] == len(expected)

            # The same rule again: the node now counts those records dead, so they get no entry.
            again = tmp_path / "again.sst"
            assert main([*argv, "--data-dir", str(node.data_dir), "--output", str(again)], spark=spark) == 0
            summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
            assert summary["entries"] == 0 and summary["sst"] is None and not again.exists()
    finally:
        node.stop()
