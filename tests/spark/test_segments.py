"""Reading segment files without the node (pure Python), and the export manifest's bookkeeping."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_jobs.manifest import (
    ExportedSegment,
    Fingerprint,
    Manifest,
    ManifestError,
    load_manifest,
    manifest_path,
    plan_export,
    save_manifest,
)
from spark_jobs.segments import (
    SegmentFile,
    decode_segment_table,
    iter_segment_batches,
    list_segment_files,
    sample_hash,
)
from storage_engine.errors import CorruptSegmentError
from tests.spark.engine_data import NAMESPACES, Appended, rewrite_segment, write_segments


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Appended]]:
    data_dir = tmp_path_factory.mktemp("segments") / "data"
    return data_dir, write_segments(data_dir)


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


class TestListSegmentFiles:
    def test_every_file_but_the_newest_per_shard_is_sealed(self, written: tuple[Path, list[Appended]]) -> None:
        data_dir, _ = written
        everything = list_segment_files(data_dir, include_active=True)
        sealed = list_segment_files(data_dir)
        shards = {(ns, shard) for ns, n in NAMESPACES.items() for shard in range(n)}
        assert {(s.namespace, s.shard) for s in everything} == shards
        for ns, shard in shards:
            files = [s for s in everything if (s.namespace, s.shard) == (ns, shard)]
            assert len(files) >= 3, "small segments: every shard rolled several times"
            assert [s.sealed for s in files] == [True] * (len(files) - 1) + [False]
            assert files[-1].base_offset == max(s.base_offset for s in files)
        assert sealed == [s for s in everything if s.sealed]
        assert all(Path(s.path).name == f"{s.base_offset:020d}.log" and s.size > 0 for s in sealed)

    def test_ignores_deleted_cleaned_and_foreign_names(self, tmp_path: Path) -> None:
        shard_dir = tmp_path / "segments" / "ns" / "0"
        shard_dir.mkdir(parents=True)
        for name in (
            "00000000000000000000.log",
            "00000000000000000010.log",
            "00000000000000000020.log.deleted",  # higher base, but deleted: not the active one
            "00000000000000000030.log.cleaned",
            "00000000000000000040.log.tmp",
            "123.log",
            "notes.txt",
        ):
            (shard_dir / name).write_bytes(b"")
        (tmp_path / "segments" / "ns" / "not-a-shard").mkdir()
        found = list_segment_files(tmp_path, include_active=True)
        assert [(s.base_offset, s.sealed) for s in found] == [(0, True), (10, False)]
        assert list_segment_files(tmp_path / "missing") == []

    def test_sample_hash_follows_content(self, tmp_path: Path) -> None:
        path = tmp_path / "f"
        path.write_bytes(b"a" * 200_000)
        first = sample_hash(path)
        assert sample_hash(path) == first
        path.write_bytes(b"a" * 199_999 + b"b")  # same size, different tail
        assert sample_hash(path) != first


class TestDecode:
    def test_decodes_exactly_what_was_appended(self, written: tuple[Path, list[Appended]]) -> None:
        data_dir, appended = written
        decoded: list[Appended] = []
        for segment in list_segment_files(data_dir, include_active=True):
            table = decode_segment_table(segment)
            rows = table.to_pylist()
            assert {r["segment_base"] for r in rows} == {segment.base_offset}
            assert [r["offset"] for r in rows] == sorted(r["offset"] for r in rows)
            decoded.extend(_as_appended(rows))
        key = lambda a: (a.namespace, a.shard, a.offset)  # noqa: E731
        assert sorted(decoded, key=key) == sorted(appended, key=key)

    def test_small_arrow_batches(self, written: tuple[Path, list[Appended]]) -> None:
        segment = list_segment_files(written[0])[0]
        batches = list(iter_segment_batches(segment.path, "orders", 0, segment.base_offset, batch_rows=1))
        assert all(b.num_rows >= 1 for b in batches)  # whole engine batches: at least one row each
        assert sum(b.num_rows for b in batches) == decode_segment_table(segment).num_rows

    def test_torn_tail_of_an_active_segment(self, written: tuple[Path, list[Appended]], tmp_path: Path) -> None:
        segment = list_segment_files(written[0])[0]
        data = Path(segment.path).read_bytes()
        torn = tmp_path / segment.path.rsplit("/", 1)[-1]
        torn.write_bytes(data + data[:70])  # a second copy of the first batch, cut short
        whole = decode_segment_table(segment).num_rows
        args = (str(torn), "orders", 0, segment.base_offset)
        assert sum(b.num_rows for b in iter_segment_batches(*args, tolerate_torn_tail=True)) == whole
        with pytest.raises(CorruptSegmentError) as raised:
            list(iter_segment_batches(*args))
        assert str(torn) in str(raised.value)

    def test_damaged_batch_is_an_error_naming_the_file(
        self, written: tuple[Path, list[Appended]], tmp_path: Path
    ) -> None:
        segment = list_segment_files(written[0])[0]
        data = bytearray(Path(segment.path).read_bytes())
        data[80] ^= 0xFF  # inside the first batch's records: the CRC no longer matches
        damaged = tmp_path / "damaged.log"
        damaged.write_bytes(bytes(data))
        for tolerate in (False, True):
            with pytest.raises(CorruptSegmentError, match="CRC"):
                list(iter_segment_batches(str(damaged), "orders", 0, 0, tolerate_torn_tail=tolerate))

    def test_empty_file_has_no_rows(self, tmp_path: Path) -> None:
        (tmp_path / "empty.log").write_bytes(b"")
        assert list(iter_segment_batches(str(tmp_path / "empty.log"), "ns", 0, 0)) == []

    def test_rewritten_segment_keeps_offsets(self, written: tuple[Path, list[Appended]], tmp_path: Path) -> None:
        segment = list_segment_files(written[0])[0]
        copy = tmp_path / Path(segment.path).name
        copy.write_bytes(Path(segment.path).read_bytes())
        offsets = decode_segment_table(segment).column("offset").to_pylist()
        keep = set(offsets[1::2])
        rewrite_segment(copy, keep)
        moved = SegmentFile(segment.namespace, segment.shard, segment.base_offset, str(copy), 0, 0, True)
        assert decode_segment_table(moved).column("offset").to_pylist() == sorted(keep)


def _segment(base: int, size: int = 100) -> SegmentFile:
    return SegmentFile("ns", 0, base, f"/d/{base:020d}.log", size, 1, True)


def _exported(base: int, fp: Fingerprint, run: int = 1) -> ExportedSegment:
    return ExportedSegment("ns", 0, base, fp.size, fp.mtime_ns, fp.sample_hash, 3, 0, run, f"/d/{base:020d}.log")


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
        on_disk = {
            _segment(0): fp,  # unchanged
            _segment(10): Fingerprint(90, 2, "h2"),  # rewritten by compaction
            _segment(30): Fingerprint(100, 3, "h3"),  # new
        }  # 20 is gone (deleted by retention)
        plan = plan_export(manifest, on_disk)
        assert [s.base_offset for s in plan.new] == [30]
        assert [s.base_offset for s in plan.changed] == [10]
        assert [s.base_offset for s in plan.unchanged] == [0]
        assert plan.gone == ("ns/0/00000000000000000020",)
        assert [s.base_offset for s in plan.to_export] == [30, 10]

    @pytest.mark.parametrize("change", [{"size": 101}, {"mtime_ns": 2}, {"sample_hash": "x"}])
    def test_any_fingerprint_change_is_a_change(self, change: dict[str, object]) -> None:
        fp = Fingerprint(100, 1, "h")
        manifest = Manifest(run=1, segments={"ns/0/00000000000000000000": _exported(0, fp)})
        changed = Fingerprint(**{**fp.__dict__, **change})  # type: ignore[arg-type]
        assert len(plan_export(manifest, {_segment(0): changed}).changed) == 1

    def test_empty_everything(self) -> None:
        plan = plan_export(Manifest(), {})
        assert plan.to_export == () and plan.gone == ()

    def test_round_trip_latest_wins_and_pruning(self) -> None:
        store = _MemoryStore()
        assert load_manifest(store) == Manifest()
        fp = Fingerprint(100, 1, "h")
        manifest = Manifest()
        for run in range(1, 8):
            manifest = manifest.updated(run, [_exported(run * 10, fp, run)])
            save_manifest(store, manifest, keep=3)
        assert sorted(store.files) == [manifest_path(r) for r in (5, 6, 7)]
        loaded = load_manifest(store)
        assert loaded == manifest and loaded.run == 7 and len(loaded.segments) == 7
        with pytest.raises(FileExistsError):
            save_manifest(store, manifest)  # a run number is written once

    def test_damaged_or_newer_manifest(self) -> None:
        store = _MemoryStore()
        store.files[manifest_path(1)] = b"{not json"
        with pytest.raises(ManifestError):
            load_manifest(store)
        store.files[manifest_path(2)] = b'{"version": 99, "run": 2, "segments": []}'
        with pytest.raises(ManifestError, match="newer"):
            load_manifest(store)


def test_listing_sees_a_file_swapped_by_rename(tmp_path: Path) -> None:
    shard_dir = tmp_path / "segments" / "ns" / "0"
    shard_dir.mkdir(parents=True)
    (shard_dir / "00000000000000000000.log").write_bytes(b"x" * 10)
    (shard_dir / "00000000000000000005.log").write_bytes(b"")
    before = list_segment_files(tmp_path)[0]
    replacement = shard_dir / "00000000000000000000.log.cleaned"
    replacement.write_bytes(b"y" * 7)
    os.replace(replacement, shard_dir / "00000000000000000000.log")
    after = list_segment_files(tmp_path)[0]
    assert after.key == before.key and after.size == 7
