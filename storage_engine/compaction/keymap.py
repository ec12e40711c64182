"""Key compaction's key map (DESIGN §3): key → latest offset within a memory budget, in
numpy arrays and vectorised code (see :mod:`storage_engine.compaction` for how rounds
use it).

**Keys** stand as 96 bits: a 64-bit hash ``h`` and a 32-bit check ``c`` of two hash
chains over the key's bytes (:func:`hash_words`), seeded at random per process (so
collisions cannot be precomputed). Each chain starts from the key's length, xors in one
8-byte word of the key at a time (the last zero-padded), multiplies by an odd constant
and xor-shifts, all bijections of the state, and ends with MurmurHash3's finaliser: two
keys of one length that differ in one word never collide; others are taken to collide
with probability about 2⁻⁹⁶ a pair, so a false
"superseded" needs two keys of one round to collide: about n²/2⁹⁷ for n keys (~10⁻¹⁷
for a million). A producer that could find a collision gains nothing: it would need the
other key's bytes, and with them it can supersede that key by writing it.

**Table.** Open addressing with double hashing (slot ``h mod slots``, step ``1 + c mod
(slots − 1)``) over a prime number of slots, filled to ``LOAD_FACTOR``, preallocated,
``SLOT_BYTES`` = 16 bytes a slot as two u64 side by side (one gather reads a slot):
``h`` (0 marks an empty slot; a zero hash is stored as 1) and ``c | delta << 32``, the
offset as a 32-bit delta from the round's first offset. Beside it, 1/32 of the budget is
a bitmap of the round's superseded offsets. :meth:`KeyMap.put_hashes` inserts a chunk of
records at once. Every record probes (a key's records all end on the same slot): each
numpy step advances every record still probing by one slot; once fewer than
``_SCALAR_TAIL`` are left (a high load's long probes), each step reads the next
``_WIDE`` slots of each; the last ``_SCALAR_TAIL_WIDE`` finish in a scalar loop. Keys
found take their latest offset by ``np.maximum.at`` over ``c | delta << 32`` (the
largest is the chunk's last record of the key; the old offset and the others are
superseded); new keys claim the empty slot their probe ended on: record indexes are
scattered into the claimed slots and the index that lands decides between keys that
ended on one slot (the others probe on, from there). When the chunk holds more new keys
than the map has room for, it is cut before the first record of the first key that does
not fit and the prefix goes in.

Memory: the table and the bitmap (:attr:`KeyMap.memory_bytes` ≤ the budget); a call's
temporaries are ~100 bytes per record of the chunk it is given.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

from storage_engine.formats.columnar import I64, Layout, as_u8, words_at
from storage_engine.policies.keymap_size import (
    LOAD_FACTOR,
    MIN_MAP_BUDGET_BYTES,
    MIN_MAP_SLOTS,
    SLOT_BYTES,
    bitmap_bytes,
)

MAX_ROUND_SPAN = (1 << 32) - 1  # offsets one round's map spans at most (its deltas are 32-bit)
U64 = np.uint64
_P1 = U64(0x9E3779B97F4A7C15)
_P2 = U64(0xC2B2AE3D27D4EB4F)
_M1 = U64(0xFF51AFD7ED558CCD)
_M2 = U64(0xC4CEB9FE1A85EC53)
_ALL = U64(0xFFFFFFFFFFFFFFFF)
_MASK64 = (1 << 64) - 1
_MASK32 = (1 << 32) - 1
_SEEDS = np.frombuffer(os.urandom(16), dtype=U64)
_S32, _S33, _S29 = U64(32), U64(33), U64(29)
_SCALAR_TAIL = 2048  # keys still probing below which each numpy step reads the next _WIDE slots of each
_WIDE = 8
_SCALAR_TAIL_WIDE = 16  # keys still probing below which a scalar loop finishes them
_ONE_BITS = (1 << np.arange(8, dtype=np.uint8)).astype(np.uint8)


def _fmix(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser (in place)."""
    h ^= h >> _S33
    h *= _M1
    h ^= h >> _S33
    h *= _M2
    h ^= h >> _S33
    return h


WordReader = Callable[[int, "np.ndarray | None"], np.ndarray]
"""``word(byte, sel)``: the little-endian u64 at ``byte`` of each key (of the keys at
indexes ``sel``, or of all), bytes past a key's end being anything."""


def hash_words(lengths: np.ndarray, word: WordReader) -> tuple[np.ndarray, np.ndarray]:
    """``(h, c)``: the 64-bit hash (never 0) and 32-bit check of keys of ``lengths`` bytes
    read 8 bytes at a time by ``word`` (see the module docstring)."""
    n = lengths.size
    lengths = lengths.astype(I64, copy=False)
    lu = lengths.astype(U64)
    h1 = (lu * _P2) ^ _SEEDS[0]  # the length, then each word, moves the state by bijections
    h2 = (lu * _P1) ^ _SEEDS[1]
    if n:
        shortest, longest = int(lengths.min()), int(lengths.max())
        for w in range(0, longest, 8):
            if w + 8 <= shortest:  # a whole word of every key
                x = word(w, None)
                h1 ^= x
                h1 *= _P1
                h1 ^= h1 >> _S32
                h2 ^= x
                h2 *= _P2
                h2 ^= h2 >> _S29
                continue
            active = np.flatnonzero(lengths > w)
            x = word(w, active)
            rem = lengths[active] - w
            x &= np.where(rem >= 8, _ALL, (U64(1) << (8 * np.minimum(rem, 7)).astype(U64)) - U64(1))
            a1 = (h1[active] ^ x) * _P1
            h1[active] = a1 ^ (a1 >> _S32)
            a2 = (h2[active] ^ x) * _P2
            h2[active] = a2 ^ (a2 >> _S29)
    h = _fmix(h1)
    h[h == 0] = 1
    c = (_fmix(h2) >> _S32).astype(np.uint32)
    return h, c


def key_hashes(u8: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`hash_words` of the keys ``u8[starts[i] : starts[i] + lengths[i]]``."""
    return hash_words(lengths, lambda w, sel: words_at(u8, (starts if sel is None else starts[sel]) + w))


def layout_key_hashes(layout: Layout, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`hash_words` of the keys of the records at ``idx`` (ascending) of a layout."""
    return hash_words(layout.klen[idx], lambda w, sel: layout.key_words(idx if sel is None else idx[sel], w))


def hash_keys(keys: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`key_hashes` of Python byte strings (adapters that hand over ``Record``s)."""
    lengths = np.fromiter(map(len, keys), dtype=I64, count=len(keys))
    starts = np.cumsum(lengths) - lengths
    return key_hashes(as_u8(b"".join(keys) + bytes(8)), starts, lengths)


def _prime_at_most(n: int) -> int:
    """The largest prime ≤ ``n`` (double hashing visits every slot of a prime table)."""
    if n < MIN_MAP_SLOTS:
        raise ValueError(f"no key map of fewer than {MIN_MAP_SLOTS} slots")
    while n > 2:
        if n % 2 and all(n % d for d in range(3, int(n**0.5) + 1, 2)):
            return n
        n -= 1
    return 2


class KeyMap:
    """Key → latest offset in a table of ``SLOT_BYTES``-byte slots, plus a bitmap of the
    round's superseded offsets, together within a budget in bytes (module docstring).
    Offsets must lie in ``[base, base + span)`` and come in ascending order.

    A slot is two u64 side by side (one cache line holds both): the hash ``h`` (0: empty)
    and ``c | delta << 32``."""

    __slots__ = ("_n", "_rows", "_sup", "_t", "_tv", "base", "budget_bytes", "capacity", "slots", "span")

    def __init__(self, budget_bytes: int, base: int = 0) -> None:
        if budget_bytes < MIN_MAP_BUDGET_BYTES:
            raise ValueError(f"a key map needs at least {MIN_MAP_BUDGET_BYTES} bytes, not {budget_bytes}")
        self.budget_bytes = budget_bytes
        bitmap = bitmap_bytes(budget_bytes)
        self.slots = _prime_at_most((budget_bytes - bitmap) // SLOT_BYTES)
        self.capacity = int(self.slots * LOAD_FACTOR)
        assert self.capacity >= 1, "a map that holds no key would never finish a round"
        self.span = min(MAX_ROUND_SPAN, 8 * bitmap)
        self._t = np.zeros((self.slots, 2), dtype=U64)
        assert self._t.itemsize * 2 == SLOT_BYTES
        self._rows = self._t.view(np.dtype((np.void, SLOT_BYTES))).ravel()  # a gather reads whole slots
        self._tv = self._t.ravel().data  # fast scalar reads
        self._sup = np.zeros(bitmap, dtype=np.uint8)
        self._n = 0
        self.base = base

    def clear(self, base: int) -> None:
        """Empty the map for a round whose offsets start at ``base`` (no reallocation)."""
        if self._n:
            self._t.fill(0)
            self._sup.fill(0)
        self._n = 0
        self.base = base

    def _slots_at(self, at: np.ndarray) -> np.ndarray:
        """The slots at ``at`` as an ``(n, 2)`` int64 array (a copy)."""
        slots: np.ndarray = self._rows[at].view(I64).reshape(-1, 2)
        return slots

    # -- the table ------------------------------------------------------------------------
    def _probe(self, h: np.ndarray, c: np.ndarray, after: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """For keys: ``(slot, found)``: the slot holding each key, or (not found) the first
        empty slot of its probe sequence (``h mod slots``, then steps of ``1 + c mod
        (slots − 1)``), from the start or from just past ``after`` (slots of the sequence
        known to be taken). Each numpy step advances every key still probing; the last
        few (a high load's long probes) finish in a scalar loop."""
        slots = self.slots
        n = h.size
        hi = h.view(I64)
        ci = c.astype(I64)
        step = ci % max(1, slots - 1) + 1
        if after is None:
            slot = (h % U64(slots)).astype(I64)
            t = self._slots_at(slot)
            found = (t[:, 0] == hi) & ((t[:, 1] & _MASK32) == ci)
            pending = np.flatnonzero(~found & (t[:, 0] != 0))
        else:
            slot, found, pending = after.copy(), np.zeros(n, dtype=bool), np.arange(n)
        if not pending.size:
            return slot, found
        # one row per quantity, so that one call drops the keys done: index, hash, check, step, slot
        state = np.stack((pending, hi[pending], ci[pending], step[pending], slot[pending]))
        while state.shape[1] > _SCALAR_TAIL:
            at = state[4]
            at += state[3]
            np.subtract(at, slots, out=at, where=at >= slots)
            t = self._slots_at(at)
            th = t[:, 0]
            eq = (th == state[1]) & ((t[:, 1] & _MASK32) == state[2])
            stop = eq | (th == 0)
            if stop.any():
                done = state[:, stop]
                slot[done[0]] = done[4]
                found[done[0][eq[stop]]] = True
                state = state[:, ~stop]
        wide = np.arange(1, _WIDE + 1, dtype=I64)
        while state.shape[1] > _SCALAR_TAIL_WIDE:  # the tail: the next _WIDE slots of each at once
            at = state[4][:, None] + state[3][:, None] * wide
            at %= slots
            t = self._rows[at.ravel()].view(I64).reshape(-1, _WIDE, 2)
            th = t[:, :, 0]
            eq = (th == state[1][:, None]) & ((t[:, :, 1] & _MASK32) == state[2][:, None])
            stop = eq | (th == 0)
            hit = stop.any(axis=1)
            rows = np.flatnonzero(hit)
            first = stop[rows].argmax(axis=1)
            slot[state[0][rows]] = at[rows, first]
            found[state[0][rows[eq[rows, first]]]] = True
            state[4] = at[:, -1]
            state = state[:, ~hit]
        tv = self._tv
        for k, hk, ck, st, i in zip(*state.tolist(), strict=True):
            hk &= _MASK64
            while True:
                i += st
                if i >= slots:
                    i -= slots
                t_i = tv[2 * i]
                if not t_i:
                    break
                if t_i == hk and tv[2 * i + 1] & _MASK32 == ck:
                    found[k] = True
                    break
            slot[k] = i
        return slot, found

    def _mark(self, deltas: np.ndarray) -> None:
        """Set the superseded bits of round deltas."""
        if deltas.size:
            np.bitwise_or.at(self._sup, deltas >> 3, _ONE_BITS[deltas & 7])

    def put_hashes(self, offsets: np.ndarray, h: np.ndarray, c: np.ndarray) -> int:
        """Record ``offsets[i]`` (int64, ascending, above what went in before) as the latest
        for key ``(h[i], c[i])``; returns how many went in: fewer than given when the map
        is full at a new key, or at an offset past the round's span."""
        n = offsets.size
        if not n:
            return 0
        limit = self.base + self.span
        if int(offsets[-1]) >= limit:
            n = int(np.searchsorted(offsets, limit))
            offsets, h, c = offsets[:n], h[:n], c[:n]
            if not n:
                return 0
        slot, found = self._probe(h, c)  # a key's records all end on one slot
        new = np.flatnonzero(~found)
        room = self.capacity - self._n
        if new.size > room:  # perhaps more new keys than room: cut before the first that does not fit
            pairs = np.stack((h[new], c[new].astype(U64)), axis=1)
            _, first = np.unique(pairs, axis=0, return_index=True)
            if first.size > room:
                cut = int(np.sort(new[first])[room])
                return self.put_hashes(offsets[:cut], h[:cut], c[:cut]) if cut else 0
        cd = self._t[:, 1]
        # c | delta << 32: for one slot (one key) the largest is its latest offset
        packed = c.astype(U64) | ((offsets - self.base).astype(U64) << _S32)
        old = np.flatnonzero(found)
        if old.size:  # keys of earlier chunks: their old offset and all but their last record here go
            at = slot[old]
            superseded = [cd[at] >> _S32]
            np.maximum.at(cd, at, packed[old])
            superseded.append(packed[old[cd[at] != packed[old]]] >> _S32)
            self._mark(np.concatenate(superseded))
        if new.size:
            at = self._insert(h[new], c[new], slot[new])
            np.maximum.at(cd, at, packed[new])
            self._mark(packed[new[cd[at] != packed[new]]] >> _S32)
        return n

    def _insert(self, h: np.ndarray, c: np.ndarray, slot: np.ndarray) -> np.ndarray:
        """Put the keys of records whose keys are not in the map, each at the empty slot its
        probe ended on (a key's records share it); returns each record's slot. When two
        keys end on one slot, the record whose index was written there last takes it for
        its key, and records of other keys probe again."""
        H, CD = self._t[:, 0], self._t[:, 1]
        final = slot.copy()
        pending = np.arange(h.size)
        while True:
            ids = np.arange(pending.size, dtype=U64)
            CD[slot] = ids
            winner = CD[slot].astype(I64)
            taken = np.flatnonzero(winner == ids.astype(I64))
            H[slot[taken]], CD[slot[taken]] = h[taken], c[taken]  # the delta goes in with the records
            self._n += taken.size
            lose = (h[winner] != h) | (c[winner] != c)  # not a record of the key that took the slot
            if not lose.any():
                return final
            pending, h, c = pending[lose], h[lose], c[lose]
            slot, found = self._probe(h, c, after=slot[lose])  # on along their sequences
            assert not found.any(), "a key not in the map cannot be found by probing on"
            final[pending] = slot

    def lookup(self, h: np.ndarray, c: np.ndarray) -> np.ndarray:
        """The latest offset of each key (int64), ``-1`` where the key is not in the map."""
        if not h.size:
            return np.empty(0, dtype=I64)
        slot, found = self._probe(h, c)
        return np.where(found, (self._t[slot, 1] >> _S32).astype(I64) + self.base, -1)

    def superseded_mask(self, first: int, count: int) -> np.ndarray:
        """Whether each offset ``first .. first+count-1`` (within the span) is superseded."""
        d0 = first - self.base
        bits = np.unpackbits(self._sup[d0 >> 3 : ((d0 + count - 1) >> 3) + 1], bitorder="little")
        return bits[(d0 & 7) : (d0 & 7) + count].view(bool)

    def superseded_at(self, offsets: np.ndarray) -> np.ndarray:
        """Whether each offset (within the span) is superseded."""
        d = offsets - self.base
        superseded: np.ndarray = (self._sup[d >> 3] >> (d & 7).astype(np.uint8) & 1).astype(bool)
        return superseded

    # -- by key (lists of bytes) ----------------------------------------------------------
    def put_many(self, offsets: Sequence[int] | np.ndarray, keys: Sequence[bytes]) -> int:
        """Record ``offsets[i]`` (ascending) as the latest for ``keys[i]``; returns how many
        pairs went in (see :meth:`put_hashes`)."""
        if not len(keys):
            return 0
        h, c = hash_keys(keys)
        return self.put_hashes(np.asarray(offsets, dtype=I64), h, c)

    def latest_many(self, keys: Sequence[bytes | None]) -> list[int]:
        """The latest offset of each key, ``-1`` where the key is ``None`` or not in the map."""
        present = [i for i, k in enumerate(keys) if k is not None]
        out = np.full(len(keys), -1, dtype=I64)
        if present:
            h, c = hash_keys([keys[i] for i in present])  # type: ignore[misc]
            out[present] = self.lookup(h, c)
        return out.tolist()

    def put(self, key: bytes, offset: int) -> bool:
        """Record ``offset`` as the latest for ``key``; ``False`` (nothing stored) when the
        map is full and the key is new."""
        return self.put_many([offset], [key]) == 1

    def get(self, key: bytes) -> int | None:
        latest = self.latest_many([key])[0]
        return None if latest < 0 else latest

    def superseded(self, offset: int) -> bool:
        """Whether a later offset of the same key went into the map (``offset`` within the span)."""
        d = offset - self.base
        return bool(self._sup[d >> 3] >> (d & 7) & 1)

    def __len__(self) -> int:
        return self._n

    @property
    def memory_bytes(self) -> int:
        """Bytes the table and the bitmap take (allocated once: full or empty, the same)."""
        return int(self._t.nbytes + self._sup.nbytes)
