"""Key compaction's keep rule (DESIGN §3), vectorised: what a round of cleaning decides
for each record, as the :data:`~storage_engine.lifecycle.RemovalRule` an adapter's
``rewrite_segment`` asks while a segment streams through.

Within ``[log start, map end)`` a record is kept iff it is the latest for its key
(records past the map end and records without a key are kept) and, if a tombstone, its
delete horizon (the time its offset was first cleaned + ``delete_retention_ms``) has not
passed; expiry is the adapter's own step of every rewrite, so it is not repeated here.
Below the round (offsets under its first dirty offset) a keyed record is superseded iff
its key is in the map at all (the map holds only later offsets); within the round the
map's superseded bitmap answers without the key.

A :class:`CleaningRule` answers three ways, all giving the same decisions:

- called with :class:`~storage_engine.formats.codec.RecordColumns` (the ``rocksdb`` and memory
  adapters, dry runs): a list;
- :meth:`CleaningRule.decide_layout` with a :class:`~storage_engine.formats.columnar.Layout` of
  one batch (segment files): a ``uint8`` array, keys hashed from the encoded bytes;
- :meth:`CleaningRule.by_offset` for dense offsets wholly within the round: a ``uint8``
  array from the bitmap alone, nothing of the batch decoded (``None`` when it cannot).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from storage_engine.compaction.keymap import KeyMap, hash_keys, layout_key_hashes
from storage_engine.formats.batch_columns import RecordColumns
from storage_engine.formats.codec import ATTR_KEY, ATTR_VALUE
from storage_engine.formats.columnar import I64, Layout
from storage_engine.lifecycle import KEEP, REMOVE, SUPERSEDED
from storage_engine.policies.policy import NamespacePolicy

_SUPERSEDED = np.uint8(SUPERSEDED)


class CleaningRule:
    """The keep rule of one round: ``kmap`` filled over ``[first_dirty, map_end)``; the
    shard's cleaning passes (``(end, clean time)``) give tombstones below the round
    their horizon."""

    __slots__ = ("first_dirty", "kmap", "map_end", "now", "pass_ends", "pass_times", "retention")

    def __init__(
        self,
        kmap: KeyMap,
        map_end: int,
        first_dirty: int,
        passes: list[tuple[int, int]],
        policy: NamespacePolicy,
        now: int,
    ) -> None:
        self.kmap = kmap
        self.map_end = map_end
        self.first_dirty = first_dirty
        self.pass_ends = np.array([e for e, _ in passes], dtype=I64)
        self.pass_times = np.array([t for _, t in passes], dtype=I64)
        self.retention = policy.delete_retention_ms
        self.now = now

    def decide(
        self, offsets: np.ndarray, attrs: np.ndarray, hashes: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    ) -> np.ndarray:
        """Decisions (``uint8``) for records in offset order; ``hashes(idx)`` gives ``(h, c)``
        of the keys of the keyed records at indexes ``idx``."""
        n = offsets.size
        out = np.zeros(n, dtype=np.uint8)
        if not n:
            return out
        lo = int(np.searchsorted(offsets, self.first_dirty))
        hi = int(np.searchsorted(offsets, self.map_end))
        tombstone = (attrs & ATTR_VALUE) == 0
        kmap, now, retention = self.kmap, self.now, self.retention
        if lo:  # below the round: superseded when the key is in the map at all
            keyed = np.flatnonzero(attrs[:lo] & ATTR_KEY)
            if keyed.size:
                h, c = hashes(keyed)
                out[keyed[kmap.lookup(h, c) >= 0]] = SUPERSEDED
            dead_stones = np.flatnonzero(tombstone[:lo] & (out[:lo] == KEEP))
            if dead_stones.size:
                times = np.full(dead_stones.size, now, dtype=I64)  # first cleaned now, unless a pass did
                if self.pass_ends.size:
                    at = np.searchsorted(self.pass_ends, offsets[dead_stones], side="right")
                    cleaned = at < self.pass_ends.size
                    times[cleaned] = self.pass_times[at[cleaned]]
                out[dead_stones[times + retention <= now]] = REMOVE
        if hi > lo:  # within the round: the bitmap the map build filled answers
            sup = kmap.superseded_at(offsets[lo:hi])
            out[lo:hi][sup] = SUPERSEDED
            if retention <= 0:  # a tombstone within the round is at its horizon already
                out[lo:hi][~sup & tombstone[lo:hi]] = REMOVE
        return out

    def decide_layout(self, layout: Layout) -> np.ndarray:
        """:meth:`decide` for the records of a :class:`Layout` (some batches of a file)."""
        return self.decide(layout.offsets, layout.attrs, lambda idx: layout_key_hashes(layout, idx))

    def __call__(self, cols: RecordColumns) -> list[int]:
        keys = cols.keys

        def hashes(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return hash_keys([keys[i] for i in idx.tolist()])

        attrs = np.array(cols.attrs, dtype=np.uint8)  # ATTR_KEY set exactly where a key is
        kept: list[int] = self.decide(np.array(cols.offsets, dtype=I64), attrs, hashes).tolist()
        return kept

    def by_offset(self, first: int, count: int) -> np.ndarray | None:
        """Decisions for dense offsets wholly within the round, from the bitmap alone (a
        tombstone there is within its horizon unless ``delete_retention_ms`` is 0)."""
        if first < self.first_dirty or first + count > self.map_end or self.retention <= 0:
            return None
        return self.kmap.superseded_mask(first, count).astype(np.uint8) * _SUPERSEDED
