"""The cleaner checkpoint of a shard: the first dirty offset and the cleaning passes so far.

Format (big-endian): ``version u8 (1) | first_dirty u64 | n u16 | n × (end u64, clean time u64)``,
written atomically with one put (one synced RocksDB write for the log stores).
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from dataclasses import dataclass, field

from storage_engine.compaction.store_io import CompactableShard

MAX_PASSES = 64  # cleaning passes remembered per shard (older ones merge, keeping tombstones longer)
_STATE_HEAD = struct.Struct(">BQH")
_PASS = struct.Struct(">QQ")


@dataclass(slots=True)
class CleanerState:
    """A shard's cleaner checkpoint: first dirty offset and the cleaning passes so far.

    ``passes`` are ``(end offset, clean time)`` with ascending ends: a record at
    offset ``o`` was first cleaned at the time of the first pass whose end is
    above ``o`` (its tombstone's delete horizon starts there).
    """

    first_dirty: int = 0
    passes: list[tuple[int, int]] = field(default_factory=list)

    def clean_time(self, offset: int) -> int | None:
        i = bisect_right([e for e, _ in self.passes], offset)
        return self.passes[i][1] if i < len(self.passes) else None

    def record_pass(self, end: int, now: int) -> None:
        self.first_dirty = max(self.first_dirty, end)
        if self.passes and end <= self.passes[-1][0]:
            return
        self.passes.append((end, now))
        while len(self.passes) > MAX_PASSES:  # merge the two oldest: the later time wins (safe)
            (_, _), (e2, t2) = self.passes[0], self.passes[1]
            self.passes[0:2] = [(e2, t2)]

    def pack(self) -> bytes:
        return _STATE_HEAD.pack(1, self.first_dirty, len(self.passes)) + b"".join(_PASS.pack(*p) for p in self.passes)

    @classmethod
    def unpack(cls, raw: bytes | None) -> CleanerState:
        if not raw:
            return cls()
        version, first_dirty, n = _STATE_HEAD.unpack_from(raw)
        if version != 1:
            raise ValueError(f"unsupported cleaner checkpoint version {version}")
        passes = [_PASS.unpack_from(raw, _STATE_HEAD.size + i * _PASS.size) for i in range(n)]
        return cls(first_dirty, [(int(e), int(t)) for e, t in passes])


def load_state(shard: CompactableShard) -> CleanerState:
    return CleanerState.unpack(shard.cleaner_checkpoint())


def save_state(shard: CompactableShard, state: CleanerState) -> None:
    """Persist the cleaner checkpoint atomically (one synced RocksDB write for the log adapters)."""
    shard.save_cleaner_checkpoint(state.pack())
