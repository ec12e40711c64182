"""The data directory itself: its exclusive lock and its format marker.

Layout (``segment`` adapter; the ``rocksdb`` adapter has only ``LOCK``,
``FORMAT`` and ``index/``)::

    <data_dir>/LOCK                                   flock(2)-ed by the owning process
    <data_dir>/FORMAT                                 "<adapter> <version>\\n"
    <data_dir>/index/                                 RocksDB (IndexStore)
    <data_dir>/segments/<namespace>/<shard>/<20-digit base offset>.log
    <data_dir>/trash/                                 directories being removed
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from storage_engine.errors import DataDirLockedError, InvalidArgumentError

FORMAT_VERSION = 1


def fsync_dir(path: Path) -> None:
    """Make entries created, renamed or removed in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file, never a mix."""
    tmp = path.with_name(path.name + ".tmp")
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
    """Bytes of every file under ``root`` (disk use against a configured quota)."""
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
