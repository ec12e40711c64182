"""Segment files as Spark reads them: which files, how many bytes and which dead offsets come from the node
(``GET .../segment-files``, or the same listing from an engine opened offline), and the decoding is the
engine's own reader. No Spark session here; plus the export manifest's bookkeeping."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from spark_jobs.manifest import (
    LAKE_SCHEMA,
    MANIFEST_VERSION,
    ExportedSegment,
    Fingerprint,
    Manifest,
    ManifestError,
    load_manifest,
    manifest_path,
    plan_export,
    save_manifest,
)
from spark_jobs.segments import DEAD_MARK, SegmentFile, decode_segment_table, iter_segment_batches
from spark_jobs.source import engine_segment_files, node_segment_files, offline_segment_files
from storage_engine import open_engine
from storage_engine.api import NewRecord, SegmentState
from storage_engine.clock import ManualClock
from storage_engine.config import EngineConfig
from storage_engine.errors import CorruptSegmentError
from storage_engine.formats.segment_files import DeadOffsets, SegmentFileInfo, SegmentFilePage, dead_ranges
from storage_engine.node.app import build_app
from storage_engine.node_api.client import NodeClient
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.segment.segment import SegmentFileChangedError, iter_file_batches, iter_file_records
from tests.spark.engine_data import NAMESPACES, START_MS, Appended, node_on, rewrite_segment, write_segments


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Appended]]:
    data_dir = tmp_path_factory.mktemp("segments") / "data"
    return data_dir, write_segments(data_dir)


def _copy(written: tuple[Path, list[Appended]], tmp_path: Path) -> Path:
    data_dir = tmp_path / "data"
    shutil.copytree(written[0], data_dir)
    return data_dir


def _as_appended(table_rows: list[dict[str, object]]) -> list[Appended]:
    return [
        Appended(
            r["namespace"],  # type: ignore[arg-type]
            r["shard"],  # type: ignore[arg-type]
            r["offset"],  # type: ignore[arg-type]
            r["timestamp"],  # type: ignore[arg-type]
            r["key"],  # type: ignore[arg-type]
            tuple(r["tags"]),  # type: ignore[arg-type]
            dict(r["headers"]),  # type: ignore[arg-type]
            r["value"],  # type: ignore[arg-type]
            r["expire_at"],  # type: ignore[arg-type]
        )
        for r in table_rows
    ]


def _key(a: Appended) -> tuple[str, int, int]:
    return (a.namespace, a.shard, a.offset)


def _shape(segments: list[SegmentFile], data_dir: Path) -> list[tuple[object, ...]]:
    """A listing without where this job sees the data directory."""
    return [
        (s.key, Path(s.path).relative_to(data_dir).as_posix(), s.size, s.sealed, s.last_offset, s.record_count, s.dead)
        for s in segments
    ]


class TestListing:
    def test_offline_listing_is_the_engines_own_view(self, written: tuple[Path, list[Appended]]) -> None:
        data_dir, appended = written
        everything = offline_segment_files(data_dir, include_active=True)
        sealed = offline_segment_files(data_dir)
        assert sealed == [s for s in everything if s.sealed]
        engine = open_engine(EngineConfig(data_dir=data_dir, adapter="segment", lifecycle_worker=False))
        try:
            for ns, shards in NAMESPACES.items():
                for shard in range(shards):
                    infos = engine.list_segments(ns, shard)
                    files = [s for s in everything if (s.namespace, s.shard) == (ns, shard)]
                    assert len(files) == len(infos) >= 3, "small segments: every shard rolled several times"
                    assert [(f.base_offset, f.last_offset, f.record_count) for f in files] == [
                        (i.base_offset, i.last_offset, i.record_count) for i in infos
                    ]
                    assert [f.sealed for f in files] == [i.state is not SegmentState.ACTIVE for i in infos]
                    assert [f.sealed for f in files] == [True] * (len(files) - 1) + [False]
                    for f in files:
                        assert Path(f.path).name == f"{f.base_offset:020d}.log"
                        assert f.size == Path(f.path).stat().st_size > 0 and f.dead == ()
            assert engine_segment_files(engine, data_dir, namespaces=["audit"]) == [
                s for s in sealed if s.namespace == "audit"
            ]
        finally:
            engine.close()
        assert sum(s.record_count for s in everything) == len(appended)

    def test_the_node_lists_what_the_engine_lists(self, written: tuple[Path, list[Appended]], tmp_path: Path) -> None:
        data_dir = _copy(written, tmp_path)
        offline = _shape(offline_segment_files(written[0], include_active=True), written[0])
        with node_on(data_dir) as node, NodeClient(node.url, node.token) as client:
            listed = node_segment_files(client, data_dir, include_active=True)
            assert _shape(listed, data_dir) == offline
            sealed = node_segment_files(client, data_dir, namespaces=["orders"])
            assert sealed == [s for s in listed if s.sealed and s.namespace == "orders"]
            # Paging follows the node's cursor: one segment a page gives the same list.
            one_by_one = client.segment_files("orders", 0, page_size=1)
            assert [SegmentFile.of(i, data_dir) for i in one_by_one] == [s for s in sealed if s.shard == 0]

    def test_dead_records_and_idle_seals_come_from_the_node(
        self, written: tuple[Path, list[Appended]], tmp_path: Path
    ) -> None:
        """What the file names cannot say: which records the TTL scan marked dead (still in the files), and
        that a lifecycle step sealed the idle active segments with no new file content."""
        data_dir = _copy(written, tmp_path)
        appended = written[1]
        with node_on(data_dir) as node, NodeClient(node.url, node.token) as client:
            before = node_segment_files(client, data_dir, include_active=True)
            assert all(s.dead == () for s in before)
            rolled = 0
            for ns in NAMESPACES:
                while True:  # every explicit expire_at of the data (2024) has passed on the node's clock
                    step = client.lifecycle_step(ns, "expire-scan", manual=True)
                    rolled += step.rolled
                    if not step.more:
                        break
            after = node_segment_files(client, data_dir)  # sealed only
        active_before = {s.key for s in before if not s.sealed}
        assert rolled == len(active_before), "the scan sealed every idle active segment first"
        assert active_before <= {s.key for s in after}
        explicit = {_key(a) for a in appended if a.expire_at is not None}
        by_key = {_key(a): a for a in appended}
        kept: list[Appended] = []
        for s in after:
            offsets = [o for o in range(s.base_offset, s.last_offset + 1) if (s.namespace, s.shard, o) in by_key]
            dead = {o for o in offsets if (s.namespace, s.shard, o) in explicit}
            assert s.dead == dead_ranges(sorted(dead)) and s.dead_records == len(dead)
            assert s.live_records == len(offsets) - len(dead)
            # The executor's view: dropped, or marked.
            dropped = decode_segment_table(s).to_pylist()
            assert [r["offset"] for r in dropped] == [o for o in offsets if o not in dead]
            marked = decode_segment_table(s, dead_mode=DEAD_MARK).to_pylist()
            assert [(r["offset"], r["dead"]) for r in marked] == [(o, o in dead) for o in offsets]
            kept += _as_appended(dropped)
        assert sum(s.dead_records for s in after) > 0
        assert sorted(kept, key=_key) == sorted((a for a in appended if _key(a) not in explicit), key=_key)

    def test_a_stray_log_file_is_not_a_segment(self, written: tuple[Path, list[Appended]], tmp_path: Path) -> None:
        """By file names, a higher ``.log`` in a shard directory (a copy left by hand, a restored backup) made
        the real active segment look sealed and was itself read as the active one. The node lists neither."""
        data_dir = _copy(written, tmp_path)
        with node_on(data_dir) as node, NodeClient(node.url, node.token) as client:
            before = node_segment_files(client, data_dir, include_active=True)
            shard_dir = data_dir / "segments" / "orders" / "0"
            first = next(s for s in before if s.key == "orders/0/00000000000000000000")
            shutil.copyfile(first.path, shard_dir / f"{10**19:020d}.log")
            after = node_segment_files(client, data_dir, include_active=True)
        assert after == before
        active = [s for s in after if (s.namespace, s.shard) == ("orders", 0) and not s.sealed]
        assert len(active) == 1 and active[0].base_offset < 10**19


class TestRoute:
    """``GET .../segment-files`` in process: bad input is a 400 naming the parameter, never a 500."""

    @pytest.fixture
    def client(self, tmp_path: Path) -> Iterator[TestClient]:
        clock = ManualClock(START_MS)
        engine = open_engine(
            EngineConfig(data_dir=tmp_path / "d", adapter="segment", lifecycle_worker=False), clock=clock
        )
        engine.create_namespace("ns", 1, NamespacePolicy(segment_bytes=1024, retention_ms=None))
        for i in range(40):
            engine.append("ns", 0, [NewRecord(value=b"v" * 40, expire_at=START_MS + 1 if i % 4 == 0 else None)])
        clock.advance(10)
        assert engine.expire_scan("ns", manual=True).expired_records == 10
        with TestClient(build_app(engine, None)) as http:
            yield http

    def test_pages_and_states(self, client: TestClient) -> None:
        url = "/v1/namespaces/ns/shards/0/segment-files"
        full = SegmentFilePage.from_dict(client.get(url, params={"state": "all"}).json())
        assert full.next_after is None and [s.sealed for s in full.segments][-1] is False
        assert all(s.sealed for s in full.segments[:-1]) and len(full.segments) >= 4
        assert sum(s.dead_records for s in full.segments) == 10  # the active segment's dead ones too
        sealed = SegmentFilePage.from_dict(client.get(url).json()).segments
        assert sealed == full.segments[:-1]
        page = SegmentFilePage.from_dict(client.get(url, params={"limit": 2}).json())
        assert page.segments == sealed[:2] and page.next_after == sealed[1].base_offset
        rest = SegmentFilePage.from_dict(client.get(url, params={"after": page.next_after}).json())
        assert rest.segments == sealed[2:] and rest.next_after is None
        without = client.get(url, params={"dead": "false"}).json()
        assert all(s["dead"] is None and s["dead_records"] is None for s in without["segments"])
        assert SegmentFileInfo.from_dict(without["segments"][0]).dead is None

    @pytest.mark.parametrize(
        ("params", "field"),
        [
            ({"state": "active"}, "state"),
            ({"dead": "yes"}, "dead"),
            ({"after": "-2"}, "after"),
            ({"limit": "0"}, "limit"),
            ({"limit": "x"}, "limit"),
            ({"deadd": "true"}, "deadd"),
        ],
    )
    def test_bad_parameters(self, client: TestClient, params: dict[str, str], field: str) -> None:
        response = client.get("/v1/namespaces/ns/shards/0/segment-files", params=params)
        assert response.status_code == 400
        assert response.json()["code"] == "invalid_argument" and response.json()["field"] == field

    def test_unknown_namespace_and_shard(self, client: TestClient) -> None:
        assert client.get("/v1/namespaces/nope/shards/0/segment-files").json()["code"] == "unknown_namespace"
        response = client.get("/v1/namespaces/ns/shards/5/segment-files")
        assert response.status_code == 404 and response.json()["code"] == "unknown_shard"

    def test_an_adapter_without_files_says_so(self) -> None:
        engine = open_engine(EngineConfig(adapter="memory"))
        engine.create_namespace("ns", 1)
        with TestClient(build_app(engine, None)) as http:
            response = http.get("/v1/namespaces/ns/shards/0/segment-files")
            assert response.status_code == 400 and response.json()["field"] == "adapter"
            assert http.get("/v1/namespaces/nope/shards/0/segment-files").status_code == 404


class TestReader:
    def test_decodes_exactly_what_was_appended(self, written: tuple[Path, list[Appended]]) -> None:
        data_dir, appended = written
        decoded: list[Appended] = []
        for segment in offline_segment_files(data_dir, include_active=True):
            rows = decode_segment_table(segment).to_pylist()
            assert {r["segment_base"] for r in rows} == {segment.base_offset}
            assert [r["offset"] for r in rows] == sorted(r["offset"] for r in rows)
            assert len(rows) == segment.record_count
            decoded.extend(_as_appended(rows))
        assert sorted(decoded, key=_key) == sorted(appended, key=_key)

    def test_small_arrow_batches(self, written: tuple[Path, list[Appended]]) -> None:
        segment = offline_segment_files(written[0])[0]
        batches = list(iter_segment_batches(segment.path, "orders", 0, segment.base_offset, batch_rows=1))
        assert all(b.num_rows >= 1 for b in batches)  # whole engine batches: at least one row each
        assert sum(b.num_rows for b in batches) == decode_segment_table(segment).num_rows

    def test_only_the_listed_bytes_are_read(self, written: tuple[Path, list[Appended]], tmp_path: Path) -> None:
        """An active segment's file may hold a batch being written past the committed size: the listed size
        stops before it. Without a size, the engine's reader fails on it unless told to tolerate it."""
        segment = offline_segment_files(written[0])[0]
        data = Path(segment.path).read_bytes()
        torn = tmp_path / Path(segment.path).name
        torn.write_bytes(data + data[:70])  # a second copy of the first batch, cut short
        listed = SegmentFile(segment.namespace, segment.shard, segment.base_offset, str(torn), len(data))
        whole = decode_segment_table(segment).num_rows
        assert decode_segment_table(listed).num_rows == whole
        assert sum(1 for _ in iter_file_records(torn, tolerate_torn_tail=True)) == whole
        with pytest.raises(CorruptSegmentError) as raised:
            list(iter_file_records(torn))
        assert str(torn) in str(raised.value)

    def test_damaged_batch_is_an_error_naming_the_file(
        self, written: tuple[Path, list[Appended]], tmp_path: Path
    ) -> None:
        segment = offline_segment_files(written[0])[0]
        data = bytearray(Path(segment.path).read_bytes())
        data[80] ^= 0xFF  # inside the first batch's records: the CRC no longer matches
        damaged = tmp_path / "damaged.log"
        damaged.write_bytes(bytes(data))
        with pytest.raises(CorruptSegmentError, match="CRC"):
            list(iter_segment_batches(str(damaged), "orders", 0, 0, size=len(data)))
        with pytest.raises(CorruptSegmentError, match="CRC"):
            list(iter_file_records(damaged, tolerate_torn_tail=True))

    def test_empty_file_has_no_rows(self, tmp_path: Path) -> None:
        (tmp_path / "empty.log").write_bytes(b"")
        assert list(iter_segment_batches(str(tmp_path / "empty.log"), "ns", 0, 0, size=0)) == []
        assert list(iter_file_batches(tmp_path / "empty.log")) == []

    def test_a_file_rewritten_since_it_was_listed(self, written: tuple[Path, list[Appended]], tmp_path: Path) -> None:
        """Compaction swapped the file for a smaller one after the node listed it: the engine's reader says
        so, and the executor reads the file as it now is (a later listing has its new size)."""
        segment = offline_segment_files(written[0])[0]
        copy = tmp_path / Path(segment.path).name
        copy.write_bytes(Path(segment.path).read_bytes())
        offsets = decode_segment_table(segment).column("offset").to_pylist()
        keep = set(offsets[1::2])
        rewrite_segment(copy, keep)
        listed = SegmentFile(segment.namespace, segment.shard, segment.base_offset, str(copy), segment.size)
        with pytest.raises(SegmentFileChangedError) as raised:
            next(iter_file_batches(copy, segment.size))
        assert raised.value.expected == segment.size and raised.value.size == copy.stat().st_size
        assert decode_segment_table(listed).column("offset").to_pylist() == sorted(keep)

    def test_dead_offsets_dropped_or_marked(self, written: tuple[Path, list[Appended]]) -> None:
        segment = offline_segment_files(written[0])[0]
        offsets = decode_segment_table(segment).column("offset").to_pylist()
        dead = {offsets[0], offsets[1], offsets[-1]}
        marked = SegmentFile(
            segment.namespace,
            segment.shard,
            segment.base_offset,
            segment.path,
            segment.size,
            dead=dead_ranges(sorted(dead)),
        )
        assert decode_segment_table(marked).column("offset").to_pylist() == [o for o in offsets if o not in dead]
        rows = decode_segment_table(marked, dead_mode=DEAD_MARK).to_pylist()
        assert [(r["offset"], r["dead"]) for r in rows] == [(o, o in dead) for o in offsets]
        with pytest.raises(ValueError, match="dead_mode"):
            list(iter_segment_batches(segment.path, "orders", 0, 0, dead_mode="keep"))


class TestDeadRanges:
    def test_runs(self) -> None:
        assert dead_ranges([]) == ()
        assert dead_ranges([0]) == ((0, 0),)
        assert dead_ranges([0, 1, 2, 5, 7, 8]) == ((0, 2), (5, 5), (7, 8))

    def test_membership(self) -> None:
        dead = DeadOffsets([[7, 8], [0, 2], (5, 5)])
        assert [o for o in range(10) if o in dead] == [0, 1, 2, 5, 7, 8]
        assert len(dead) == 6 and bool(dead) and not DeadOffsets(()) and "1" not in dead

    def test_json_round_trip(self) -> None:
        info = SegmentFileInfo("ns", 1, 10, 19, "segments/ns/1/x.log", 500, SegmentState.SEALED, 10, ((12, 13),))
        body = info.to_dict()
        assert body["dead"] == [[12, 13]] and body["dead_records"] == 2 and body["state"] == "sealed"
        assert SegmentFileInfo.from_dict(body) == info
        page = SegmentFilePage("ns", 1, (info,), None)
        assert SegmentFilePage.from_dict(page.to_dict()) == page


def _segment(base: int, size: int = 100) -> SegmentFile:
    return SegmentFile("ns", 0, base, f"/d/{base:020d}.log", size)


def _exported(base: int, fp: Fingerprint, run: int = 1, lake_schema: int = LAKE_SCHEMA) -> ExportedSegment:
    return ExportedSegment(
        "ns", 0, base, fp.size, fp.mtime_ns, fp.sample_hash, 3, 0, run, f"/d/{base:020d}.log", fp.dead_records,
        lake_schema,
    )  # fmt: skip


class _MemoryStore:
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def list_names(self, relative: str) -> list[str]:
        return sorted(p.split("/", 1)[1] for p in self.files if p.startswith(relative + "/"))

    def read_bytes(self, relative: str) -> bytes:
        return self.files[relative]

    def write_bytes_atomic(self, relative: str, data: bytes) -> None:
        if relative in self.files:
            raise FileExistsError(relative)
        self.files[relative] = data

    def delete(self, path: str, *, recursive: bool = True) -> bool:
        return self.files.pop(path, None) is not None


class TestManifest:
    def test_plan_new_changed_unchanged_gone(self) -> None:
        fp = Fingerprint(100, 1, "h")
        manifest = Manifest(
            run=1, segments={e.key: e for e in (_exported(0, fp), _exported(10, fp), _exported(20, fp))}
        )
        listed = {
            _segment(0): fp,  # unchanged
            _segment(10): Fingerprint(90, 2, "h2"),  # rewritten by compaction
            _segment(30): Fingerprint(100, 3, "h3"),  # new
        }  # 20 is gone (deleted by retention)
        plan = plan_export(manifest, listed)
        assert [s.base_offset for s in plan.new] == [30]
        assert [s.base_offset for s in plan.changed] == [10]
        assert [s.base_offset for s in plan.unchanged] == [0]
        assert plan.gone == ("ns/0/00000000000000000020",)
        assert [s.base_offset for s in plan.to_export] == [30, 10]

    @pytest.mark.parametrize("change", [{"size": 101}, {"mtime_ns": 2}, {"sample_hash": "x"}, {"dead_records": 4}])
    def test_any_fingerprint_change_is_a_change(self, change: dict[str, object]) -> None:
        fp = Fingerprint(100, 1, "h")
        manifest = Manifest(run=1, segments={"ns/0/00000000000000000000": _exported(0, fp)})
        changed = Fingerprint(**{**fp.__dict__, **change})  # type: ignore[arg-type]
        assert len(plan_export(manifest, {_segment(0): changed}).changed) == 1

    def test_rows_written_with_older_lake_columns_are_exported_again(self) -> None:
        """Before the UTC timestamp columns (lake_schema 1): the same file is a change, so its rows get them."""
        fp = Fingerprint(100, 1, "h")
        manifest = Manifest(run=1, segments={"ns/0/00000000000000000000": _exported(0, fp, lake_schema=1)})
        assert [s.base_offset for s in plan_export(manifest, {_segment(0): fp}).changed] == [0]

    def test_empty_everything(self) -> None:
        plan = plan_export(Manifest(), {})
        assert plan.to_export == () and plan.gone == ()

    def test_round_trip_latest_wins_and_pruning(self) -> None:
        store = _MemoryStore()
        assert load_manifest(store) == Manifest()
        fp = Fingerprint(100, 1, "h", 2)
        manifest = Manifest()
        for run in range(1, 8):
            manifest = manifest.updated(run, [_exported(run * 10, fp, run)])
            save_manifest(store, manifest, keep=3)
        assert sorted(store.files) == [manifest_path(r) for r in (5, 6, 7)]
        loaded = load_manifest(store)
        assert loaded == manifest and loaded.run == 7 and len(loaded.segments) == 7
        assert all(e.dead_records == 2 for e in loaded.segments.values())
        with pytest.raises(FileExistsError):
            save_manifest(store, manifest)  # a run number is written once

    def test_a_version_1_manifest_reads_as_nothing_dead(self) -> None:
        store = _MemoryStore()
        entry = _exported(0, Fingerprint(100, 1, "h")).__dict__.copy()
        del entry["dead_records"], entry["lake_schema"]
        store.files[manifest_path(1)] = json.dumps({"version": 1, "run": 1, "segments": [entry]}).encode()
        loaded = load_manifest(store)
        assert loaded.segments["ns/0/00000000000000000000"].fingerprint == Fingerprint(100, 1, "h", 0)
        assert loaded.segments["ns/0/00000000000000000000"].lake_schema == 1  # before the UTC columns
        assert MANIFEST_VERSION == 3

    def test_damaged_or_newer_manifest(self) -> None:
        store = _MemoryStore()
        store.files[manifest_path(1)] = b"{not json"
        with pytest.raises(ManifestError):
            load_manifest(store)
        store.files[manifest_path(2)] = b'{"version": 99, "run": 2, "segments": []}'
        with pytest.raises(ManifestError, match="newer"):
            load_manifest(store)
