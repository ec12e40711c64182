"""The RocksDB index store: one database per data directory, ``<data_dir>/index/``.

Every key is fixed-width big-endian up to its variable tail, so byte order is
offset order (and time order in ``times`` and ``ttl``). A namespace gets a
``u32`` id when created (never reused), so a shard's entries share the 6-byte
prefix ``P = ns_id u32 | shard u16`` and a shard or a namespace is one
contiguous key range in every column family but ``ttl``.

Column families (key → value)::

    offsets      P | offset u64                      → segment_base u64 | position u64
                 sparse: the first batch of a segment, then a batch every
                 index_interval_bytes; the offset is the batch's base offset
    times        P | max_timestamp u64               → offset u64
                 sparse; "every record at or below offset has a timestamp
                 ≤ max_timestamp" (running maximum, so keys rise with offsets)
    keys         P | key bytes                       → offset u64 (latest record with the key)
    tags         P | len u8 | tag UTF-8 | offset u64 → b""
    ttl          expire_at u64 | ns_id u32 | shard u16 | offset u64 → size u32 | flags u8
                 records with an explicit expire_at, in deadline order; the value
                 is the record's encoded size and EXPIRE_HAS_KEY/EXPIRE_HAS_TAGS,
                 so the TTL scan reads only records whose key or tags it must
                 unindex (an empty value, from before, means "read it"); entries may
                 also be bulk-loaded from an SST file (:func:`ingest_ttl_file`, the
                 ``ttl-backfill`` Spark job), validated key by key first
    dead         P | offset u64                      → b"" or deadline u64
                 records the TTL scan (or a read check) marked dead: expired,
                 index entries gone, bytes not yet reclaimed. The value is the
                 deadline when a bulk-loaded TTL entry killed a record whose own
                 fields carry none (verify reads it; reads skip dead records)
    segments     P | base_offset u64                 → SegmentMeta.pack()
    checkpoints  P                                   → Checkpoint.pack()
    namespaces   name UTF-8                          → JSON {id, shards, policy, created_at}
                 b"\\x00next_id"                      → u32 (next namespace id)
    records      P | offset u64                      → one encoded record (``rocksdb`` adapter only)

The checkpoint says how far a shard is indexed. It is written in the same
WriteBatch as the entries it covers, so the two can never disagree; recovery
re-indexes whatever the data files hold beyond it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import struct
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, cast

from rocksdict import IngestExternalFileOptions, Options, Rdict, ReadOptions, SstFileWriter, WriteBatch, WriteOptions

from storage_engine.errors import InvalidArgumentError
from storage_engine.lifecycle import TTLEntry
from storage_engine.policy import NamespacePolicy, namespace_policy_recovered
from storage_engine.segment.meta import SegmentMeta

log = logging.getLogger(__name__)

_PREFIX = struct.Struct(">IH")
_NS = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_POS = struct.Struct(">QQ")
_TTL = struct.Struct(">QIHQ")
_TTL_VALUE = struct.Struct(">IB")
_CHECKPOINT = struct.Struct(">BQQQqqQ")
_NEXT_NS_ID = b"\x00next_id"
_NO_TTL_KEY_BELOW = b"\xff" * _TTL.size  # a TTL scan's start for a namespace without entries

CF_OFFSETS = "offsets"
CF_TIMES = "times"
CF_KEYS = "keys"
CF_TAGS = "tags"
CF_TTL = "ttl"
CF_SEGMENTS = "segments"
CF_CHECKPOINTS = "checkpoints"
CF_NAMESPACES = "namespaces"
CF_RECORDS = "records"
CF_DEAD = "dead"
CF_CURSORS = "cursors"  # ns_id u32 | subscription name UTF-8 → JSON {created_at, cursors}
INDEX_CFS = (
    CF_OFFSETS,
    CF_TIMES,
    CF_KEYS,
    CF_TAGS,
    CF_TTL,
    CF_SEGMENTS,
    CF_CHECKPOINTS,
    CF_NAMESPACES,
    CF_DEAD,
    CF_CURSORS,
)
# Families whose keys start with the shard prefix (everything but ttl and namespaces).
_SHARD_CFS = (CF_OFFSETS, CF_TIMES, CF_KEYS, CF_TAGS, CF_SEGMENTS, CF_CHECKPOINTS, CF_RECORDS, CF_DEAD)
# What re-indexing a shard rebuilds: everything derived from the data, never the data itself.
# Dead marks go too: re-indexing gives expired records their TTL entries back, and the
# next scan marks them dead again.
INDEX_ONLY_CFS = (CF_OFFSETS, CF_TIMES, CF_KEYS, CF_TAGS, CF_SEGMENTS, CF_CHECKPOINTS, CF_DEAD)
# Families keyed P | offset, where a segment's entries are one key range.
OFFSET_KEYED_CFS = (CF_OFFSETS, CF_RECORDS, CF_DEAD)
# Key compaction's per-shard cleaner checkpoint: P → storage_engine.compaction.CleanerState.pack()
# (first dirty offset and cleaning passes). Kept when a shard is re-indexed (offsets never change).
CF_CLEANER = "cleaner"
INDEX_CFS += (CF_CLEANER,)  # type: ignore[assignment]
_SHARD_CFS += (CF_CLEANER,)  # type: ignore[assignment]


def shard_prefix(ns_id: int, shard: int) -> bytes:
    return _PREFIX.pack(ns_id, shard)


def tag_key(prefix: bytes, tag: str, offset: int) -> bytes:
    raw = tag.encode()
    return prefix + bytes((len(raw),)) + raw + _U64.pack(offset)


def ttl_key(expire_at: int, ns_id: int, shard: int, offset: int) -> bytes:
    return _TTL.pack(expire_at, ns_id, shard, offset)


def ttl_value(size: int, flags: int) -> bytes:
    return _TTL_VALUE.pack(min(size, 0xFFFFFFFF), flags)


def ttl_bound(expire_at: int) -> bytes:
    """A key at or below every TTL-index key with this ``expire_at`` (and above every earlier one)."""
    return _U64.pack(expire_at)


def deadline_value(expire_at: int) -> bytes:
    """The value of a dead mark left by a bulk-loaded TTL entry: its deadline (plain marks are empty)."""
    return _U64.pack(expire_at)


def offset_key(prefix: bytes, offset: int) -> bytes:
    return prefix + _U64.pack(offset)


def _end_of(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix``."""
    as_int = int.from_bytes(prefix, "big") + 1
    return as_int.to_bytes(len(prefix), "big")


@dataclass(slots=True)
class Checkpoint:
    """How far a shard is indexed, and the sparse-index state to continue from.

    Value layout (49 bytes): version u8, next_offset u64 (every offset below is
    indexed), segment_base u64 and position u64 (end of the last indexed batch
    in that segment file), max_timestamp i64 (running maximum, −1 none),
    time_entry_timestamp i64 (of the last ``times`` entry, −1 none),
    bytes_since_entry u64 (since the last ``offsets`` entry).
    """

    next_offset: int = 0
    segment_base: int = 0
    position: int = 0
    max_timestamp: int = -1
    time_entry_timestamp: int = -1
    bytes_since_entry: int = 0

    def pack(self) -> bytes:
        return _CHECKPOINT.pack(
            1,
            self.next_offset,
            self.segment_base,
            self.position,
            self.max_timestamp,
            self.time_entry_timestamp,
            self.bytes_since_entry,
        )

    @classmethod
    def unpack(cls, raw: bytes) -> Checkpoint:
        version, *values = _CHECKPOINT.unpack(raw)
        if version != 1:
            raise ValueError(f"unsupported checkpoint version {version}")
        return cls(*values)

    def copy(self) -> Checkpoint:
        return Checkpoint(*(getattr(self, f.name) for f in fields(self)))


@dataclass(frozen=True, slots=True)
class NamespaceRecord:
    name: str
    ns_id: int
    shards: int
    policy: NamespacePolicy
    created_at: int

    def pack(self) -> bytes:
        body = {"id": self.ns_id, "shards": self.shards, "policy": self.policy.to_dict(), "created_at": self.created_at}
        return json.dumps(body, sort_keys=True).encode()

    @classmethod
    def unpack(cls, name: str, raw: bytes) -> NamespaceRecord:
        body = json.loads(raw)
        policy, reset = namespace_policy_recovered(body["policy"])
        if reset:
            log.warning("namespace %s: stored policy fields %s break a rule; using their defaults", name, reset)
        return cls(name, body["id"], body["shards"], policy, body["created_at"])


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
        wb.put(prefix + _U64.pack(meta.base_offset), meta.pack(), self._handles[CF_SEGMENTS])

    def delete_segment(self, wb: WriteBatch, prefix: bytes, base_offset: int) -> None:
        wb.delete(prefix + _U64.pack(base_offset), self._handles[CF_SEGMENTS])

    def put_checkpoint(self, wb: WriteBatch, prefix: bytes, checkpoint: Checkpoint) -> None:
        wb.put(prefix, checkpoint.pack(), self._handles[CF_CHECKPOINTS])

    def drop_prefix(self, wb: WriteBatch, prefix: bytes, families: tuple[str, ...] = _SHARD_CFS) -> None:
        """Range-delete the entries of a shard (6-byte prefix) or namespace (4-byte) in ``families``
        (default: all but ``ttl``, whose keys lead with the deadline; see :meth:`drop_ttl`)."""
        end = _end_of(prefix)
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
            _, ns, sh, _ = _TTL.unpack(key)
            if ns == ns_id and (shard is None or sh == shard):
                wb.delete(key, handle)
                dropped += 1
        return dropped

    def drop_namespace_entries(self, wb: WriteBatch, ns_id: int) -> None:
        """Every entry of a namespace, records included (``delete_namespace``)."""
        self.drop_prefix(wb, _NS.pack(ns_id))
        self.drop_ttl(wb, ns_id)

    # -- subscription cursors (``cursors`` family) ----------------------------------------
    def put_cursors(self, wb: WriteBatch, ns_id: int, name: str, raw: bytes) -> None:
        wb.put(_NS.pack(ns_id) + name.encode(), raw, self._handles[CF_CURSORS])

    def delete_cursors(self, wb: WriteBatch, ns_id: int, name: str) -> None:
        wb.delete(_NS.pack(ns_id) + name.encode(), self._handles[CF_CURSORS])

    def drop_cursors(self, wb: WriteBatch, ns_id: int) -> None:
        """Every subscription of a namespace (``delete_namespace``)."""
        prefix = _NS.pack(ns_id)
        wb.delete_range(prefix, _end_of(prefix), self._handles[CF_CURSORS])

    def all_cursors(self) -> list[tuple[int, str, bytes]]:
        """(ns_id, subscription name, value) of every persisted subscription."""
        return [(_NS.unpack_from(k)[0], k[4:].decode(), v) for k, v in self._range(CF_CURSORS, b"", b"\xff" * 5)]

    def compact_namespace(self, ns_id: int) -> None:
        self.compact_prefix(_NS.pack(ns_id))

    def shard_ids(self) -> list[tuple[int, int]]:
        """(ns_id, shard) of every shard with a checkpoint."""
        return [_PREFIX.unpack(k) for k in self._keys(CF_CHECKPOINTS)]

    def compact_prefix(self, prefix: bytes) -> None:
        """Ask RocksDB to drop range-deleted entries now rather than eventually."""
        end = _end_of(prefix)
        for name in _SHARD_CFS:
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
            raw = self._cf[CF_NAMESPACES].get(_NEXT_NS_ID)
            ns_id = _NS.unpack(raw)[0] if raw is not None else 1
            wb = self.batch()
            wb.put(_NEXT_NS_ID, _NS.pack(ns_id + 1), self._handles[CF_NAMESPACES])
            self.write(wb, sync=True)
        with self._ttl_lock:  # no TTL entry yet: a scan need not walk anything for it
            self._ttl_resume[ns_id] = _NO_TTL_KEY_BELOW
        return ns_id

    def put_namespace(self, wb: WriteBatch, record: NamespaceRecord) -> None:
        wb.put(record.name.encode(), record.pack(), self._handles[CF_NAMESPACES])

    def delete_namespace(self, wb: WriteBatch, name: str) -> None:
        wb.delete(name.encode(), self._handles[CF_NAMESPACES])

    # -- reading -------------------------------------------------------------------
    def segments(self, prefix: bytes) -> list[SegmentMeta]:
        return [SegmentMeta.unpack(v) for _, v in self._range(CF_SEGMENTS, prefix, _end_of(prefix))]

    def checkpoint(self, prefix: bytes) -> Checkpoint | None:
        raw = self._cf[CF_CHECKPOINTS].get(prefix)
        return None if raw is None else Checkpoint.unpack(raw)

    def floor_offset(self, prefix: bytes, offset: int) -> tuple[int, int, int] | None:
        """The last sparse entry at or below ``offset``: (batch base offset, segment base, position)."""
        it = self._cf[CF_OFFSETS].iter()
        it.seek_for_prev(prefix + _U64.pack(offset))
        if not it.valid():
            return None
        key = it.key()
        if not key.startswith(prefix):
            return None
        seg, pos = _POS.unpack(it.value())
        return _U64.unpack_from(key, 6)[0], seg, pos

    def floor_time(self, prefix: bytes, below: int) -> int | None:
        """The offset of the last ``times`` entry with max_timestamp < ``below``: every record at
        or before it is older than ``below``."""
        if below <= 0:
            return None
        it = self._cf[CF_TIMES].iter()
        it.seek_for_prev(prefix + _U64.pack(below - 1))
        if not it.valid() or not it.key().startswith(prefix):
            return None
        return int(_U64.unpack(it.value())[0])

    def time_entries(self, prefix: bytes) -> list[tuple[int, int]]:
        """Every ``times`` entry of a shard as (max_timestamp, offset); for tests and tools."""
        return [
            (_U64.unpack_from(k, 6)[0], _U64.unpack(v)[0]) for k, v in self._range(CF_TIMES, prefix, _end_of(prefix))
        ]

    def offset_entries(self, prefix: bytes) -> list[tuple[int, int, int]]:
        """Every ``offsets`` entry of a shard as (offset, segment base, position); for tests and tools."""
        return [
            (_U64.unpack_from(k, 6)[0], *_POS.unpack(v)) for k, v in self._range(CF_OFFSETS, prefix, _end_of(prefix))
        ]

    def get_key(self, prefix: bytes, key: bytes) -> int | None:
        raw = self._cf[CF_KEYS].get(prefix + key)
        return None if raw is None else int(_U64.unpack(raw)[0])

    def key_entries(self, prefix: bytes) -> Iterator[tuple[bytes, int]]:
        for k, v in self._range(CF_KEYS, prefix, _end_of(prefix)):
            yield k[6:], _U64.unpack(v)[0]

    def tag_offsets(self, prefix: bytes, tag: str, start: int, end: int, limit: int) -> list[int]:
        """Offsets in ``[start, end)`` carrying ``tag``, ascending, at most ``limit``."""
        raw = tag.encode()
        if not raw or len(raw) > 255:
            return []
        tag_prefix = prefix + bytes((len(raw),)) + raw
        out: list[int] = []
        for key, _ in self._range(CF_TAGS, tag_prefix + _U64.pack(start), tag_prefix + _U64.pack(end)):
            out.append(_U64.unpack_from(key, len(tag_prefix))[0])
            if len(out) >= limit:
                break
        return out

    def tag_entries(self, prefix: bytes) -> Iterator[tuple[str, int]]:
        for k, _ in self._range(CF_TAGS, prefix, _end_of(prefix)):
            n = k[6]
            yield k[7 : 7 + n].decode(), _U64.unpack_from(k, 7 + n)[0]

    def ttl_entries(self) -> Iterator[tuple[int, int, int, int]]:
        """(expire_at, ns_id, shard, offset) in deadline order."""
        for k in self._keys(CF_TTL):
            yield _TTL.unpack(k)

    def dangling_entries(self, prefix: bytes, end_offset: int) -> list[str]:
        """Index entries of a shard that point at or past ``end_offset`` (a consistency check:
        after recovery there must be none)."""
        ns_id, shard = _PREFIX.unpack(prefix)
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
        for k, v in self._range(CF_TTL, start, _U64.pack(now + 1)):
            expire_at, ns, sh, offset = _TTL.unpack(k)
            if len(v) == _TTL_VALUE.size:
                size, flags = _TTL_VALUE.unpack(v)
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
        unpack_key, unpack_value, value_size = _TTL.unpack, _TTL_VALUE.unpack, _TTL_VALUE.size
        for k, v in self._range(CF_TTL, start, _U64.pack(now + 1)):
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
            _U64.unpack_from(k, 6)[0]
            for k, _ in self._range(CF_DEAD, prefix + _U64.pack(start), prefix + _U64.pack(end))
        ]

    def dead_deadlines(self, prefix: bytes) -> dict[int, int]:
        """Offset → deadline of the dead marks that record one (a bulk-loaded TTL entry killed the record)."""
        return {
            _U64.unpack_from(k, 6)[0]: _U64.unpack(v)[0]
            for k, v in self._range(CF_DEAD, prefix, _end_of(prefix))
            if len(v) == _U64.size
        }

    def is_dead(self, prefix: bytes, offset: int) -> bool:
        return self._cf[CF_DEAD].get(prefix + _U64.pack(offset)) is not None

    def cleaner_checkpoint(self, prefix: bytes) -> bytes | None:
        """A shard's cleaner checkpoint (key compaction), or ``None`` before the first clean."""
        raw = self._cf[CF_CLEANER].get(prefix)
        return None if raw is None else bytes(raw)

    def put_cleaner_checkpoint(self, wb: WriteBatch, prefix: bytes, raw: bytes) -> None:
        wb.put(prefix, raw, self._handles[CF_CLEANER])

    def has_ttl(self, ns_id: int, shard: int, offset: int, expire_at: int) -> bool:
        return self._cf[CF_TTL].get(_TTL.pack(expire_at, ns_id, shard, offset)) is not None

    def drop_offset_range(self, wb: WriteBatch, prefix: bytes, start: int, end: int) -> None:
        """Range-delete ``[start, end)`` in every family keyed by offset (a segment's sparse
        offsets, records and dead marks)."""
        lo, hi = prefix + _U64.pack(start), prefix + _U64.pack(end)
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
        it.seek(prefix + _U64.pack(max(0, max_timestamp + 1)))
        end = _end_of(prefix)
        while it.valid() and it.key().startswith(prefix) and _U64.unpack(it.value())[0] < start:
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
                wb.delete(_TTL.pack(expire_at, ns_id, shard, offset), self._handles[CF_TTL])
                gone += 1
        return gone

    def compact_ranges(self, prefix: bytes, ttl_upto: int | None) -> None:
        """Ask RocksDB to drop a shard's deleted entries now (after reclamation), and the
        TTL family's expired region."""
        end = _end_of(prefix)
        for name in (CF_OFFSETS, CF_TIMES, CF_KEYS, CF_TAGS, CF_RECORDS, CF_DEAD):
            if name in self._cf:
                self._cf[name].compact_range(prefix, end)
        if ttl_upto is not None:
            self._cf[CF_TTL].compact_range(None, _U64.pack(ttl_upto + 1))

    def records(self, prefix: bytes, start: int, end: int) -> Iterator[tuple[int, bytes]]:
        """(offset, value) from the ``records`` family in ``[start, end)``."""
        for k, v in self._range(CF_RECORDS, prefix + _U64.pack(start), prefix + _U64.pack(end)):
            yield _U64.unpack_from(k, 6)[0], v

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


class ShardIndex:
    """The index entries of one shard: writes them per batch and answers lookups.

    Both log adapters index through this class: the ``segment`` adapter passes
    file positions (so it also gets the sparse ``offsets`` index), the
    ``rocksdb`` adapter passes ``position=None`` (its records family is keyed
    by offset already).
    """

    def __init__(self, store: IndexStore, ns_id: int, shard: int) -> None:
        self.store = store
        self.prefix = shard_prefix(ns_id, shard)
        self.ns_id = ns_id
        self.shard = shard
        self.checkpoint = store.checkpoint(self.prefix) or Checkpoint()
        # No column family handles are kept here: any live handle keeps RocksDB open after close.
        self._ttl_tail = _PREFIX.pack(ns_id, shard)

    def add_batch(
        self,
        wb: WriteBatch,
        *,
        base_offset: int,
        last_offset: int,
        max_timestamp: int,
        length: int,
        keys: list[tuple[int, bytes]],
        tags: list[tuple[int, str]],
        expires: list[tuple[int, int, int, int]],
        segment_base: int,
        position: int | None,
        first_in_segment: bool,
        interval_bytes: int,
    ) -> None:
        """Put the entries of one batch into ``wb`` and advance the checkpoint (not yet written)."""
        cp = self.checkpoint
        prefix = self.prefix
        handle = self.store.handle
        sparse = first_in_segment or cp.bytes_since_entry >= interval_bytes
        if sparse:
            if position is not None:
                wb.put(prefix + _U64.pack(base_offset), _POS.pack(segment_base, position), handle(CF_OFFSETS))
            cp.bytes_since_entry = 0
        cp.bytes_since_entry += length
        if max_timestamp > cp.max_timestamp:
            cp.max_timestamp = max_timestamp
        if sparse and cp.max_timestamp > cp.time_entry_timestamp:
            wb.put(prefix + _U64.pack(cp.max_timestamp), _U64.pack(last_offset), handle(CF_TIMES))
            cp.time_entry_timestamp = cp.max_timestamp
        if keys:
            h = handle(CF_KEYS)
            for delta, key in keys:
                wb.put(prefix + key, _U64.pack(base_offset + delta), h)
        if tags:
            h = handle(CF_TAGS)
            for delta, tag in tags:
                raw = tag.encode()
                wb.put(prefix + bytes((len(raw),)) + raw + _U64.pack(base_offset + delta), b"", h)
        if expires:
            h = handle(CF_TTL)
            first: bytes | None = None
            for delta, expire_at, size, flags in expires:
                value = _TTL_VALUE.pack(min(size, 0xFFFFFFFF), flags)
                key = _U64.pack(expire_at) + self._ttl_tail + _U64.pack(base_offset + delta)
                wb.put(key, value, h)
                if first is None or key < first:
                    first = key
            if first is not None:
                self.store.ttl_pending(wb, self.ns_id, first)  # the next TTL scan starts at or below it
        cp.next_offset = last_offset + 1
        cp.segment_base = segment_base
        cp.position = (position or 0) + length

    def commit(self, wb: WriteBatch, metas: Iterable[SegmentMeta]) -> None:
        """Add the checkpoint and segment metadata to ``wb``; the caller writes it."""
        for meta in metas:
            self.store.put_segment(wb, self.prefix, meta)
        self.store.put_checkpoint(wb, self.prefix, self.checkpoint)

    def reset(self, wb: WriteBatch, start_offset: int, segment_base: int) -> None:
        """Drop every entry of the shard (ttl included) to re-index it from ``start_offset``."""
        self.store.drop_prefix(wb, self.prefix, INDEX_ONLY_CFS)
        self.store.drop_ttl(wb, self.ns_id, self.shard)
        self.checkpoint = Checkpoint(next_offset=start_offset, segment_base=segment_base)

    # -- lookups ---------------------------------------------------------------------
    def floor_offset(self, offset: int) -> tuple[int, int, int] | None:
        return self.store.floor_offset(self.prefix, offset)

    def floor_time(self, below: int) -> int | None:
        return self.store.floor_time(self.prefix, below)

    def get_key(self, key: bytes) -> int | None:
        return self.store.get_key(self.prefix, key)

    def tag_offsets(self, tag: str, start: int, end: int, limit: int) -> list[int]:
        return self.store.tag_offsets(self.prefix, tag, start, end, limit)


# -- bulk-loading the TTL index (``ingest_ttl_index``) -------------------------------------------
TTL_KEY_BYTES = _TTL.size  # 22: expire_at u64 | ns_id u32 | shard u16 | offset u64
TTL_VALUE_BYTES = _TTL_VALUE.size  # 5: size u32 | flags u8 (or b"": "read the record", see ttl_due)


class ForeignTTLEntryError(InvalidArgumentError):
    """An SST file handed to ``ingest_ttl_index`` holds an entry that is not a TTL-index entry of
    the namespace it was handed to (another namespace id, a shard outside ``0..shards-1``, an
    offset at or past the shard's end, a malformed key or value). Nothing is ingested."""

    code = "foreign_ttl_entry"

    def __init__(self, file: str, index: int, reason: str) -> None:
        # The entry is named by its position, never by its bytes: errors quote no file contents.
        self.file = file
        self.index = index
        self.reason = reason
        super().__init__("file", f"{file}: TTL entry #{index} {reason}")


def decode_ttl_key(key: bytes) -> tuple[int, int, int, int]:
    """``(expire_at, ns_id, shard, offset)`` of a TTL-index key (the inverse of :func:`ttl_key`)."""
    expire_at, ns_id, shard, offset = _TTL.unpack(key)
    return int(expire_at), int(ns_id), int(shard), int(offset)


def sst_options() -> Options:
    """Options for an :class:`rocksdict.SstFileWriter` whose file this store can ingest: raw bytes
    keys and values (the store's ``raw_mode``) and the default bytewise comparator."""
    return Options(raw_mode=True)


@contextlib.contextmanager
def open_sst(path: Path, scratch_root: Path) -> Iterator[Rdict]:
    """An SST file as a read-only view: rocksdict has no SST reader, so the file is ingested (copied,
    the caller's file stays) into a scratch database under ``scratch_root``, removed afterwards.
    ``path`` is a checked file of the import directory (:func:`storage_engine.ttl_import.import_file`).

    Raises :class:`InvalidArgumentError` (field ``file``) for a file that is not an SST file
    RocksDB accepts; the message names the file, never RocksDB's error (which may quote its bytes)."""
    scratch_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="ttl-ingest-", dir=scratch_root))
    db: Rdict | None = None
    try:
        db = Rdict(str(scratch / "db"), sst_options())
        opts = IngestExternalFileOptions()
        opts.set_move_files(False)
        try:
            db.ingest_external_file([str(path)], opts)
        except Exception as exc:  # rocksdict raises a plain Exception for a bad file
            log.info("ttl-index ingest: %s is not an ingestible SST file: %s", path, exc)
            raise InvalidArgumentError("file", f"{path.name}: not a valid SST file") from None
        yield db
    finally:
        if db is not None:
            db.close()
        shutil.rmtree(scratch, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class TTLSstEntry:
    key: bytes
    value: bytes
    expire_at: int
    shard: int
    offset: int


def validated_ttl_entries(db: Rdict, path: Path, ns_id: int, end_offsets: list[int]) -> Iterator[TTLSstEntry]:
    """The entries of an SST view (:func:`open_sst`) in key order, each checked to be a TTL-index
    entry of namespace ``ns_id`` whose shard has end offset ``end_offsets[shard]``; the first one
    that is not raises :class:`ForeignTTLEntryError`."""
    where = path.name
    for i, (raw_key, raw_value) in enumerate(cast(Iterable[tuple[bytes, bytes]], db.items())):
        key, value = bytes(raw_key), bytes(raw_value)
        if len(key) != TTL_KEY_BYTES:
            raise ForeignTTLEntryError(where, i, f"is {len(key)} bytes, a TTL key is {TTL_KEY_BYTES}")
        if len(value) not in (0, TTL_VALUE_BYTES):
            raise ForeignTTLEntryError(where, i, f"has a {len(value)}-byte value (0 or {TTL_VALUE_BYTES})")
        expire_at, n, shard, offset = decode_ttl_key(key)
        if n != ns_id:
            raise ForeignTTLEntryError(where, i, f"belongs to namespace id {n}, not {ns_id}")
        if shard >= len(end_offsets):
            raise ForeignTTLEntryError(where, i, f"names shard {shard}; the namespace has {len(end_offsets)}")
        if offset >= end_offsets[shard]:
            raise ForeignTTLEntryError(
                where, i, f"points at offset {offset}, at or past the end {end_offsets[shard]} of shard {shard}"
            )
        yield TTLSstEntry(key, value, expire_at, shard, offset)


def ingest_ttl_file(
    store: IndexStore, path: Path, ns_id: int, bounds: list[tuple[int, int]], scratch_root: Path
) -> dict[str, Any]:
    """Bulk-load the TTL entries of the SST file at ``path`` into ``store``'s ``ttl`` family.

    ``bounds``: per shard ``(log start, end offset)``. Every entry is validated first
    (:func:`validated_ttl_entries`; one bad entry refuses the whole file). Entries for records that
    are gone (below the log start) or already dead are left out; then the file (or, when some were
    left out, a filtered copy) goes in with RocksDB's ``ingest_external_file``, atomically: either
    every kept entry is visible to the next TTL scan or none is. The caller's file is copied, never
    moved. Memory: the keys left out, not the file's entries.
    """
    t0 = time.perf_counter()
    ends = [end for _, end in bounds]
    skip: set[bytes] = set()
    entries = ingested = 0
    lo: int | None = None
    hi: int | None = None
    with open_sst(path, scratch_root) as db:
        for e in validated_ttl_entries(db, path, ns_id, ends):
            entries += 1
            if e.offset < bounds[e.shard][0] or store.is_dead(shard_prefix(ns_id, e.shard), e.offset):
                skip.add(e.key)
                continue
            ingested += 1
            lo = e.expire_at if lo is None else min(lo, e.expire_at)
            hi = e.expire_at if hi is None else max(hi, e.expire_at)
        if ingested:
            opts = IngestExternalFileOptions()
            opts.set_move_files(False)
            family = store._cf[CF_TTL]
            assert lo is not None
            if not skip:
                family.ingest_external_file([str(path)], opts)
            else:
                filtered = scratch_root / f"filtered-{os.getpid()}-{time.monotonic_ns()}.sst"
                try:
                    writer = SstFileWriter(options=sst_options())
                    writer.open(str(filtered))
                    for raw_key, raw_value in cast(Iterable[tuple[bytes, bytes]], db.items()):
                        if bytes(raw_key) not in skip:
                            writer[bytes(raw_key)] = bytes(raw_value)
                    writer.finish()
                    family.ingest_external_file([str(filtered)], opts)
                finally:
                    filtered.unlink(missing_ok=True)
            store.ttl_written(ns_id, _U64.pack(lo))  # the next TTL scan of the namespace starts there
    return {
        "file": path.name,
        "entries": entries,
        "ingested": ingested,
        "skipped": len(skip),
        "min_expire_at": lo,
        "max_expire_at": hi,
        "duration_ms": round((time.perf_counter() - t0) * 1000, 3),
    }
