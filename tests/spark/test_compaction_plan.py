"""compaction-plan: the keep rule on small in-memory DataFrames (nulls, empty input, dead records), and end
to end on segments written by the real engine: the plan applied through ``compact_with_plan`` leaves exactly
what the engine's own ``compact()`` leaves on an identical copy of the data (listed ``--offline``), and
through a real node that lists the segments, marks a key's latest record dead, and applies the plan."""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import BooleanType, LongType, StructField, StructType

from spark_jobs.config import ConfigError
from spark_jobs.jobs.compaction_plan import main
from spark_jobs.segments import SegmentFile, decode_segment_table
from spark_jobs.source import node_segment_files, offline_segment_files
from spark_jobs.transforms import compaction_plan, with_compaction_keep
from storage_engine import open_engine
from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.config import EngineConfig
from storage_engine.policies.policy import NamespacePolicy
from tests.spark.conftest import NULLABLE_RECORD_SCHEMA
from tests.spark.helpers import JAN1_MS, record

NOW = JAN1_MS + 10_000
PLAN_SCHEMA = StructType([*NULLABLE_RECORD_SCHEMA.fields, StructField("segment_base", LongType(), True)])
MARKED_PLAN_SCHEMA = StructType([*PLAN_SCHEMA.fields, StructField("dead", BooleanType(), True)])


def frame(spark: SparkSession, rows: list[tuple[Any, ...]]) -> DataFrame:
    return spark.createDataFrame(rows, PLAN_SCHEMA)


def seg(base: int, **fields: Any) -> tuple[Any, ...]:
    return (*record(**fields), base)


class TestKeepRule:
    def test_latest_per_key_and_shard_is_kept(self, spark: SparkSession) -> None:
        rows = [
            seg(0, offset=0, key=b"a"),
            seg(0, offset=1, key=b"b"),
            seg(0, offset=2, key=b"a"),
            seg(3, offset=3, key=b"a"),  # the latest a
            seg(3, offset=4, key=None),  # no key: kept
            seg(3, offset=5, key=None),
            seg(0, offset=0, key=b"a", shard=1),  # another shard: its own latest
            seg(0, offset=0, key=b"a", namespace="other"),
        ]
        kept = with_compaction_keep(frame(spark, rows), NOW).collect()
        got = {(r["namespace"], r["shard"], r["offset"]): r["keep"] for r in kept}
        assert got == {
            ("orders", 0, 0): False,
            ("orders", 0, 1): True,
            ("orders", 0, 2): False,
            ("orders", 0, 3): True,
            ("orders", 0, 4): True,
            ("orders", 0, 5): True,
            ("orders", 1, 0): True,
            ("other", 0, 0): True,
        }

    def test_expired_records_go_latest_tombstones_stay(self, spark: SparkSession) -> None:
        rows = [
            seg(0, offset=0, key=b"a", expire_at=NOW),  # expired at now exactly
            seg(0, offset=1, key=b"b", expire_at=NOW + 1, timestamp=NOW),  # superseded by 4
            seg(0, offset=2, key=b"c", timestamp=NOW - 500),  # expired by the namespace TTL
            seg(0, offset=3, key=b"d", value=None, timestamp=NOW - 499),  # latest tombstone: kept
            seg(0, offset=4, key=b"b", value=None, expire_at=NOW - 1),  # an expired latest still supersedes
        ]
        kept = with_compaction_keep(frame(spark, rows), NOW, ttl_ms=500).collect()
        assert {r["offset"]: r["keep"] for r in kept} == {0: False, 1: False, 2: False, 3: True, 4: False}

    def test_nulls_never_make_a_null_keep(self, spark: SparkSession) -> None:
        rows = [
            seg(0, offset=None, key=b"a"),
            seg(0, offset=1, key=b"a", timestamp=None),
            seg(0, offset=2, key=None, timestamp=None, expire_at=None, tags=None),
            seg(None, offset=3, key=b"z", timestamp=NOW),
        ]
        kept = with_compaction_keep(frame(spark, rows), NOW, ttl_ms=1000).collect()
        assert sorted((r["offset"] is None, r["offset"], r["keep"]) for r in kept) == [
            (False, 1, True),
            (False, 2, True),
            (False, 3, True),
            (True, None, False),
        ]

    def test_a_dead_record_supersedes_but_is_never_kept(self, spark: SparkSession) -> None:
        rows = [
            (*seg(0, offset=0, key=b"a"), False),
            (*seg(0, offset=1, key=b"a"), True),  # dead: still a's latest, as in the engine's key map
            (*seg(0, offset=2, key=None), True),  # dead without a key
            (*seg(0, offset=3, key=b"b"), False),
            (*seg(0, offset=4, key=b"c"), None),  # no mark: not dead
        ]
        kept = with_compaction_keep(spark.createDataFrame(rows, MARKED_PLAN_SCHEMA), NOW).collect()
        assert {r["offset"]: r["keep"] for r in kept} == {0: False, 1: False, 2: False, 3: True, 4: True}

    def test_plan_lists_every_segment_even_empty_ones(self, spark: SparkSession) -> None:
        rows = [
            seg(0, offset=0, key=b"a"),
            seg(0, offset=1, key=b"a"),
            seg(2, offset=2, key=b"a"),
            seg(2, offset=3, key=b"b"),
        ]
        plan = {
            r["segment_base"]: (list(r["keep_offsets"]), r["records"], r["kept"])
            for r in compaction_plan(frame(spark, rows), NOW).collect()
        }
        assert plan == {0: ([], 2, 0), 2: ([2, 3], 2, 2)}

    def test_empty_input_gives_an_empty_plan(self, spark: SparkSession) -> None:
        assert compaction_plan(frame(spark, []), NOW).collect() == []


# -- end to end on the real engine --------------------------------------------------------------------------
NS = "kv"
SHARDS = 2
START_MS = JAN1_MS
COMPACT_AT = START_MS + 3_600_000


def write_kv(data_dir: Path, seed: int = 11) -> None:
    """Keys k0..k11 rewritten many times over several 1 KiB segments per shard, with tombstones and
    explicit expire_at values some of which have passed at COMPACT_AT."""
    rng = random.Random(seed)
    clock = ManualClock(START_MS)
    engine = open_engine(EngineConfig(data_dir=data_dir, adapter="segment", lifecycle_worker=False), clock=clock)
    try:
        engine.create_namespace(
            NS, SHARDS, NamespacePolicy(cleanup_policy="compact", segment_bytes=1024, retention_ms=None)
        )
        for i in range(160):
            shard = i % SHARDS
            key = f"k{rng.randrange(12)}".encode()
            value = None if rng.random() < 0.1 else rng.randbytes(rng.randint(10, 60))
            expire_at = rng.choice((None, None, None, START_MS + 60_000, START_MS + 10 * 3_600_000))
            engine.append(NS, shard, [NewRecord(value=value, key=key, expire_at=expire_at, tags=("t",) * (i % 2))])
            clock.advance(1_000)
    finally:
        engine.close()


def stored(segments: list[SegmentFile]) -> dict[int, list[int]]:
    """Offsets stored in the namespace's segment files (list them with the active ones), per shard."""
    out: dict[int, list[int]] = {}
    for s in segments:
        if s.namespace == NS:
            out.setdefault(s.shard, []).extend(decode_segment_table(s).column("offset").to_pylist())
    return out


def stored_offline(data_dir: Path) -> dict[int, list[int]]:
    return stored(offline_segment_files(data_dir, include_active=True))


def open_at(data_dir: Path, now: int) -> StorageAdapter:
    return open_engine(
        EngineConfig(data_dir=data_dir, adapter="segment", lifecycle_worker=False), clock=ManualClock(now)
    )


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    root = tmp_path_factory.mktemp("plan")
    write_kv(root / "engine")
    shutil.copytree(root / "engine", root / "plan")
    yield root / "engine", root / "plan"


def test_plan_applied_equals_the_engines_own_compaction(
    spark: SparkSession, copies: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    by_engine, by_plan = copies
    before = stored_offline(by_plan)

    engine = open_at(by_engine, COMPACT_AT)
    try:
        own = engine.compact(NS, manual=True)
        own_segments = {s: [(i.base_offset, i.record_count) for i in engine.list_segments(NS, s)] for s in range(2)}
    finally:
        engine.close()
    assert own.records_removed > 0

    out = tmp_path / "plan-out"
    argv = ["--namespace", NS, "--data-dir", str(by_plan), "--now-ms", str(COMPACT_AT), "--output", str(out)]
    assert main([*argv, "--offline", "--lake-path", str(tmp_path)], spark=spark) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    body = json.loads((out / "_plan.json").read_text())
    listed = offline_segment_files(by_plan, include_active=True)
    sealed = [s for s in listed if s.namespace == NS and s.sealed]
    assert summary["segments"] == body["segments"] == len(sealed)
    assert summary["records"] == sum(len(v) for v in before.values()) - sum(
        len(decode_segment_table(s)) for s in listed if s.namespace == NS and not s.sealed
    )

    engine = open_at(by_plan, COMPACT_AT)
    try:
        removed = 0
        for shard, keep in body["shards"].items():
            result = engine.compact_with_plan(NS, int(shard), {int(b): offsets for b, offsets in keep.items()})
            removed += result.records_removed
        plan_segments = {s: [(i.base_offset, i.record_count) for i in engine.list_segments(NS, s)] for s in range(2)}
        ranges = engine.compaction_ranges(NS)
    finally:
        engine.close()

    assert removed == own.records_removed
    assert stored_offline(by_plan) == stored_offline(by_engine)
    assert plan_segments == own_segments
    assert stored_offline(by_plan) != before  # something was compacted away
    assert all(r["first_dirty"] == r["first_uncleanable"] for r in ranges)  # the checkpoint moved over it all


def test_node_url_needs_a_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spark: SparkSession) -> None:
    monkeypatch.delenv("NODE_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="NODE_TOKEN"):
        main(["--namespace", NS, "--data-dir", str(tmp_path), "--node-url", "http://127.0.0.1:9"], spark=spark)


def test_missing_data_dir_is_a_usage_error(tmp_path: Path, spark: SparkSession) -> None:
    assert main(["--namespace", NS, "--data-dir", str(tmp_path / "nope")], spark=spark) == 2


def test_plan_only_goes_with_a_node(tmp_path: Path, spark: SparkSession) -> None:
    with pytest.raises(ConfigError, match="--plan-only"):
        main(["--namespace", NS, "--data-dir", str(tmp_path), "--offline", "--plan-only"], spark=spark)


def test_plan_submitted_to_a_real_node(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The node lists the sealed segments and the dead records: ``gone``'s latest record is dead (the TTL
    scan marked it), so it supersedes ``gone``'s earlier record and goes itself, as in the node's own
    compaction, even at a "now" its own expire_at has not reached. ``--plan-only`` writes the plan and
    leaves the node alone."""
    from storage_engine.node_api.client import NodeClient
    from tests.support.processes import start_node

    node = start_node(tmp_path / "node-data", adapter="segment")
    try:
        with NodeClient(node.url, node.token) as client:
            client.create_namespace(
                NS, 1, NamespacePolicy(cleanup_policy="compact", segment_bytes=1024, retention_ms=None)
            )
            past = int(time.time() * 1000) - 3_600_000
            written: list[tuple[int, bytes]] = []
            for i in range(60):
                key = b"gone" if i in (10, 20) else f"k{i % 7}".encode()
                record = NewRecord(value=b"v" * 40, key=key, expire_at=past if i == 20 else None)
                written.append((client.append(NS, 0, [record]).base_offset, key))
            assert client.lifecycle_step(NS, "expire-scan", manual=True).expired_records == 1
            listed = node_segment_files(client, node.data_dir, include_active=True)
            dead = {o for s in listed for first, last in s.dead for o in range(first, last + 1)}
            assert dead == {written[20][0]}
            active_base = listed[-1].base_offset
            sealed = [(o, k) for o, k in written if o < active_base]
            assert written[20][0] < active_base
            latest = {k: o for o, k in sealed}
            kept = {o for o, k in sealed if latest[k] == o and o not in dead}
            expected = sorted(kept | {o for o, _ in written if o >= active_base})

            monkeypatch.setenv("NODE_TOKEN", node.token)
            argv = ["--namespace", NS, "--data-dir", str(node.data_dir), "--node-url", node.url]
            # A "now" before gone's expire_at: by its fields alone its latest record would be kept.
            argv += ["--now-ms", str(past - 1), "--output", str(tmp_path / "plan"), "--lake-path", str(tmp_path)]
            before = stored(listed)
            assert main([*argv, "--plan-only"], spark=spark) == 0
            summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
            assert summary["applied"] is None and summary["kept"] == len(kept)
            assert stored(node_segment_files(client, node.data_dir, include_active=True)) == before

            assert main(argv, spark=spark) == 0
            summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
            assert summary["applied"]["0"]["records_removed"] == len(sealed) - len(kept)
            assert sorted(stored(node_segment_files(client, node.data_dir, include_active=True))[0]) == expected
            start = client.shard_stats(NS, 0)["log_start_offset"]
            assert [r.offset for r in client.read(NS, 0, start, max_records=1000).records] == expected
    finally:
        node.stop()
