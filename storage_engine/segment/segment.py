"""One segment file: ``<data_dir>/segments/<namespace>/<shard>/<base offset, 20 digits>.log``.

The file is a sequence of record batches in the :mod:`storage_engine.formats.codec`
format, back to back, starting at byte 0; its name is the offset of its first
record. Only the shard's I/O worker appends (at ``size``, with ``pwritev``);
readers use ``pread`` and never look past the size the log has published, so
they never see a half-written batch.

Other names a segment file takes during its life (Kafka's suffixes):

- ``<base>.log.deleted``: deleted from the log (retention, cleaning,
  reclamation); removed for good once its delay has passed and no reader
  holds it (:meth:`Segment.retain`), or forcibly after
  ``destroy_forcibly_after_ms``. Opening a shard removes any left over.
- ``<base>.log.cleaned``: a rewrite being written; incomplete until renamed
  to ``.swap``. Opening a shard removes any left over.
- ``<base>.log.swap``: a complete rewrite whose swap is decided; it replaces
  ``<base>.log``. Opening a shard finishes the swap (see
  :meth:`~storage_engine.segment.log.ShardLog.rewrite_segment`).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

from storage_engine.api import Record, SegmentState
from storage_engine.errors import CorruptSegmentError, SegmentDeletedError, StorageError
from storage_engine.formats.codec import HEADER_SIZE, BatchHeader, decode_header, iter_records
from storage_engine.segment.datadir import fsync_dir
from storage_engine.segment.meta import SegmentMeta

SUFFIX = ".log"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_IOV_MAX = 1024
_LENGTH = struct.Struct(">I")
SCAN_CHUNK = 1 << 20


def file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SUFFIX}"


def parse_file_name(name: str) -> int | None:
    """The base offset of a segment file name, or ``None`` for anything else."""
    stem, dot, suffix = name.partition(".")
    if dot and "." + suffix == SUFFIX and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


class Segment:
    """A segment file and its metadata (``meta`` is persisted by the index store)."""

    local = True  # a file on this node's disk (an offloaded segment's stand-in is not: storage_engine.tier)

    def __init__(self, path: Path, meta: SegmentMeta, fd: int) -> None:
        self.path = path
        self.meta = meta
        self._fd = fd
        self.size = os.fstat(fd).st_size  # bytes in the file, written or not yet fsynced
        # Reader references (RocketMQ's MappedFile reference count): a deleted or
        # replaced file is closed only once no reader holds it.
        self._refs = 0
        self._ref_lock = threading.Lock()
        self._close_when_free = False
        self.destroyed = False
        # Set before the index learns a rewrite's positions: a reader holding this
        # (old) file must not use positions from the sparse index any more.
        self.replaced = False

    @classmethod
    def create(cls, directory: Path, meta: SegmentMeta) -> Segment:
        """Create an empty segment file; the directory is fsynced so the file survives a crash."""
        path = directory / file_name(meta.base_offset)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        fsync_dir(directory)
        return cls(path, meta, fd)

    @classmethod
    def open(cls, path: Path, meta: SegmentMeta) -> Segment:
        return cls(path, meta, os.open(path, os.O_RDWR))

    @property
    def base_offset(self) -> int:
        return self.meta.base_offset

    @property
    def sealed(self) -> bool:
        return self.meta.state is not SegmentState.ACTIVE

    # -- writing (the shard's I/O worker only) -----------------------------------------
    def append(self, buffers: list[bytes]) -> int:
        """Write ``buffers`` at the end of the file; return the position of the first byte."""
        start = pos = self.size
        for i in range(0, len(buffers), _IOV_MAX):
            chunk = buffers[i : i + _IOV_MAX]
            want = sum(map(len, chunk))
            done = os.pwritev(self._fd, chunk, pos)
            if done < want:  # a short write: finish it byte-exactly
                rest = memoryview(b"".join(chunk))[done:]
                while rest:
                    n = os.pwrite(self._fd, rest, pos + done)
                    done += n
                    rest = rest[n:]
            pos += want
        self.size = pos
        return start

    def sync(self) -> None:
        os.fdatasync(self._fd)

    def truncate(self, size: int) -> None:
        """Cut the file at ``size`` (recovery of a torn tail) and make the cut durable."""
        os.ftruncate(self._fd, size)
        os.fsync(self._fd)
        self.size = size

    def seal(self) -> None:
        """Make every byte durable and mark the segment immutable."""
        os.fsync(self._fd)
        self.meta.state = SegmentState.SEALED

    # -- reader references -------------------------------------------------------------
    def retain(self) -> None:
        """Hold the file open for a reader; raises SegmentDeletedError once it is gone."""
        with self._ref_lock:
            if self._fd < 0 or self.destroyed:
                raise SegmentDeletedError(str(self.path))
            self._refs += 1

    def release(self) -> None:
        with self._ref_lock:
            self._refs -= 1
            if self._refs == 0 and self._close_when_free:
                self._close_locked()

    @property
    def refs(self) -> int:
        return self._refs

    def retire(self) -> None:
        """The segment left the log (replaced by a rewrite): close it once no reader holds it."""
        with self._ref_lock:
            if self._refs == 0:
                self._close_locked()
            else:
                self._close_when_free = True

    def rename(self, path: Path, *, sync: bool = True) -> None:
        """Rename the file; with ``sync`` false the caller fsyncs the directory (once for many renames)."""
        os.rename(self.path, path)
        if sync:
            fsync_dir(path.parent)
        self.path = path

    def remove(self, *, force: bool = False) -> bool:
        """Unlink the file and close it. Without ``force`` only when no reader holds it
        (returns False otherwise). With ``force`` a reader still holding it finds the
        descriptor pointing at ``/dev/null`` (so its number is never reused under it) and
        gets SegmentDeletedError on its next read."""
        with self._ref_lock:
            if self._refs and not force:
                return False
            if self._refs and self._fd >= 0:
                null = os.open(os.devnull, os.O_RDONLY)
                try:
                    os.dup2(null, self._fd)  # atomically swaps what the descriptor refers to
                finally:
                    os.close(null)
                self.destroyed = True
                self._close_when_free = True
            else:
                self._close_locked()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        return True

    def _close_locked(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    # -- reading --------------------------------------------------------------------
    def read(self, position: int, size: int) -> bytes:
        data = os.pread(self._fd, size, position)
        if self.destroyed:
            raise SegmentDeletedError(str(self.path))
        return data

    def iter_batches(
        self, start: int, end: int, *, verify: bool = True, chunk: int = SCAN_CHUNK
    ) -> Iterator[tuple[int, BatchHeader, bytes, int]]:
        """``(file position, header, buffer, offset in buffer)`` of each batch in ``[start, end)``.

        Reads ``chunk`` bytes at a time (more for a larger batch). Raises
        :class:`CorruptSegmentError` with this file's path and the batch's file
        position at the first damaged or incomplete batch.
        """
        pos = start
        buf = b""
        buf_start = start
        while pos < end:
            off = pos - buf_start
            if len(buf) - off < HEADER_SIZE:
                buf = self.read(pos, min(max(chunk, HEADER_SIZE), end - pos))
                buf_start, off = pos, 0
            if len(buf) - off >= 4:
                (length,) = _LENGTH.unpack_from(buf, off)
                if len(buf) - off < length <= end - pos:
                    buf = self.read(pos, min(max(chunk, length), end - pos))
                    buf_start, off = pos, 0
            try:
                header = decode_header(buf, off, path=str(self.path), verify=verify)
            except CorruptSegmentError as exc:
                raise CorruptSegmentError(str(self.path), pos, exc.reason) from None
            if header.length > end - pos:
                raise CorruptSegmentError(str(self.path), pos, f"batch of {header.length} bytes runs past byte {end}")
            yield pos, header, buf, off
            pos += header.length

    def close(self) -> None:
        with self._ref_lock:
            self._close_locked()

    def __repr__(self) -> str:
        return f"Segment({self.path}, size={self.size}, state={self.meta.state})"


# -- reading a segment file from outside the node (Spark executors, tools) -------------------------------


class SegmentFileChangedError(StorageError):
    """A segment file holds fewer bytes than the size it was listed with: a sealed segment
    changes only by a whole-file swap (compaction, reclaim), so it was rewritten since."""

    code = "segment_changed"

    def __init__(self, path: str, size: int, expected: int) -> None:
        self.path = path
        self.size = size
        self.expected = expected
        super().__init__(
            f"segment file {path} holds {size} bytes, fewer than the {expected} it was listed with: "
            "rewritten (or cut) since it was listed"
        )


def iter_file_batches(
    path: str | Path, size: int | None = None, *, tolerate_torn_tail: bool = False, verify: bool = True
) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """``(position, header, buffer)`` of each batch in bytes ``[0, size)`` of the segment file at
    ``path`` (the whole file when ``size`` is ``None``), in file order.

    For readers outside the node process: nothing but the file is opened (no index, no RocksDB).
    ``buffer`` maps those bytes read-only (pages are read as the walk reaches them) and stays valid
    until the walk ends; decode a batch's records with
    ``storage_engine.formats.codec.iter_records(buffer, position, header)`` (or use :func:`iter_file_records`).
    The file is opened once, so a file swapped by a rewrite while it is walked is read whole from the
    old inode.

    Bytes past ``size`` are never looked at: give the size the node listed (a sealed segment's whole
    file; the active one's committed bytes, which never end in a partial batch). A file now shorter
    than ``size`` raises :class:`SegmentFileChangedError` before anything is yielded. Every batch is
    checked (header, and the CRC with ``verify``); damage raises
    :class:`~storage_engine.errors.CorruptSegmentError` with the path and byte position.
    ``tolerate_torn_tail`` stops quietly at a batch that runs past ``size`` (a write still in flight
    when no committed size is known) instead of raising.
    """
    name = str(path)
    with open(path, "rb") as f:
        actual = os.fstat(f.fileno()).st_size
        if size is None:
            size = actual
        elif actual < size:
            raise SegmentFileChangedError(name, actual, size)
        if size <= 0:
            return
        with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as mapped:
            buf = memoryview(mapped)
            try:
                pos = 0
                while pos < size:
                    if tolerate_torn_tail and _runs_past(buf, pos, size):
                        return
                    header = decode_header(buf, pos, path=name, verify=verify)
                    yield pos, header, buf
                    pos += header.length
            finally:
                buf.release()


def iter_file_records(
    path: str | Path, size: int | None = None, *, tolerate_torn_tail: bool = False, verify: bool = True
) -> Iterator[Record]:
    """Every record in bytes ``[0, size)`` of the segment file at ``path``, in offset order
    (see :func:`iter_file_batches` for ``size``, ``tolerate_torn_tail`` and ``verify``)."""
    name = str(path)
    for pos, header, buf in iter_file_batches(path, size, tolerate_torn_tail=tolerate_torn_tail, verify=verify):
        yield from iter_records(buf, pos, header, path=name)


def _runs_past(buf: memoryview, pos: int, end: int) -> bool:
    """True when the batch at ``pos`` does not fit before ``end``: a write still in flight."""
    avail = end - pos
    if avail < HEADER_SIZE:
        return True
    (length,) = _LENGTH.unpack_from(buf, pos)
    return bool(length > avail)
