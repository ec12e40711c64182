"""The ``rocksdb`` adapter: records and indexes in one RocksDB database.

Records live in the index store's ``records`` column family, one entry per
record keyed ``ns_id u32 | shard u16 | offset u64`` (so a shard is one key
range in offset order), the value being the record in the
:mod:`storage_engine.formats.codec` record format. Indexes, segment metadata,
checkpoints and namespaces are the same column families as the ``segment``
adapter's (:mod:`storage_engine.segment.index_store`), minus the sparse
offset index, which the records family makes unnecessary.

A group commit is one WriteBatch holding the records, their index entries,
the segment metadata and the checkpoint, so RocksDB's own atomicity is the
whole crash-recovery story: after a crash a batch is entirely there or not at
all. ``fsync`` mode writes it with ``sync=True`` (WAL fsynced); ``interval``
syncs the WAL at most every ``fsync_interval_ms``.

Segments are logical, with the ``segment`` adapter's rolling rule, so the
catalog looks the same; a segment's ``size_bytes`` is the bytes of its keys
and values.

Reclamation (DESIGN §3, layer 3): deleting a segment range-deletes its
records with the rest of its offset-keyed entries (the shared three-step
protocol of :mod:`storage_engine.segment.shard`); rewriting one deletes its
dead records' keys; afterwards ``compact_range`` asks RocksDB to drop the
deleted ranges from its files.
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Iterator
from dataclasses import dataclass, replace
from typing import Any

from storage_engine.adapters.indexed import IndexedLogAdapter
from storage_engine.api import Record, SegmentInfo, SegmentState
from storage_engine.clock import Clock
from storage_engine.config import EngineConfig
from storage_engine.formats.batch_columns import RecordColumns
from storage_engine.formats.codec import EncodedRecords, decode_record, iter_record_slices
from storage_engine.lifecycle import KEEP, SUPERSEDED, Removal, RemovalRule, ShardWork, removal_rule
from storage_engine.segment.index_keys import CF_DEAD, CF_RECORDS, offset_key
from storage_engine.segment.index_records import NamespaceRecord
from storage_engine.segment.meta import SegmentMeta
from storage_engine.segment.shard import UNINDEX_CHUNK, ShardBase
from storage_engine.segment.shard_index import ShardIndex

_U64 = struct.Struct(">Q")
_KEY_BYTES = 6 + 8  # prefix + offset: what each record costs beyond its value


@dataclass(frozen=True, slots=True)
class RocksView:
    log_start_offset: int
    end_offset: int
    sealed: tuple[SegmentMeta, ...]  # no longer change
    active: SegmentMeta  # a copy

    def metas(self) -> list[SegmentMeta]:
        return [*self.sealed, self.active]

    def due_layout(self) -> tuple[object, SegmentMeta]:
        """(an object every roll and drop replaces, the active segment's metadata). A rewrite changes a
        sealed segment's metadata in place but never its deadline or oldest timestamp."""
        return self.sealed, self.active


class RocksShard(ShardBase):
    """One shard of the ``rocksdb`` adapter (logical segments over the records family)."""

    view: RocksView

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.store = self.index.store
        self._metas: list[SegmentMeta] = []
        self._layout_changed = False
        self._dropping: dict[int, SegmentMeta] = {}

    @classmethod
    def create(cls, **kwargs: Any) -> RocksShard:
        self = cls(**kwargs)
        now = self.clock.now_ms()
        self._metas = [SegmentMeta(0, created_at=now, modified_at=now)]
        wb = self.store.batch()
        self.index.commit(wb, self._metas)
        self.store.write(wb)  # made durable by the synced namespace write that follows
        self._publish()
        return self

    @classmethod
    def open(cls, **kwargs: Any) -> RocksShard:
        """Nothing to repair: every group commit was one atomic WriteBatch."""
        self = cls(**kwargs)
        metas = self.store.segments(self.index.prefix)
        self._dropping = {m.base_offset: m for m in metas if m.state is SegmentState.DELETING}
        self._metas = [m for m in metas if m.state is not SegmentState.DELETING]
        self._next_offset = self.index.checkpoint.next_offset
        if not self._metas:
            now = self.clock.now_ms()
            self._metas = [SegmentMeta(self._next_offset, created_at=now, modified_at=now)]
        self._publish()
        if self._dropping:  # a deletion was interrupted: finish it
            self._finish_drop(list(self._dropping.values()), self.clock.now_ms(), 0, ShardWork())
        return self

    def _append_group(self, bodies: list[EncodedRecords]) -> list[int]:
        store = self.store
        prefix = self.index.prefix
        policy = self.policy
        now = self.clock.now_ms()
        handle = store.handle(CF_RECORDS)
        wb = store.batch()
        active = self._metas[-1]
        dirty: dict[int, SegmentMeta] = {}
        offsets: list[int] = []
        appended_bytes = 0
        for body in bodies:
            nbytes = len(body.data) + _KEY_BYTES * body.count
            appended_bytes += nbytes
            if active.should_roll(policy, nbytes, body.max_timestamp):
                active.state = SegmentState.SEALED
                dirty[active.base_offset] = active
                active = SegmentMeta(self._next_offset, created_at=now, modified_at=now)
                self._metas.append(active)
                self.counters.add("segment_rolls_total")
            base = self._next_offset
            data = body.data
            for delta, start, end in iter_record_slices(data):
                wb.put(prefix + _U64.pack(base + delta), data[start:end], handle)
            offsets.append(self._index_appended(wb, body, active, nbytes, None, now, dirty))
        self.index.commit(wb, dirty.values())
        sync = self.sync_schedule.sync_now()
        store.write(wb, sync=sync)
        if sync:
            self._synced()
        self._publish()
        self.counters.add_many(  # the same counters, in the same units, as the segment adapter's
            {
                "append_groups_total": 1,
                "append_batches_total": len(bodies),
                "appended_records_total": sum(b.count for b in bodies),
                "appended_bytes_total": appended_bytes,
            }
        )
        return offsets

    def _publish(self) -> None:
        old = getattr(self, "view", None)
        n = len(self._metas) - 1
        changed, self._layout_changed = self._layout_changed, False
        sealed = old.sealed if not changed and old is not None and len(old.sealed) == n else tuple(self._metas[:-1])
        self.view = RocksView(self._metas[0].base_offset, self._next_offset, sealed, replace(self._metas[-1]))

    # -- reading ------------------------------------------------------------------------
    def iter_records(self, view: RocksView, start: int, *, min_timestamp: int | None = None) -> Iterator[Record]:
        for offset, value in self.store.records(self.index.prefix, start, view.end_offset):
            yield decode_record(value, offset)

    def record_at(self, offset: int) -> Record | None:
        for r in self.iter_records(self.view, offset):
            return r if r.offset == offset else None
        return None

    # -- lifecycle ------------------------------------------------------------------------
    def _live_metas(self) -> list[SegmentMeta]:
        return self._metas

    def _detach(self, metas: list[SegmentMeta]) -> None:
        for m in metas:
            self._dropping[m.base_offset] = m
        bases = set(self._dropping)
        self._metas = [m for m in self._metas if m.base_offset not in bases]
        self._layout_changed = True
        self._publish()

    def _segment_records(self, meta: SegmentMeta, indexed_only: bool = False) -> Iterator[Record]:
        for offset, value in self.store.records(self.index.prefix, meta.base_offset, meta.last_offset + 1):
            yield decode_record(value, offset)

    def _release_dropped(self, metas: list[SegmentMeta], now: int, delay_ms: int, work: ShardWork) -> None:
        """The records went with the range delete of step 3; nothing else holds storage."""
        for m in metas:
            self._dropping.pop(m.base_offset, None)

    def roll_empty(self, now: int) -> bool:
        with self.write_lock:
            self.check_usable()
            active = self._metas[-1]
            if active.record_count == 0:
                return False
            active.state = SegmentState.SEALED
            new = SegmentMeta(self._next_offset, created_at=now, modified_at=now)
            self._metas.append(new)
            wb = self.store.batch()
            self.index.commit(wb, [active, new])
            self.store.write(wb, sync=True)
            self.counters.add("segment_rolls_total")
            self._publish()
            return True

    def rewrite_segment(self, base: int, now: int, remove: Removal = ()) -> ShardWork:
        """Delete a sealed segment's dead records (after marking its expired ones dead), a
        chunk per WriteBatch: each chunk removes records, their dead marks and their bytes
        from the metadata together, so any prefix of the chunks is a consistent state.

        ``remove`` (key compaction) names further live records to delete, as offsets or a
        :data:`~storage_engine.lifecycle.RemovalRule` asked per chunk while the records
        stream; their index entries (tags, TTL, the key entry only where it still points
        at them) go in the same chunk's WriteBatch. A segment left without records is
        dropped whole."""
        work = ShardWork()
        with self.write_lock:
            meta = next((m for m in self._metas[:-1] if m.base_offset == base), None)
        if meta is None or meta.state is not SegmentState.SEALED:
            return work
        work.add(self._kill_expired_in(meta, now))
        rule = removal_rule(remove)
        prefix = self.index.prefix
        has_dead = meta.live_count < meta.record_count
        if not has_dead and rule is None:
            return work
        chunk: list[tuple[int, bytes]] = []
        touched = False
        for offset, value in self.store.records(prefix, base, meta.last_offset + 1):
            chunk.append((offset, value))
            if len(chunk) >= UNINDEX_CHUNK:
                touched |= self._remove_chunk(chunk, meta, rule, has_dead, work)
                chunk = []
        if chunk:
            touched |= self._remove_chunk(chunk, meta, rule, has_dead, work)
        if not touched:
            return work
        if meta.record_count <= 0:
            return work.add(self.drop_segments([base], now, 0))
        work.segments_rewritten += 1
        self.counters.add("segments_rewritten_total")
        return work

    def _remove_chunk(
        self,
        chunk: list[tuple[int, bytes]],
        meta: SegmentMeta,
        rule: RemovalRule | None,
        has_dead: bool,
        work: ShardWork,
    ) -> bool:
        """Delete the dead records of ``chunk`` and those ``rule`` removes, in one WriteBatch."""
        prefix = self.index.prefix
        dead = set(self.store.dead_offsets(prefix, chunk[0][0], chunk[-1][0] + 1)) if has_dead else set()
        records = [decode_record(v, o) for o, v in chunk if o not in dead] if rule is not None else []
        decided: dict[int, int] = {}
        if rule is not None:
            decided = dict(zip([r.offset for r in records], rule(RecordColumns.of_records(records)), strict=True))
        doomed = [(o, v) for o, v in chunk if o in dead or decided.get(o, KEEP) != KEEP]
        if not doomed:
            return False
        by_offset = {r.offset: r for r in records}
        records_handle, dead_handle = self.store.handle(CF_RECORDS), self.store.handle(CF_DEAD)
        with self.write_lock:
            self.check_usable()
            wb = self.store.batch()
            nbytes = dead_bytes = live_removed = 0
            for offset, value in doomed:
                wb.delete(offset_key(prefix, offset), records_handle)
                wb.delete(offset_key(prefix, offset), dead_handle)
                nbytes += len(value)
                if offset in dead:
                    dead_bytes += len(value)
                    continue
                r = by_offset[offset]
                key = None if decided[offset] == SUPERSEDED else r.key
                work.index_entries_deleted += self._unindex(wb, offset, key, r.tags, r.expire_at)
                live_removed += 1
            meta.record_count -= len(doomed)
            meta.live_count -= live_removed
            meta.size_bytes -= nbytes + _KEY_BYTES * len(doomed)
            meta.dead_bytes = max(0, meta.dead_bytes - dead_bytes)
            self.store.put_segment(wb, prefix, meta)
            self.store.write(wb, sync=True)
        work.records_removed += len(doomed)
        work.bytes_reclaimed += nbytes + _KEY_BYTES * len(doomed)
        return True

    def removed_bytes(self, info: SegmentInfo, remove: Collection[int]) -> int:
        """One key and value per record (:meth:`_remove_chunk`'s count)."""
        records = self.store.records(self.index.prefix, info.base_offset, info.last_offset + 1)
        return sum(len(v) + _KEY_BYTES for o, v in records if o in remove)

    def _verify_storage(self, view: Any) -> tuple[int, list[str]]:
        below = [o for o, _ in self.store.records(self.index.prefix, 0, view.log_start_offset)]
        return len(below), [f"{self.route} record {o} is stored below the log start" for o in below[:10]]

    # -- closing --------------------------------------------------------------------------
    def _sync_storage(self) -> None:
        self.store.sync_wal()

    def _release(self) -> None:
        """Nothing of its own to close: the database belongs to the adapter."""


class RocksDBAdapter(IndexedLogAdapter):
    name = "rocksdb"
    extra_column_families = (CF_RECORDS,)

    def __init__(self, config: EngineConfig, clock: Clock) -> None:
        super().__init__(config, clock)

    def _make_shard(self, record: NamespaceRecord, shard: int, *, create: bool) -> ShardBase:
        kwargs = {
            "namespace": record.name,
            "shard": shard,
            "index": ShardIndex(self.store, record.ns_id, shard),
            "policy": record.policy,
            "config": self.config,
            "clock": self.clock,
            "counters": self.counters,
        }
        return RocksShard.create(**kwargs) if create else RocksShard.open(**kwargs)
