"""Reads of offloaded segments: ranged reads from the object store through a bounded on-disk cache.

:class:`RemoteSegment` stands in a shard's log for a segment whose local copy is gone: it answers
the same calls as a local :class:`~storage_engine.segment.segment.Segment` (``read``,
``iter_batches``, reader references), so every read path (offset, key, tag, time, figures,
verification, compaction's walks) works unchanged on it. Its ``read(position, size)`` goes to
the :class:`TierCache`.

The cache keeps fixed blocks of objects (``BLOCK_BYTES``, the last one of an object shorter) as
files::

    <data_dir>/tier-cache/<sha1 of the object key, 40 hex>.<block number>

A miss fetches the whole block with one ranged GET; a hit reads only the bytes asked from the
block's file (one ``pread``); blocks are evicted least recently used
first so that their total stays within the node policy's ``tier_cache_bytes`` (checked after
every insertion), so a consumer reading history does not fill the disk. The cache is
disposable: it is emptied when the engine opens, and a block file found missing (evicted under
a reader) is fetched again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from storage_engine.errors import SegmentDeletedError, TierError
from storage_engine.lifecycle.counters import Counters
from storage_engine.segment.meta import SegmentMeta
from storage_engine.segment.segment import Segment
from storage_engine.tier.store import ObjectTier

BLOCK_BYTES = 1024 * 1024  # 256 KiB blocks made a 100 KB batch span two blocks in about 40 % of reads
CACHE_DIR = "tier-cache"


class TierCache:
    """A bounded LRU cache of object blocks on local disk (thread-safe)."""

    def __init__(self, directory: Path, tier: ObjectTier, limit: Callable[[], int], counters: Counters) -> None:
        self.directory = directory
        self.tier = tier
        self._limit = limit
        self._counters = counters
        self._lock = threading.Lock()
        self._blocks: OrderedDict[tuple[str, int], int] = OrderedDict()  # (object key, block) → bytes
        self._bytes = 0
        self.block_bytes = BLOCK_BYTES  # fixed while blocks are cached (the bench tries others on an empty cache)
        self._stems: dict[str, str] = {}  # object key → its blocks' path without the block number
        shutil.rmtree(directory, ignore_errors=True)  # nothing survives a restart: it is only a cache

    @property
    def cached_bytes(self) -> int:
        return self._bytes

    def _path(self, key: str, block: int) -> str:
        stem = self._stems.get(key)
        if stem is None:
            stem = self._stems[key] = os.path.join(self.directory, hashlib.sha1(key.encode()).hexdigest())
        return f"{stem}.{block}"

    def read(self, key: str, object_size: int, position: int, size: int) -> bytes:
        """Bytes ``[position, position + size)`` of object ``key`` (fewer past its end)."""
        end = min(position + size, object_size)
        if end <= position:
            return b""
        parts: list[bytes] = []
        bs = self.block_bytes
        for block in range(position // bs, (end - 1) // bs + 1):
            start = block * bs
            lo, hi = max(0, position - start), end - start
            parts.append(self._cached(key, block, lo, hi) or self._fetch(key, object_size, block)[lo:hi])
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _cached(self, key: str, block: int, lo: int, hi: int) -> bytes | None:
        """Bytes ``[lo, hi)`` of a cached block (only those are read from its file), ``None`` on a miss."""
        with self._lock:
            hit = (key, block) in self._blocks
            if hit:
                self._blocks.move_to_end((key, block))
        if not hit:
            return None
        try:
            fd = os.open(self._path(key, block), os.O_RDONLY)
        except FileNotFoundError:  # evicted between the lookup and the read
            return None
        try:
            data = os.pread(fd, hi - lo, lo)
        finally:
            os.close(fd)
        self._counters.add("tier_cache_hits_total")
        return data

    def _fetch(self, key: str, object_size: int, block: int) -> bytes:
        """A missing block fetched whole with one ranged GET, then kept in the cache."""
        path = self._path(key, block)
        start = block * self.block_bytes
        try:
            data = self.tier.get_range(key, start, min(start + self.block_bytes, object_size))
        except TierError:
            self._counters.add("tier_fetch_failures_total")
            raise
        self._counters.add_many({"tier_cache_misses_total": 1, "tier_fetched_bytes_total": len(data)})
        tmp = f"{path}.{threading.get_ident()}.tmp"
        self.directory.mkdir(parents=True, exist_ok=True)  # created on the first miss
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        with self._lock:
            old = self._blocks.pop((key, block), None)
            self._bytes -= old or 0
            self._blocks[(key, block)] = len(data)
            self._bytes += len(data)
            self._evict()
        return data

    def _evict(self) -> None:
        """Drop least recently used blocks until the total is within the limit (lock held)."""
        limit = self._limit()
        while self._bytes > limit and self._blocks:
            (key, block), size = self._blocks.popitem(last=False)
            self._bytes -= size
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path(key, block))
            self._counters.add("tier_cache_evictions_total")

    def forget(self, key: str) -> None:
        """Drop every block of an object (it was deleted from the store)."""
        with self._lock:
            for k in [k for k in self._blocks if k[0] == key]:
                self._bytes -= self._blocks.pop(k)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._path(*k))
            self._stems.pop(key, None)


class RemoteSegment(Segment):
    """A sealed segment served from the object store (its local copy is gone).

    ``path`` is the data object's key (for error messages: a damaged batch names the object);
    ``local`` is false, so the log never renames or unlinks a file for it. Reader references
    work as for a file: after :meth:`remove` (the segment was deleted) a read raises
    :class:`~storage_engine.errors.SegmentDeletedError`.
    """

    local = False

    def __init__(self, meta: SegmentMeta, key: str, cache: TierCache) -> None:  # no file descriptor
        self.path = Path(key)
        self.meta = meta
        self.key = key
        self._cache = cache
        self._fd = -1
        self.size = meta.size_bytes
        self._refs = 0
        self._ref_lock = threading.Lock()
        self._close_when_free = False
        self.destroyed = False
        self.replaced = False
        self._open = True

    def append(self, buffers: list[bytes]) -> int:
        raise SegmentDeletedError(self.key)  # never: an offloaded segment is sealed

    def sync(self) -> None:
        return None

    def truncate(self, size: int) -> None:
        raise SegmentDeletedError(self.key)  # never: recovery cuts only the active segment

    def seal(self) -> None:
        return None

    def retain(self) -> None:
        with self._ref_lock:
            if not self._open or self.destroyed:
                raise SegmentDeletedError(self.key)
            self._refs += 1

    def _close_locked(self) -> None:
        self._open = False

    def rename(self, path: Path, *, sync: bool = True) -> None:
        return None  # nothing local to rename

    def remove(self, *, force: bool = False) -> bool:
        with self._ref_lock:
            if self._refs and not force:
                return False
            self.destroyed = bool(self._refs)
            self._open = False
        return True

    def read(self, position: int, size: int) -> bytes:
        if self.destroyed:
            raise SegmentDeletedError(self.key)
        return self._cache.read(self.key, self.size, position, size)

    def __repr__(self) -> str:
        return f"RemoteSegment({self.key}, size={self.size}, state={self.meta.state})"
