"""The lake export's manifest: which segment files are in the lake, and which version of each.

It lives under the exported dataset as ``_manifest/manifest-<run, 10 digits>.json`` (the ``_`` prefix keeps
Spark's and pyarrow's readers away from it). Every run that exports something writes the next file
atomically (temporary file + rename, through Hadoop's FileSystem, so the same code works on a local path,
HDFS or an object store) and the highest run number wins; older files are pruned, the last few kept for
forensics. A crash before the new manifest is in place leaves the old one: the segments of the interrupted
run are exported again next time, replacing whatever the crash left of them.

A segment is identified by ``<namespace>/<shard>/<base offset>`` and versioned by a fingerprint: its size,
its modification time (ns), :func:`~spark_jobs.segments.sample_hash` and how many of its records the node
counts dead. A sealed segment is immutable except by a whole-file swap (compaction, reclaim), which changes
the fingerprint; the TTL scan marking more of its records dead changes it too (the file stays as it is, and
dead marks only grow until a rewrite). Either way the export replaces its rows, so the lake never keeps a
record the engine counts dead for a segment that is still there.

Version 2 added ``dead_records`` (0 when absent: a version 1 manifest reads as "nothing was dead").
Version 3 added ``lake_schema``, the columns the segment's rows were written with (1 when absent: before the
UTC timestamp columns); a segment written with an older one is exported again while the node still has it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Protocol

from spark_jobs.segments import SegmentFile

MANIFEST_DIR = "_manifest"
MANIFEST_VERSION = 3
# The lake's columns: 1 = the record fields; 2 = with timestamp_utc and expire_at_utc.
LAKE_SCHEMA = 2
KEEP_MANIFESTS = 5
UNKNOWN_MTIME = -1  # a segment fingerprinted from its object in the store: no file, no mtime
_MANIFEST_NAME = re.compile(r"^manifest-(\d{10})\.json$")


class ManifestError(ValueError):
    """The manifest cannot be read (damaged, or written by a newer version)."""


@dataclass(frozen=True)
class Fingerprint:
    size: int
    mtime_ns: int
    sample_hash: str
    dead_records: int = 0  # records of the file the node counts dead (left out of the lake)

    def same_version(self, other: Fingerprint) -> bool:
        """Equal, except that an unknown mtime (read from the object store) matches any: the object is the file
        byte for byte, so a segment whose local copy was dropped after its export is not exported again."""
        if UNKNOWN_MTIME in (self.mtime_ns, other.mtime_ns):
            return (self.size, self.sample_hash, self.dead_records) == (
                other.size,
                other.sample_hash,
                other.dead_records,
            )
        return self == other


@dataclass(frozen=True)
class ExportedSegment:
    """One segment file as it was exported: ``records`` rows written, ``dead_records`` left out."""

    namespace: str
    shard: int
    base_offset: int
    size: int
    mtime_ns: int
    sample_hash: str
    records: int | None
    exported_at_ms: int
    run: int
    source_path: str
    dead_records: int = 0  # records of the file left out as dead (not in ``records``)
    lake_schema: int = 1  # the lake columns its rows were written with (LAKE_SCHEMA at the time)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.shard}/{self.base_offset:020d}"

    @property
    def fingerprint(self) -> Fingerprint:
        return Fingerprint(self.size, self.mtime_ns, self.sample_hash, self.dead_records)


@dataclass(frozen=True)
class Manifest:
    run: int = 0  # 0: nothing exported yet
    segments: Mapping[str, ExportedSegment] = field(default_factory=dict)

    def to_json(self) -> str:
        body = {
            "version": MANIFEST_VERSION,
            "run": self.run,
            "segments": [asdict(self.segments[k]) for k in sorted(self.segments)],
        }
        return json.dumps(body, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        try:
            body = json.loads(text)
            version = body["version"]
            if version > MANIFEST_VERSION:
                raise ManifestError(f"manifest version {version} is newer than this job ({MANIFEST_VERSION})")
            entries = [ExportedSegment(**entry) for entry in body["segments"]]
            return cls(run=int(body["run"]), segments={entry.key: entry for entry in entries})
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ManifestError):
                raise
            raise ManifestError(f"unreadable manifest: {exc}") from exc

    def updated(self, run: int, entries: Iterable[ExportedSegment]) -> Manifest:
        segments = dict(self.segments)
        for entry in entries:
            segments[entry.key] = entry
        return Manifest(run=run, segments=segments)


@dataclass(frozen=True)
class ExportPlan:
    """What a run does: export ``new`` segments, replace ``changed`` ones (rewritten, more records dead, or
    written with older lake columns), skip ``unchanged``.

    ``gone`` are manifest entries whose segment the node no longer lists (deleted by retention or
    cleaning): their rows stay in the lake, which is the archive.
    """

    new: tuple[SegmentFile, ...]
    changed: tuple[SegmentFile, ...]
    unchanged: tuple[SegmentFile, ...]
    gone: tuple[str, ...]

    @property
    def to_export(self) -> tuple[SegmentFile, ...]:
        return self.new + self.changed


def plan_export(manifest: Manifest, segments: Mapping[SegmentFile, Fingerprint]) -> ExportPlan:
    """Compare the node's sealed segments (with their fingerprints) against the manifest."""
    new: list[SegmentFile] = []
    changed: list[SegmentFile] = []
    unchanged: list[SegmentFile] = []
    for segment in sorted(segments):
        exported = manifest.segments.get(segment.key)
        if exported is None:
            new.append(segment)
        elif not exported.fingerprint.same_version(segments[segment]) or exported.lake_schema < LAKE_SCHEMA:
            changed.append(segment)
        else:
            unchanged.append(segment)
    on_disk = {segment.key for segment in segments}
    gone = tuple(sorted(key for key in manifest.segments if key not in on_disk))
    return ExportPlan(tuple(new), tuple(changed), tuple(unchanged), gone)


class ManifestStore(Protocol):
    """What the manifest needs from a file system (:class:`spark_jobs.lake.LakeFileSystem` has it)."""

    def list_names(self, relative: str) -> list[str]: ...
    def read_bytes(self, relative: str) -> bytes: ...
    def write_bytes_atomic(self, relative: str, data: bytes) -> None: ...
    def delete(self, path: str, *, recursive: bool = True) -> bool: ...


def _runs(store: ManifestStore) -> list[int]:
    runs = []
    for name in store.list_names(MANIFEST_DIR):
        match = _MANIFEST_NAME.match(name)
        if match:
            runs.append(int(match.group(1)))
    return sorted(runs)


def manifest_path(run: int) -> str:
    return f"{MANIFEST_DIR}/manifest-{run:010d}.json"


def load_manifest(store: ManifestStore) -> Manifest:
    """The latest manifest, or an empty one for a lake nothing was exported to yet."""
    runs = _runs(store)
    if not runs:
        return Manifest()
    manifest = Manifest.from_json(store.read_bytes(manifest_path(runs[-1])).decode())
    if manifest.run != runs[-1]:
        raise ManifestError(f"{manifest_path(runs[-1])} says run {manifest.run}")
    return manifest


def save_manifest(store: ManifestStore, manifest: Manifest, keep: int = KEEP_MANIFESTS) -> str:
    """Write ``manifest`` as the file of its run (atomically), prune old ones, return its path."""
    path = manifest_path(manifest.run)
    store.write_bytes_atomic(path, manifest.to_json().encode())
    for run in _runs(store)[:-keep]:
        store.delete(manifest_path(run), recursive=False)
    return path
