"""Which shard a record goes to when the producer does not say.

A keyed record goes to ``crc32(key) mod shards``: stable across processes and
restarts, so one key always lands on one shard (compaction needs that). Keyless
records are spread round-robin.
"""

from __future__ import annotations

import itertools
import threading
import zlib


def shard_for_key(key: bytes, shards: int) -> int:
    return zlib.crc32(key) % shards


class RoundRobin:
    """A thread-safe cycle over shards for keyless records."""

    def __init__(self) -> None:
        self._counter = itertools.count()
        self._lock = threading.Lock()

    def next_shard(self, shards: int) -> int:
        with self._lock:
            return next(self._counter) % shards
