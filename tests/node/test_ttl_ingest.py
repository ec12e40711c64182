"""Bulk-loading the TTL index from an SST file (``ingest_ttl_index``): every adapter in process with a
manual clock, and a real node through ``NodeClient`` (``PUT /v1/namespaces/{ns}/ttl-index`` uploads,
``POST .../ttl-index/ingest`` names a file of the node's import directory).

The SST files are written here with ``rocksdict.SstFileWriter`` and the engine's own key encoder
(``ttl_key``), as the ``ttl-backfill`` Spark job writes them. The engine reads them only from its
import directory (``<data_dir>/import/``), by bare name.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from rocksdict import SstFileWriter

from storage_engine import open_engine
from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.config import EngineConfig
from storage_engine.errors import InvalidArgumentError, RemoteError
from storage_engine.node_api.client import NodeClient
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.segment.index_keys import ttl_key
from storage_engine.segment.ttl_ingest import ForeignTTLEntryError, sst_options

HOUR_MS = 3_600_000
START_MS = 1_704_067_200_000
NS = "events"
SHARDS = 2
POLICY = NamespacePolicy(segment_bytes=1024, reclaim_dead_ratio=0.01, retention_ms=None)


def write_sst(path: Path, entries: Sequence[tuple[int, int, int, int]], value: bytes = b"") -> Path:
    """An SST of TTL entries ``(expire_at, ns_id, shard, offset)``, sorted by key as RocksDB needs."""
    writer = SstFileWriter(options=sst_options())
    writer.open(str(path))
    for key in sorted(ttl_key(*e) for e in entries):
        writer[key] = value
    writer.finish()
    return path


@pytest.fixture(params=["memory", "segment", "rocksdb"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[StorageAdapter, ManualClock]]:
    clock = ManualClock(START_MS)
    config = EngineConfig(data_dir=tmp_path / "data", adapter=request.param, lifecycle_worker=False)
    eng = open_engine(config, clock=clock)
    try:
        yield eng, clock
    finally:
        eng.close()


def populate(eng: StorageAdapter, clock: ManualClock) -> dict[int, dict[int, bool]]:
    """Per shard: offset → tagged ``gdpr``; no record has an expire_at. The last records of each
    shard are untagged, so every tagged record ends up in a sealed segment."""
    eng.create_namespace(NS, SHARDS, POLICY)
    tagged: dict[int, dict[int, bool]] = {s: {} for s in range(SHARDS)}
    for i in range(60):
        shard = i % SHARDS
        is_tagged = i % 3 == 0 and i < 48
        record = NewRecord(
            value=b"v" * 80, key=f"k{i}".encode() if i % 2 else None, tags=("gdpr",) if is_tagged else ("keep",)
        )
        offset = eng.append(NS, shard, [record]).base_offset
        tagged[shard][offset] = is_tagged
        clock.advance(1000)
    return tagged


def importable(eng: StorageAdapter, name: str, entries: Sequence[tuple[int, int, int, int]], value: bytes = b"") -> str:
    """Write an SST into the engine's import directory; returns the name to ingest it by."""
    write_sst(eng.ttl_import_dir() / name, entries, value)
    return name


def visible(eng: StorageAdapter, shard: int) -> list[int]:
    start = eng.shard_stats(NS, shard).log_start_offset
    return [r.offset for r in eng.read(NS, shard, start, max_records=10_000).records]


def test_ingested_entries_expire_exactly_the_named_records(
    engine: tuple[StorageAdapter, ManualClock], tmp_path: Path
) -> None:
    eng, clock = engine
    tagged = populate(eng, clock)
    info = eng.ttl_index_info(NS)
    assert info["shards"] == SHARDS and info["end_offsets"] == [30, 30]
    ns_id = int(info["ns_id"])  # type: ignore[call-overload]
    wanted = {(s, o) for s, offsets in tagged.items() for o, t in offsets.items() if t}
    entries = [(START_MS + HOUR_MS, ns_id, s, o) for s, o in sorted(wanted)]
    name = importable(eng, "ttl.sst", entries)

    result = eng.ingest_ttl_index(NS, name)
    assert (result["entries"], result["ingested"], result["skipped"]) == (len(wanted), len(wanted), 0)
    assert result["min_expire_at"] == result["max_expire_at"] == START_MS + HOUR_MS
    assert result["file"] == name
    assert (eng.ttl_import_dir() / name).exists()  # copied, not moved

    assert eng.expire_scan(NS, manual=True).expired_records == 0  # not due yet
    assert eng.verify(NS).ok, eng.verify(NS).problems  # waiting entries for records without an expire_at
    clock.set(START_MS + HOUR_MS)
    scan = eng.expire_scan(NS, manual=True)
    assert scan.expired_records == len(wanted)
    for shard in range(SHARDS):
        stats = eng.shard_stats(NS, shard)
        assert stats.live_count == stats.record_count - sum(tagged[shard].values())
        # gone from reads at once, before reclamation removes the bytes
        assert visible(eng, shard) == [o for o, t in sorted(tagged[shard].items()) if not t]
    report = eng.verify(NS)
    assert report.ok, report.problems  # dead by a deadline their own fields do not carry: recorded, not a problem
    assert eng.expire_scan(NS, manual=True).expired_records == 0  # each entry fires once

    eng.reclaim(NS, manual=True)
    for shard in range(SHARDS):
        assert visible(eng, shard) == [o for o, t in sorted(tagged[shard].items()) if not t]


def test_reingesting_skips_dead_records(engine: tuple[StorageAdapter, ManualClock], tmp_path: Path) -> None:
    eng, clock = engine
    tagged = populate(eng, clock)
    ns_id = int(eng.ttl_index_info(NS)["ns_id"])  # type: ignore[call-overload]
    first = [o for o, t in sorted(tagged[0].items()) if t][:3]
    sst = importable(eng, "a.sst", [(START_MS + 10, ns_id, 0, o) for o in first])
    assert eng.ingest_ttl_index(NS, sst)["ingested"] == 3
    clock.set(START_MS + 10)
    assert eng.expire_scan(NS, manual=True).expired_records == 3
    again = eng.ingest_ttl_index(NS, sst)
    assert (again["ingested"], again["skipped"]) == (0, 3)
    assert eng.expire_scan(NS, manual=True).expired_records == 0
    assert eng.shard_stats(NS, 0).live_count == eng.shard_stats(NS, 0).record_count - 3


def test_two_backfills_of_one_record_count_it_dead_once(
    engine: tuple[StorageAdapter, ManualClock], tmp_path: Path
) -> None:
    """A rule re-run with another TTL before the first fires gives a record two entries."""
    eng, clock = engine
    tagged = populate(eng, clock)
    ns_id = int(eng.ttl_index_info(NS)["ns_id"])  # type: ignore[call-overload]
    first = [o for o, t in sorted(tagged[0].items()) if t][:3]
    eng.ingest_ttl_index(NS, importable(eng, "a.sst", [(START_MS + 10, ns_id, 0, o) for o in first]))
    eng.ingest_ttl_index(NS, importable(eng, "b.sst", [(START_MS + 20, ns_id, 0, o) for o in first]))
    clock.set(START_MS + 20)
    eng.expire_scan(NS, manual=True)
    stats = eng.shard_stats(NS, 0)
    assert stats.live_count == stats.record_count - 3
    assert eng.expire_scan(NS, manual=True).expired_records == 0


@pytest.mark.parametrize(
    "bad, reason",
    [
        (lambda ns_id: (START_MS, ns_id + 7, 0, 1), "belongs to namespace id"),
        (lambda ns_id: (START_MS, ns_id, SHARDS, 1), "names shard 2"),
        (lambda ns_id: (START_MS, ns_id, 1, 30), "at or past the end 30"),
    ],
)
def test_a_foreign_entry_refuses_the_whole_file(
    engine: tuple[StorageAdapter, ManualClock], tmp_path: Path, bad: object, reason: str
) -> None:
    eng, clock = engine
    populate(eng, clock)
    ns_id = int(eng.ttl_index_info(NS)["ns_id"])  # type: ignore[call-overload]
    good = [(START_MS, ns_id, 0, o) for o in range(5)]
    sst = importable(eng, "mixed.sst", [*good, bad(ns_id)])  # type: ignore[operator]
    with pytest.raises(ForeignTTLEntryError) as refused:
        eng.ingest_ttl_index(NS, sst)
    assert reason in str(refused.value) and refused.value.code == "foreign_ttl_entry"
    assert refused.value.field == "file" and str(eng.ttl_import_dir()) not in str(refused.value)
    clock.set(START_MS + 1)
    assert eng.expire_scan(NS, manual=True).expired_records == 0  # nothing went in


def test_malformed_files_are_refused(engine: tuple[StorageAdapter, ManualClock]) -> None:
    eng, clock = engine
    populate(eng, clock)
    ns_id = int(eng.ttl_index_info(NS)["ns_id"])  # type: ignore[call-overload]
    with pytest.raises(InvalidArgumentError, match="no such file") as missing:
        eng.ingest_ttl_index(NS, "missing.sst")
    assert missing.value.field == "file"
    secret = b"SECRET-BYTES-" * 100
    (eng.ttl_import_dir() / "junk.sst").write_bytes(secret)
    with pytest.raises(InvalidArgumentError, match=r"junk\.sst: not a valid SST file") as junk:
        eng.ingest_ttl_index(NS, "junk.sst")
    assert "SECRET" not in str(junk.value) and junk.value.field == "file"  # no file bytes, no RocksDB message
    short = eng.ttl_import_dir() / "short.sst"
    writer = SstFileWriter(options=sst_options())
    writer.open(str(short))
    writer[b"\x00" * 8] = b""
    writer.finish()
    with pytest.raises(ForeignTTLEntryError, match="is 8 bytes") as short_key:
        eng.ingest_ttl_index(NS, "short.sst")
    assert "00000000" not in str(short_key.value)  # an entry is named by its position, not its bytes
    with pytest.raises(ForeignTTLEntryError, match="3-byte value"):
        eng.ingest_ttl_index(NS, importable(eng, "v.sst", [(START_MS, ns_id, 0, 1)], value=b"abc"))


@pytest.mark.parametrize("name", ["/etc/passwd", "../segments", "a/b.sst", ".hidden.sst", "..", "", "x" * 201, 7, None])
def test_only_bare_names_in_the_import_directory(engine: tuple[StorageAdapter, ManualClock], name: object) -> None:
    eng, clock = engine
    populate(eng, clock)
    with pytest.raises(InvalidArgumentError) as refused:
        eng.ingest_ttl_index(NS, name)  # type: ignore[arg-type]
    assert refused.value.field == "file" and "bare name" in refused.value.rule


def test_a_link_out_of_the_import_directory_is_refused(
    engine: tuple[StorageAdapter, ManualClock], tmp_path: Path
) -> None:
    eng, clock = engine
    populate(eng, clock)
    ns_id = int(eng.ttl_index_info(NS)["ns_id"])  # type: ignore[call-overload]
    outside = write_sst(tmp_path / "outside.sst", [(START_MS + 10, ns_id, 0, 0)])
    (eng.ttl_import_dir() / "link.sst").symlink_to(outside)
    with pytest.raises(InvalidArgumentError, match="not a regular file"):
        eng.ingest_ttl_index(NS, "link.sst")


def test_the_import_directory_lives_in_the_data_directory(
    engine: tuple[StorageAdapter, ManualClock], tmp_path: Path
) -> None:
    eng, _ = engine
    assert eng.ttl_import_dir() == tmp_path / "data" / "import" and eng.ttl_import_dir().is_dir()


# -- through a real node ---------------------------------------------------------------------------------
@pytest.fixture
def client(node: object) -> Iterator[NodeClient]:
    with NodeClient(node.url, node.token) as c:  # type: ignore[attr-defined]
        yield c


def test_node_upload_route_then_expire_scan(client: NodeClient, node: object, tmp_path: Path) -> None:
    client.create_namespace(NS, 1, POLICY)
    now = int(time.time() * 1000)
    old = now - 2 * HOUR_MS  # producer timestamps two hours back: a 1 h TTL has passed, no sleeping
    offsets = [
        client.append(NS, 0, [NewRecord(value=b"x" * 50, timestamp=old + i, tags=("t",) if i % 2 else ())]).base_offset
        for i in range(10)
    ]
    info = client.ttl_index_info(NS)
    assert info["shards"] == 1 and info["end_offsets"] == [10]
    odd = [o for i, o in enumerate(offsets) if i % 2]
    sst = write_sst(tmp_path / "node.sst", [(old + o + HOUR_MS, info["ns_id"], 0, o) for o in odd])
    result = client.upload_ttl_index(NS, sst)
    assert result["ingested"] == 5 and result["namespace"] == NS
    assert result["uploaded_bytes"] == sst.stat().st_size
    import_dir = node.data_dir / "import"  # type: ignore[attr-defined]
    assert list(import_dir.iterdir()) == []  # the upload is removed once ingested
    step = client.lifecycle_step(NS, "expire-scan", manual=True)
    assert step.expired_records == 5
    stats = client.shard_stats(NS, 0)
    assert stats["live_count"] == 5 and stats["record_count"] == 10

    foreign = write_sst(tmp_path / "foreign.sst", [(old, info["ns_id"] + 1, 0, 0)])
    with pytest.raises(RemoteError) as refused:
        client.upload_ttl_index(NS, foreign)
    assert refused.value.status == 400 and refused.value.remote_code == "foreign_ttl_entry"
    junk = tmp_path / "junk.sst"
    junk.write_bytes(b"SECRET" * 50)
    with pytest.raises(InvalidArgumentError) as not_sst:
        client.upload_ttl_index(NS, junk)
    assert not_sst.value.field == "body" and "SECRET" not in str(not_sst.value)
    assert list(import_dir.iterdir()) == []


def test_node_ingests_only_files_of_its_import_directory(client: NodeClient, node: object) -> None:
    client.create_namespace(NS, 1, POLICY)
    offset = client.append(NS, 0, [NewRecord(value=b"x")]).base_offset
    info = client.ttl_index_info(NS)
    import_dir = node.data_dir / "import"  # type: ignore[attr-defined]
    write_sst(import_dir / "placed.sst", [(int(time.time() * 1000) - 1, info["ns_id"], 0, offset)])
    assert client.ingest_ttl_index(NS, "placed.sst")["ingested"] == 1
    assert (import_dir / "placed.sst").exists()  # a placed file is the caller's: copied, left
    for name in ["/etc/passwd", "../LOCK", "import/placed.sst"]:
        with pytest.raises(InvalidArgumentError) as refused:
            client.ingest_ttl_index(NS, name)
        assert refused.value.field == "file"
    with pytest.raises(InvalidArgumentError) as old_contract:
        client._call("POST", f"/v1/namespaces/{NS}/ttl-index/ingest", idempotent=False, json={"path": "/etc/passwd"})
    assert old_contract.value.field == "path" and "root:" not in str(old_contract.value)
