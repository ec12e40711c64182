"""The data directory itself: its exclusive lock, its format marker and the node policy.

Layout (``segment`` adapter; the ``rocksdb`` adapter has only ``LOCK``,
``FORMAT``, ``NODE_POLICY`` and ``index/``)::

    <data_dir>/LOCK                                   flock(2)-ed by the owning process
    <data_dir>/FORMAT                                 "<adapter> <version>\\n"
    <data_dir>/NODE_POLICY                            the node policy once set (JSON, see below)
    <data_dir>/index/                                 RocksDB (IndexStore)
    <data_dir>/segments/<namespace>/<shard>/<20-digit base offset>.log
    <data_dir>/trash/                                 directories being removed
    <data_dir>/tier-cache/                            blocks of offloaded segments read back
                                                      (storage_engine.tier.remote_reads; disposable)
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from pathlib import Path

from storage_engine.errors import DataDirLockedError, InvalidArgumentError, PolicyValidationError
from storage_engine.policies.policy import NodePolicy, node_policy_from

FORMAT_VERSION = 1
NODE_POLICY_FILE = "NODE_POLICY"
TMP_SUFFIX = ".tmp"

log = logging.getLogger(__name__)


def fsync_dir(path: Path) -> None:
    """Make entries created, renamed or removed in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file, never a mix."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def tree_bytes(root: Path) -> int:
    """Apparent size of every file under ``root``: the disk use counted against a configured
    quota (segments, ``.deleted`` files, RocksDB's SST/WAL/MANIFEST files, checkpoints,
    markers alike). Symlinks are not followed; a file removed during the walk is skipped."""
    total = 0
    stack = [str(root)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except FileNotFoundError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    total += entry.stat(follow_symlinks=False).st_size
            except FileNotFoundError:
                continue
    return total


class DataDir:
    """An opened data directory: holds ``LOCK`` for the process's lifetime.

    RocksDB lets one process open a database for writing, and segment files
    have a single writer, so a second opener fails fast with
    :class:`DataDirLockedError` instead of corrupting anything.
    """

    def __init__(self, root: Path, adapter: str) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock_fd: int | None = os.open(self.root / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise DataDirLockedError(str(self.root)) from None
        try:
            self._check_format(adapter)
        except BaseException:
            self.release()
            raise

    def _check_format(self, adapter: str) -> None:
        marker = self.root / "FORMAT"
        expected = f"{adapter} {FORMAT_VERSION}\n"
        if not marker.exists():
            write_atomic(marker, expected.encode())
            return
        found = marker.read_text()
        if found != expected:
            raise InvalidArgumentError(
                "data_dir", f"{self.root} holds {found.strip()!r} data; this engine writes {expected.strip()!r}"
            )

    # -- the node policy ------------------------------------------------------------------
    # ``NODE_POLICY`` holds ``{"version": n, "policy": {every NodePolicy field}}``, written
    # whole by write_atomic: a crash leaves the previous file or the new one, and at worst
    # a torn ``NODE_POLICY.tmp`` that never became the policy.
    @property
    def node_policy_path(self) -> Path:
        return self.root / NODE_POLICY_FILE

    def load_node_policy(self) -> tuple[NodePolicy, int] | None:
        """The persisted node policy and its version (≥ 1), or ``None`` when it was never set.

        A leftover temp file is a write that crashed before its rename: the policy it
        carried was never acknowledged, so it is removed and the old file rules. A file
        that does not parse or no longer validates raises ``InvalidArgumentError`` naming
        it: enforcing the built-in defaults instead would silently undo what the operator
        set (remove the file to fall back on purpose; the control plane pushes again).
        """
        path = self.node_policy_path
        torn = path.with_name(path.name + TMP_SUFFIX)
        if torn.exists():
            log.warning("%s: removing %s left by an interrupted write", self.root, torn.name)
            torn.unlink()
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(raw)
            version, values = doc["version"], doc["policy"]
            if isinstance(version, bool) or not isinstance(version, int) or version < 1:
                raise ValueError(f"version must be an integer ≥ 1, found {version!r}")
            if not isinstance(values, dict):
                raise ValueError("policy must be a JSON object")
            return node_policy_from(values), version
        except (ValueError, KeyError, TypeError, PolicyValidationError) as exc:
            raise InvalidArgumentError(
                "data_dir",
                f"{path} ({len(raw)} bytes) is not a valid node policy: {exc}; remove it to use the defaults",
            ) from None

    def save_node_policy(self, policy: NodePolicy, version: int) -> None:
        """Persist ``policy`` as ``version`` (durable when this returns)."""
        doc = {"version": version, "policy": policy.to_dict()}
        write_atomic(self.node_policy_path, json.dumps(doc, sort_keys=True).encode() + b"\n")

    @property
    def index_dir(self) -> Path:
        return self.root / "index"

    @property
    def segments_dir(self) -> Path:
        return self.root / "segments"

    @property
    def trash_dir(self) -> Path:
        return self.root / "trash"

    def release(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None
