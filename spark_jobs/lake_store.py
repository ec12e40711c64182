"""The lake in an object store (``--lake-path s3://bucket/prefix``), without Hadoop's S3 connector.

Spark here has no ``hadoop-aws`` jars (and no Maven to fetch them), so the export writes its Parquet with Spark
into a local staging directory and then uploads the files with obstore
(:class:`storage_engine.tier.store.ObjectTier`: the same client, endpoint and credentials from the environment
as the engine's tier: ``TIER_S3_ENDPOINT``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_REGION``). ``file://`` lakes keep going through Hadoop's local file system
(:class:`spark_jobs.lake.LakeFileSystem`), whose renames are atomic.

The swap keeps :mod:`spark_jobs.lake_swap`'s promise with what an object store has instead of renames: a PUT
is atomic (a reader GETs the old object or the new one, never part of one; a multipart upload appears when it
completes). Per leaf (one segment's rows for one UTC day, one data file):

- new: the staged file is PUT into the leaf (it appears at once);
- already in the lake: the staged file's bytes are PUT *under the name of the file already there*, replacing
  it in one step (a reader sees the old rows or the new ones, never both, never neither);
- no longer there: the object is deleted.

Each upload is checked by a HEAD (its size must be the staged file's) before the next step. The manifest is
PUT after every leaf is in place (one object per run, refused when it exists), so a killed export leaves the
previous manifest and the next run uploads the same leaves again. Nothing is staged in the store: a killed
run leaves at most a local temporary directory, which it removes when it can.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path

from spark_jobs.config import is_store_uri
from spark_jobs.lake_swap import LEAF_DEPTH, StepHook, SwapCounts, no_hook
from storage_engine.errors import ObjectMissingError
from storage_engine.tier.store import ObjectTier

log = logging.getLogger(__name__)


class UploadMismatchError(RuntimeError):
    """An uploaded object does not have the size of the file it was uploaded from."""


def _hidden(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


class ObjectLake:
    """The lake's small file operations on an object store, relative to the dataset's root URI (the
    :class:`~spark_jobs.manifest.ManifestStore` protocol and what the export needs besides)."""

    is_local = False

    def __init__(self, root: str, tier: ObjectTier | None = None) -> None:
        self.root = root.rstrip("/")
        self.tier = tier or ObjectTier(self.root)

    def uri(self, relative: str = "") -> str:
        return f"{self.tier.uri}/{relative}" if relative else self.tier.uri

    def exists(self, relative: str) -> bool:
        try:
            self.tier.head(relative)
            return True
        except ObjectMissingError:
            return bool(self.tier.list(relative.rstrip("/") + "/"))

    def read_bytes(self, relative: str) -> bytes:
        return self.tier.get(relative)

    def write_bytes_atomic(self, relative: str, data: bytes) -> None:
        """PUT ``relative`` (atomic in an object store); refuses to replace an existing object."""
        try:
            self.tier.head(relative)
        except ObjectMissingError:
            self.tier.put(relative, data)
            self._check(relative, len(data))
            return
        raise FileExistsError(f"{self.uri(relative)} already exists")

    def list_names(self, relative: str) -> list[str]:
        """Names directly under ``relative`` (objects and "directories"); empty when there are none."""
        prefix = relative.rstrip("/") + "/" if relative else ""
        return sorted({o.key[len(prefix) :].split("/", 1)[0] for o in self.tier.list(prefix)})

    def delete(self, path: str, *, recursive: bool = True) -> bool:
        """Delete an object, or (``recursive``) every object under a prefix."""
        deleted = self.tier.delete(path)
        if recursive:
            for found in self.tier.list(path.rstrip("/") + "/"):
                deleted = self.tier.delete(found.key) or deleted
        return deleted

    def data_files(self, relative: str = "") -> list[tuple[str, int]]:
        """``(path, size)`` of every data object below ``relative`` (path relative to it), skipping ``_``/``.``
        names (the manifest) as the readers do."""
        prefix = relative.rstrip("/") + "/" if relative else ""
        found = []
        for obj in self.tier.list(prefix):
            rel = obj.key[len(prefix) :]
            if not _hidden(rel):
                found.append((rel, obj.size))
        return sorted(found)

    def upload(self, local: Path, key: str) -> int:
        """PUT a local file as ``key`` (multipart when large) and check its size by a HEAD; returns the size."""
        size = local.stat().st_size
        with local.open("rb") as f:
            self.tier.put(key, f)
        self._check(key, size)
        return size

    def _check(self, key: str, size: int) -> None:
        found = self.tier.head(key).size
        if found != size:
            raise UploadMismatchError(f"{self.uri(key)}: uploaded {size} bytes, the store holds {found}")


def local_leaves(staged: Path) -> dict[str, list[Path]]:
    """Leaf directory (relative) → its data files, in a local staging directory written by Spark (markers,
    checksums and other ``_``/``.`` names skipped)."""
    leaves: dict[str, list[Path]] = defaultdict(list)
    for path in sorted(staged.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(staged).as_posix()
        parts = rel.split("/")
        if _hidden(rel) or len(parts) != LEAF_DEPTH + 1:
            continue
        leaves["/".join(parts[:LEAF_DEPTH])].append(path)
    return dict(leaves)


def swap_in_store(
    lake: ObjectLake, staged: Path, current: dict[str, list[str]], hook: StepHook = no_hook
) -> tuple[SwapCounts, int]:
    """Put the leaves staged locally under ``staged`` into the store, in place of ``current`` (leaf → data
    object names now in the lake, for the segments being replaced); see the module's description. Returns the
    counts and the bytes uploaded."""
    new_leaves = local_leaves(staged)
    counts = SwapCounts()
    uploaded = 0
    for leaf in sorted(set(new_leaves) | set(current)):
        hook("swap", leaf)
        new = new_leaves.get(leaf, [])
        old = current.get(leaf, [])
        if len(new) > 1 or len(old) > 1:
            log.warning("leaf %s: %d staged and %d present files; its swap is not atomic", leaf, len(new), len(old))
        if new and old:
            uploaded += lake.upload(new[0], f"{leaf}/{old[0]}")  # same name: one PUT replaces it
            counts.replaced += 1
        elif new:
            uploaded += lake.upload(new[0], f"{leaf}/{new[0].name}")
            counts.added += 1
        else:
            counts.emptied += 1
        for name in old[1:] if new else old:
            lake.delete(f"{leaf}/{name}", recursive=False)
        for path in new[1:]:
            uploaded += lake.upload(path, f"{leaf}/{path.name}")
    hook("swapped", None)
    return counts, uploaded


__all__ = ["ObjectLake", "UploadMismatchError", "is_store_uri", "local_leaves", "swap_in_store"]
