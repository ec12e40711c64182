"""What a cleaning round removes: the keep rule asked per batch, a plan's rule, and a dry
run's record of simulated removals."""

from __future__ import annotations

from collections.abc import Iterator

from storage_engine.compaction.checkpoint import CleanerState
from storage_engine.compaction.keep_rule import CleaningRule
from storage_engine.compaction.keymap import KeyMap
from storage_engine.lifecycle.shards import KEEP, REMOVE, RemovalRule
from storage_engine.policies.policy import NamespacePolicy


class OffsetBits:
    """A set of offsets of one segment as a bitmap (a dry run's simulated removals)."""

    __slots__ = ("_bits", "_n", "base")

    def __init__(self, base: int, last: int) -> None:
        self.base = base
        self._bits = bytearray((last - base) // 8 + 1)
        self._n = 0

    def add(self, offset: int) -> None:
        i = offset - self.base
        mask = 1 << (i & 7)
        if not self._bits[i >> 3] & mask:
            self._bits[i >> 3] |= mask
            self._n += 1

    def __contains__(self, offset: object) -> bool:
        if not isinstance(offset, int):
            return False
        i = offset - self.base
        return 0 <= i < 8 * len(self._bits) and bool(self._bits[i >> 3] & (1 << (i & 7)))

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[int]:
        for j, byte in enumerate(self._bits):
            if byte:
                for b in range(8):
                    if byte & (1 << b):
                        yield self.base + 8 * j + b


def cleaning_rule(
    kmap: KeyMap, map_end: int, first_dirty: int, state: CleanerState, policy: NamespacePolicy, now: int
) -> CleaningRule:
    """The keep rule of a round (:mod:`storage_engine.compaction.keep_rule`) as the rule
    ``rewrite_segment`` asks per batch."""
    return CleaningRule(kmap, map_end, first_dirty, list(state.passes), policy, now)


def keep_only(wanted: frozenset[int]) -> RemovalRule:
    return lambda cols: [KEEP if o in wanted else REMOVE for o in cols.offsets]
