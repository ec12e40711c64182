"""The RocksDB index store: one database per data directory, ``<data_dir>/index/``.

Every key is fixed-width big-endian up to its variable tail, so byte order is
offset order (and time order in ``times`` and ``ttl``). A namespace gets a
``u32`` id when created (never reused), so a shard's entries share the 6-byte
prefix ``P = ns_id u32 | shard u16`` and a shard or a namespace is one
contiguous key range in every column family but ``ttl``.

The key and value formats of every column family are in
:mod:`storage_engine.segment.index_keys`; a shard's part of the store is
:class:`~storage_engine.segment.shard_index.ShardIndex`; bulk TTL loads are
:mod:`storage_engine.segment.ttl_ingest`.

The checkpoint says how far a shard is indexed. It is written in the same
WriteBatch as the entries it covers, so the two can never disagree; recovery
re-indexes whatever the data files hold beyond it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, cast

from rocksdict import Options, Rdict, ReadOptions, WriteBatch, WriteOptions

from storage_engine.lifecycle import TTLEntry
from storage_engine.segment.index_keys import (
    CF_CHECKPOINTS,
    CF_CLEANER,
    CF_CURSORS,
    CF_DEAD,
    CF_KEYS,
    CF_NAMESPACES,
    CF_OFFSETS,
    CF_RECORDS,
    CF_SEGMENTS,
    CF_TAGS,
    CF_TIMES,
    CF_TTL,
    INDEX_CFS,
    NEXT_NS_ID_KEY,
    NO_TTL_KEY_BELOW,
    NS_ID,
    OFFSET_KEYED_CFS,
    POSITION,
    SHARD_CFS,
    SHARD_PREFIX,
    TTL_KEY,
    TTL_VALUE_FORMAT,
    U64,
    end_of,
    shard_prefix,
    tag_key,
)
from storage_engine.segment.index_records import Checkpoint, NamespaceRecord
from storage_engine.segment.meta import SegmentMeta

log = logging.getLogger(__name__)


class IndexStore:
    """The RocksDB database of one data directory (raw bytes keys and values)."""

    def __init__(self, path: Path, extra_cfs: tuple[str, ...] = ()) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        opts = self._options()
        opts.create_if_missing(True)
        opts.create_missing_column_families(True)
        names = INDEX_CFS + extra_cfs
        self.db: Rdict | None = Rdict(str(path), opts, column_families={n: self._options() for n in names})
        self._cf = {n: self.db.get_column_family(n) for n in names}
        self._handles = {n: self.db.get_column_family_handle(n) for n in names}
        self._nosync = WriteOptions()
        self._ns_lock = threading.Lock()
        # Where the next TTL scan of a namespace may start (see ttl_start): a scan leaves the
        # entries it deleted as tombstones until RocksDB compacts them, and an iterator skips
        # them one by one in a single call that holds the GIL (~0.1-0.25 µs each: a scan
        # after one that deleted a million entries would stall every thread for 100+ ms).
        self._ttl_lock = threading.Lock()
        self._ttl_resume: dict[int, bytes] = {}  # ns_id → no entry of it below this key is left
        self._ttl_low: dict[int, bytes] = {}  # ns_id → smallest key written since a scan began
        self._ttl_taken: dict[int, bytes] = {}  # the same, as the scan running now took it
        self._ttl_pending: dict[int, tuple[int, bytes]] = {}  # id(WriteBatch) → (ns_id, its smallest ttl key)

    @staticmethod
    def _options() -> Options:
        opts = Options(raw_mode=True)
        opts.set_max_background_jobs(2)
        opts.set_keep_log_file_num(2)
        return opts

    # -- writing ------------------------------------------------------------------
    def batch(self) -> WriteBatch:
        wb = WriteBatch(raw_mode=True)
        if self._ttl_pending:
            self._ttl_pending.pop(id(wb), None)  # left by a batch that was never written
        return wb

    def handle(self, cf: str) -> Any:
        return self._handles[cf]

    def write(self, wb: WriteBatch, sync: bool = False) -> None:
        """Apply a WriteBatch atomically. ``sync`` also fsyncs RocksDB's WAL before returning:
        with ``flush_wal``, which lets other threads run meanwhile (a write with the ``sync``
        option holds the GIL through the fsync: a lifecycle step sealing a segment would
        stall every append for milliseconds)."""
        assert self.db is not None
        pending = self._ttl_pending.pop(id(wb), None) if self._ttl_pending else None
        if not wb.is_empty():
            self.db.write(wb, self._nosync)
            if sync:
                self.db.flush_wal(True)
        if pending is not None:
            self.ttl_written(*pending)

    def sync_wal(self) -> None:
        """fsync RocksDB's write-ahead log (the ``rocksdb`` adapter's durability point)."""
        assert self.db is not None
        self.db.flush_wal(True)

    def put_segment(self, wb: WriteBatch, prefix: bytes, meta: SegmentMeta) -> None:
        wb.put(prefix + U64.pack(meta.base_offset), meta.pack(), self._handles[CF_SEGMENTS])

    def delete_segment(self, wb: WriteBatch, prefix: bytes, base_offset: int) -> None:
        wb.delete(prefix + U64.pack(base_offset), self._handles[CF_SEGMENTS])

    def put_checkpoint(self, wb: WriteBatch, prefix: bytes, checkpoint: Checkpoint) -> None:
        wb.put(prefix, checkpoint.pack(), self._handles[CF_CHECKPOINTS])

    def drop_prefix(self, wb: WriteBatch, prefix: bytes, families: tuple[str, ...] = SHARD_CFS) -> None:
        """Range-delete the entries of a shard (6-byte prefix) or namespace (4-byte) in ``families``
        (default: all but ``ttl``, whose keys lead with the deadline; see :meth:`drop_ttl`)."""
        end = end_of(prefix)
        for name in families:
            if name in self._handles:
                wb.delete_range(prefix, end, self._handles[name])

    def drop_ttl(self, wb: WriteBatch, ns_id: int, shard: int | None = None) -> int:
        """Delete the ttl entries of a namespace (or one shard). Walks the whole family:
        ttl keys lead with the deadline, not the shard. Only used on rare paths."""
        assert self.db is not None
        handle = self._handles[CF_TTL]
        dropped = 0
        for key in self._keys(CF_TTL):
            _, ns, sh, _ = TTL_KEY.unpack(key)
            if ns == ns_id and (shard is None or sh == shard):
                wb.delete(key, handle)
                dropped += 1
        return dropped

    def drop_namespace_entries(self, wb: WriteBatch, ns_id: int) -> None:
        """Every entry of a namespace, records included (``delete_namespace``)."""
        self.drop_prefix(wb, NS_ID.pack(ns_id))
        self.drop_ttl(wb, ns_id)

    # -- subscription cursors (``cursors`` family) ----------------------------------------
    def put_cursors(self, wb: WriteBatch, ns_id: int, name: str, raw: bytes) -> None:
        wb.put(NS_ID.pack(ns_id) + name.encode(), raw, self._handles[CF_CURSORS])

    def delete_cursors(self, wb: WriteBatch, ns_id: int, name: str) -> None:
        wb.delete(NS_ID.pack(ns_id) + name.encode(), self._handles[CF_CURSORS])

    def drop_cursors(self, wb: WriteBatch, ns_id: int) -> None:
        """Every subscription of a namespace (``delete_namespace``)."""
        prefix = NS_ID.pack(ns_id)
        wb.delete_range(prefix, end_of(prefix), self._handles[CF_CURSORS])

    def all_cursors(self) -> list[tuple[int, str, bytes]]:
        """(ns_id, subscription name, value) of every persisted subscription."""
        return [(NS_ID.unpack_from(k)[0], k[4:].decode(), v) for k, v in self._range(CF_CURSORS, b"", b"\xff" * 5)]

    def compact_namespace(self, ns_id: int) -> None:
        self.compact_prefix(NS_ID.pack(ns_id))

    def shard_ids(self) -> list[tuple[int, int]]:
        """(ns_id, shard) of every shard with a checkpoint."""
        return [SHARD_PREFIX.unpack(k) for k in self._keys(CF_CHECKPOINTS)]

    def compact_prefix(self, prefix: bytes) -> None:
        """Ask RocksDB to drop range-deleted entries now rather than eventually."""
        end = end_of(prefix)
        for name in SHARD_CFS:
            if name in self._cf:
                self._cf[name].compact_range(prefix, end)
        self._cf[CF_TTL].compact_range(None, None)

    # -- namespaces ----------------------------------------------------------------
    def namespaces(self) -> list[NamespaceRecord]:
        # Names are printable ASCII; the counter key starts with NUL and sorts first.
        return [NamespaceRecord.unpack(k.decode(), v) for k, v in self._range(CF_NAMESPACES, b"\x01", b"\x7f")]

    def allocate_namespace_id(self) -> int:
        """A fresh id, durable before use, so a deleted namespace's entries are never read by a new one."""
        with self._ns_lock:
            raw = self._cf[CF_NAMESPACES].get(NEXT_NS_ID_KEY)
            ns_id = NS_ID.unpack(raw)[0] if raw is not None else 1
            wb = self.batch()
            wb.put(NEXT_NS_ID_KEY, NS_ID.pack(ns_id + 1), self._handles[CF_NAMESPACES])
            self.write(wb, sync=True)
        with self._ttl_lock:  # no TTL entry yet: a scan need not walk anything for it
            self._ttl_resume[ns_id] = NO_TTL_KEY_BELOW
        return ns_id

    def put_namespace(self, wb: WriteBatch, record: NamespaceRecord) -> None:
        wb.put(record.name.encode(), record.pack(), self._handles[CF_NAMESPACES])

    def delete_namespace(self, wb: WriteBatch, name: str) -> None:
        wb.delete(name.encode(), self._handles[CF_NAMESPACES])

    # -- reading -------------------------------------------------------------------
    def segments(self, prefix: bytes) -> list[SegmentMeta]:
        return [SegmentMeta.unpack(v) for _, v in self._range(CF_SEGMENTS, prefix, end_of(prefix))]

    def checkpoint(self, prefix: bytes) -> Checkpoint | None:
        raw = self._cf[CF_CHECKPOINTS].get(prefix)
        return None if raw is None else Checkpoint.unpack(raw)

    def floor_offset(self, prefix: bytes, offset: int) -> tuple[int, int, int] | None:
        """The last sparse entry at or below ``offset``: (batch base offset, segment base, position)."""
        it = self._cf[CF_OFFSETS].iter()
        it.seek_for_prev(prefix + U64.pack(offset))
        if not it.valid():
            return None
        key = it.key()
        if not key.startswith(prefix):
            return None
        seg, pos = POSITION.unpack(it.value())
        return U64.unpack_from(key, 6)[0], seg, pos

    def floor_time(self, prefix: bytes, below: int) -> int | None:
        """The offset of the last ``times`` entry with max_timestamp < ``below``: every record at
        or before it is older than ``below``."""
        if below <= 0:
            return None
        it = self._cf[CF_TIMES].iter()
        it.seek_for_prev(prefix + U64.pack(below - 1))
        if not it.valid() or not it.key().startswith(prefix):
            return None
        return int(U64.unpack(it.value())[0])

    def time_entries(self, prefix: bytes) -> list[tuple[int, int]]:
        """Every ``times`` entry of a shard as (max_timestamp, offset); for tests and tools."""
        return [(U64.unpack_from(k, 6)[0], U64.unpack(v)[0]) for k, v in self._range(CF_TIMES, prefix, end_of(prefix))]

    def offset_entries(self, prefix: bytes) -> list[tuple[int, int, int]]:
        """Every ``offsets`` entry of a shard as (offset, segment base, position); for tests and tools."""
        return [
            (U64.unpack_from(k, 6)[0], *POSITION.unpack(v)) for k, v in self._range(CF_OFFSETS, prefix, end_of(prefix))
        ]

    def offset_entries_in(self, prefix: bytes, start: int, end: int) -> list[tuple[int, int]]:
        """The ``offsets`` entries of a shard in ``[start, end)`` as (offset, position) (a segment's
        sparse index, for its manifest)."""
        return [
            (U64.unpack_from(k, 6)[0], POSITION.unpack(v)[1])
            for k, v in self._range(CF_OFFSETS, prefix + U64.pack(start), prefix + U64.pack(end))
        ]

    def time_entries_in(self, prefix: bytes, first: int, last: int, min_timestamp: int) -> list[tuple[int, int]]:
        """The ``times`` entries of a shard pointing at offsets ``first..last`` as (max_timestamp,
        offset). Keys are running maxima, so every such entry's key is at least the smallest
        timestamp in that range (``min_timestamp``): the walk starts there and stops past ``last``."""
        out: list[tuple[int, int]] = []
        for k, v in self._range(CF_TIMES, prefix + U64.pack(max(0, min_timestamp)), end_of(prefix)):
            offset = U64.unpack(v)[0]
            if offset > last:
                break
            if offset >= first:
                out.append((U64.unpack_from(k, 6)[0], offset))
        return out

    def get_key(self, prefix: bytes, key: bytes) -> int | None:
        raw = self._cf[CF_KEYS].get(prefix + key)
        return None if raw is None else int(U64.unpack(raw)[0])

    def key_entries(self, prefix: bytes) -> Iterator[tuple[bytes, int]]:
        for k, v in self._range(CF_KEYS, prefix, end_of(prefix)):
            yield k[6:], U64.unpack(v)[0]

    def tag_offsets(self, prefix: bytes, tag: str, start: int, end: int, limit: int) -> list[int]:
        """Offsets in ``[start, end)`` carrying ``tag``, ascending, at most ``limit``."""
        raw = tag.encode()
        if not raw or len(raw) > 255:
            return []
        tag_prefix = prefix + bytes((len(raw),)) + raw
        out: list[int] = []
        for key, _ in self._range(CF_TAGS, tag_prefix + U64.pack(start), tag_prefix + U64.pack(end)):
            out.append(U64.unpack_from(key, len(tag_prefix))[0])
            if len(out) >= limit:
                break
        return out

    def tag_entries(self, prefix: bytes) -> Iterator[tuple[str, int]]:
        for k, _ in self._range(CF_TAGS, prefix, end_of(prefix)):
            n = k[6]
            yield k[7 : 7 + n].decode(), U64.unpack_from(k, 7 + n)[0]

    def ttl_entries(self) -> Iterator[tuple[int, int, int, int]]:
        """(expire_at, ns_id, shard, offset) in deadline order."""
        for k in self._keys(CF_TTL):
            yield TTL_KEY.unpack(k)

    def dangling_entries(self, prefix: bytes, end_offset: int) -> list[str]:
        """Index entries of a shard that point at or past ``end_offset`` (a consistency check:
        after recovery there must be none)."""
        ns_id, shard = SHARD_PREFIX.unpack(prefix)
        found = [f"offsets:{o}" for o, _, _ in self.offset_entries(prefix) if o >= end_offset]
        found += [f"times:{t}->{o}" for t, o in self.time_entries(prefix) if o >= end_offset]
        found += [f"keys:{k!r}->{o}" for k, o in self.key_entries(prefix) if o >= end_offset]
        found += [f"tags:{t}->{o}" for t, o in self.tag_entries(prefix) if o >= end_offset]
        found += [f"ttl:{e}->{o}" for e, n, s, o in self.ttl_entries() if (n, s) == (ns_id, shard) and o >= end_offset]
        found += [f"dead:{o}" for o in self.dead_offsets(prefix, end_offset)]
        checkpoint = self.checkpoint(prefix)
        if checkpoint is not None and checkpoint.next_offset > end_offset:
            found.append(f"checkpoint:{checkpoint.next_offset}")
        return found

    def ttl_due(self, now: int, start: bytes = b"") -> Iterator[tuple[int, int, int, int, int, int]]:
        """TTL entries with ``expire_at ≤ now`` from ``start`` (default: the start of the index), in
        deadline order: (expire_at, ns_id, shard, offset, size, flags); flags −1 for an entry
        without them. The iterator's upper bound stops it at the first later entry."""
        for k, v in self._range(CF_TTL, start, U64.pack(now + 1)):
            expire_at, ns, sh, offset = TTL_KEY.unpack(k)
            if len(v) == TTL_VALUE_FORMAT.size:
                size, flags = TTL_VALUE_FORMAT.unpack(v)
            else:
                size, flags = 0, -1
            yield expire_at, ns, sh, offset, size, flags

    def ttl_candidates(
        self, now: int, names: dict[int, str], wanted: int | None, shard: int | None, scanned: list[int]
    ) -> Iterator[TTLEntry]:
        """The TTL scan's walk: due entries (``expire_at ≤ now``) of namespace ``wanted`` (every one
        in ``names``, ns_id → name, for ``None``), of one ``shard`` or all, in index order, from
        where a scan of them may start (:meth:`ttl_start`); ``scanned[0]`` counts entries looked at.
        One generator, one tuple per entry: this is the scan's hot loop."""
        start = self.ttl_start(names if wanted is None else (wanted,))
        unpack_key, unpack_value, value_size = TTL_KEY.unpack, TTL_VALUE_FORMAT.unpack, TTL_VALUE_FORMAT.size
        for k, v in self._range(CF_TTL, start, U64.pack(now + 1)):
            scanned[0] += 1
            expire_at, n, sh, offset = unpack_key(k)
            if (n == wanted or (wanted is None and n in names)) and (shard is None or sh == shard):
                size, flags = unpack_value(v) if len(v) == value_size else (0, -1)
                yield TTLEntry(sh, offset, expire_at, size, flags, names[n], k)

    # -- where a TTL scan starts -------------------------------------------------------------
    # Invariant: for every ns_id in _ttl_resume, every entry of the namespace with a key below
    # min(_ttl_resume[ns], _ttl_low[ns], _ttl_taken[ns]) is gone. A scan moves _ttl_low to
    # _ttl_taken when it begins (entries written before are in its iterator, which starts at or
    # below them), and when it ends sets _ttl_resume to where it stopped and forgets what it
    # took; entries written meanwhile lower _ttl_low again, after their write, so a scan that
    # missed them leaves them to the next.
    def ttl_start(self, ns_ids: Iterable[int]) -> bytes:
        """A key no due entry of these namespaces lies below (``b""``: the start)."""
        start: bytes | None = None
        with self._ttl_lock:
            for ns in ns_ids:
                at = self._ttl_resume.get(ns)
                if at is None:
                    return b""
                for low in (self._ttl_low.get(ns), self._ttl_taken.get(ns)):
                    if low is not None and low < at:
                        at = low
                if start is None or at < start:
                    start = at
        return start or b""

    def ttl_written(self, ns_id: int, key: bytes) -> None:
        """An entry with ``key`` (or a key at or above it) was written for the namespace."""
        with self._ttl_lock:
            low = self._ttl_low.get(ns_id)
            if low is None or key < low:
                self._ttl_low[ns_id] = key

    def ttl_pending(self, wb: WriteBatch, ns_id: int, key: bytes) -> None:
        """``wb`` puts a TTL entry with ``key``: :meth:`write` notes it once the batch is written."""
        pending = self._ttl_pending.get(id(wb))
        if pending is None or key < pending[1]:
            self._ttl_pending[id(wb)] = (ns_id, key)

    def ttl_scan_begin(self, ns_ids: Iterable[int]) -> dict[int, bytes | None]:
        """A scan of every shard of these namespaces begins (one at a time: the lifecycle lock):
        what was written before is its to see."""
        with self._ttl_lock:
            begun: dict[int, bytes | None] = {}
            for ns in ns_ids:
                low = begun[ns] = self._ttl_low.pop(ns, None)
                if low is not None:
                    self._ttl_taken[ns] = low
            return begun

    def ttl_scan_end(self, begun: dict[int, bytes | None], stop: bytes | None) -> None:
        """The scan ``begun`` stopped at ``stop`` (every due entry of its namespaces below it is
        gone); ``None``: it failed, and what it took at its start is put back."""
        with self._ttl_lock:
            for ns, low in begun.items():
                self._ttl_taken.pop(ns, None)
                if stop is not None:
                    self._ttl_resume[ns] = stop
                elif low is not None and (ns not in self._ttl_low or low < self._ttl_low[ns]):
                    self._ttl_low[ns] = low

    def ttl_entries_of(self, ns_id: int, shard: int) -> list[tuple[int, int]]:
        """(expire_at, offset) of one shard's TTL entries; walks the family (verify, recovery)."""
        return [(e, o) for e, n, s, o in self.ttl_entries() if n == ns_id and s == shard]

    def dead_offsets(self, prefix: bytes, start: int = 0, end: int = 1 << 63) -> list[int]:
        return [
            U64.unpack_from(k, 6)[0] for k, _ in self._range(CF_DEAD, prefix + U64.pack(start), prefix + U64.pack(end))
        ]

    def dead_deadlines(self, prefix: bytes) -> dict[int, int]:
        """Offset → deadline of the dead marks that record one (a bulk-loaded TTL entry killed the record)."""
        return {
            U64.unpack_from(k, 6)[0]: U64.unpack(v)[0]
            for k, v in self._range(CF_DEAD, prefix, end_of(prefix))
            if len(v) == U64.size
        }

    def is_dead(self, prefix: bytes, offset: int) -> bool:
        return self._cf[CF_DEAD].get(prefix + U64.pack(offset)) is not None

    def cleaner_checkpoint(self, prefix: bytes) -> bytes | None:
        """A shard's cleaner checkpoint (key compaction), or ``None`` before the first clean."""
        raw = self._cf[CF_CLEANER].get(prefix)
        return None if raw is None else bytes(raw)

    def put_cleaner_checkpoint(self, wb: WriteBatch, prefix: bytes, raw: bytes) -> None:
        wb.put(prefix, raw, self._handles[CF_CLEANER])

    def has_ttl(self, ns_id: int, shard: int, offset: int, expire_at: int) -> bool:
        return self._cf[CF_TTL].get(TTL_KEY.pack(expire_at, ns_id, shard, offset)) is not None

    def drop_offset_range(self, wb: WriteBatch, prefix: bytes, start: int, end: int) -> None:
        """Range-delete ``[start, end)`` in every family keyed by offset (a segment's sparse
        offsets, records and dead marks)."""
        lo, hi = prefix + U64.pack(start), prefix + U64.pack(end)
        for name in OFFSET_KEYED_CFS:
            if name in self._handles:
                wb.delete_range(lo, hi, self._handles[name])

    def drop_times_below(self, wb: WriteBatch, prefix: bytes, start: int, max_timestamp: int) -> None:
        """Range-delete the ``times`` entries pointing below ``start`` (a new log start).

        Keys (running maximum timestamps) and values (offsets) rise together, so
        those entries are a key prefix: seek past ``max_timestamp`` (the largest
        timestamp below ``start``) and step forward to the first entry at or after
        ``start``; everything before it goes. An entry at ``start`` or later may
        go too when its key is ≤ ``max_timestamp``; that only makes a time lookup
        start a little earlier (the index is a hint).
        """
        it = self._cf[CF_TIMES].iter()
        it.seek(prefix + U64.pack(max(0, max_timestamp + 1)))
        end = end_of(prefix)
        while it.valid() and it.key().startswith(prefix) and U64.unpack(it.value())[0] < start:
            it.next()
        if it.valid() and it.key().startswith(prefix):
            end = it.key()
        wb.delete_range(prefix, end, self._handles[CF_TIMES])

    def sweep_below(self, wb: WriteBatch, ns_id: int, shard: int, start: int, keep: set[int] | None = None) -> int:
        """Delete key, tag and TTL entries pointing below ``start`` (or, with ``keep``, at
        offsets not in it): crash recovery of an interrupted segment deletion. Walks the
        shard's entries: a rare path."""
        prefix = shard_prefix(ns_id, shard)
        gone = 0

        def stale(offset: int) -> bool:
            return offset < start or (keep is not None and offset not in keep)

        for key, offset in list(self.key_entries(prefix)):
            if stale(offset):
                wb.delete(prefix + key, self._handles[CF_KEYS])
                gone += 1
        for tag, offset in list(self.tag_entries(prefix)):
            if stale(offset):
                wb.delete(tag_key(prefix, tag, offset), self._handles[CF_TAGS])
                gone += 1
        for expire_at, offset in self.ttl_entries_of(ns_id, shard):
            if stale(offset):
                wb.delete(TTL_KEY.pack(expire_at, ns_id, shard, offset), self._handles[CF_TTL])
                gone += 1
        return gone

    def compact_ranges(self, prefix: bytes, ttl_upto: int | None) -> None:
        """Ask RocksDB to drop a shard's deleted entries now (after reclamation), and the
        TTL family's expired region."""
        end = end_of(prefix)
        for name in (CF_OFFSETS, CF_TIMES, CF_KEYS, CF_TAGS, CF_RECORDS, CF_DEAD):
            if name in self._cf:
                self._cf[name].compact_range(prefix, end)
        if ttl_upto is not None:
            self._cf[CF_TTL].compact_range(None, U64.pack(ttl_upto + 1))

    def records(self, prefix: bytes, start: int, end: int) -> Iterator[tuple[int, bytes]]:
        """(offset, value) from the ``records`` family in ``[start, end)``."""
        for k, v in self._range(CF_RECORDS, prefix + U64.pack(start), prefix + U64.pack(end)):
            yield U64.unpack_from(k, 6)[0], v

    def _keys(self, cf: str) -> Iterator[bytes]:
        return cast(Iterator[bytes], self._cf[cf].keys())

    def _range(self, cf: str, start: bytes, end: bytes) -> Iterator[tuple[bytes, bytes]]:
        # A generator, so the ReadOptions holding the upper bound lives as long as
        # the iterator that points into it.
        ro = ReadOptions()
        ro.set_iterate_upper_bound(end)
        yield from cast(Iterable[tuple[bytes, bytes]], self._cf[cf].items(from_key=start, read_opt=ro))

    # -- lifecycle -----------------------------------------------------------------
    def close(self) -> None:
        """Flush memtables and the WAL, then close. RocksDB only closes once every
        handle to the database is gone, so drop ours first."""
        if self.db is None:
            return
        db = self.db
        db.flush(True)
        db.flush_wal(True)
        self._cf.clear()
        self._handles.clear()
        self.db = None
        db.close()
