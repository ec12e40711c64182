"""What every shard store has, whatever holds its records: the single-writer lock,
reader pinning, the failure state, durability scheduling, the metadata views,
and the lifecycle steps both log adapters share (DESIGN §3): marking records
dead with their index entries (layer 2), deleting segments whole and
verification.

Deleting segments (retention, file cleaning, reclamation) is crash-safe in
three steps, each atomic in RocksDB:

1. the segments' metadata is set to DELETING (one synced WriteBatch) and they
   leave the published view, so the log start moves at once;
2. their key, tag and TTL entries are deleted, a chunk per WriteBatch (the
   key entry only where it still points into the segment), found by walking
   the segment's batches that have keys, tags or deadlines (none when every
   record is already dead: the TTL scan removed their entries);
3. one synced WriteBatch range-deletes the segment's offset-keyed entries
   (sparse offsets, dead marks, the ``rocksdb`` adapter's records), the
   ``times`` entries below a new log start and the metadata; then the
   storage is released (the ``segment`` adapter renames the file
   ``.deleted``); an offloaded segment's objects are deleted just before
   this write (:meth:`ShardBase._before_forget`).

Opening a shard finds DELETING metadata after a crash in 1–3 and runs 2–3
again (both are idempotent).
"""

from __future__ import annotations

import abc
import bisect
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from storage_engine.api import Record, SegmentInfo, SegmentState, ShardStats, shard_stats_of
from storage_engine.clock import Clock
from storage_engine.compaction.store_io import RecordCompactionReads
from storage_engine.config import EngineConfig
from storage_engine.errors import CorruptSegmentError, EngineClosedError, UnknownNamespaceError
from storage_engine.formats.codec import FLAG_HAS_EXPIRE, FLAG_HAS_KEYS, FLAG_HAS_TAGS, EncodedRecords, encoded_size
from storage_engine.lifecycle import Removal, ShardWork, TTLEntry
from storage_engine.lifecycle.counters import Counters
from storage_engine.policies.policy import NamespacePolicy, NodePolicy
from storage_engine.rules.expiry import is_expired
from storage_engine.rules.figures import FiguresCache, ProfileRow, SegmentFacts
from storage_engine.rules.rolling import expired_roll_due
from storage_engine.segment.dead_marks import mark_dead, mark_expired_entries
from storage_engine.segment.iopool import SyncSchedule
from storage_engine.segment.meta import SegmentMeta
from storage_engine.segment.shard_index import ShardIndex
from storage_engine.segment.verify import verify_index

INDEXED_FLAGS = FLAG_HAS_KEYS | FLAG_HAS_TAGS | FLAG_HAS_EXPIRE
UNINDEX_CHUNK = 1000  # records whose entries one WriteBatch deletes (one hold of the write lock)
KILL_CHUNK = 256  # the same for marking expired records dead (read checks, a rewrite's first step)


FETCH_GAP = 64  # fetch wanted offsets with one scan while they are this close together


class ShardBase(RecordCompactionReads, abc.ABC):
    """Base of :class:`~storage_engine.segment.log.ShardLog` and the ``rocksdb`` adapter's shard.

    ``view`` is an immutable snapshot with at least ``log_start_offset``,
    ``end_offset`` and ``metas()``; writers swap it, readers take it once.
    """

    view: Any

    def __init__(
        self,
        *,
        namespace: str,
        shard: int,
        index: ShardIndex,
        policy: NamespacePolicy,
        config: EngineConfig,
        clock: Clock,
        counters: Counters,
    ) -> None:
        self.namespace = namespace
        self.shard = shard
        self.route = f"{namespace}/{shard}"
        self.index = index
        self.policy = policy
        self.clock = clock
        self.counters = counters
        self.sync_schedule = SyncSchedule(config.durability, config.fsync_interval_ms)
        self.write_lock = threading.Lock()  # held by the I/O worker for a group, and by close
        self._next_offset = 0  # the end offset (write lock held)
        self._readers = 0
        self._readers_done = threading.Condition()
        self._closed = False
        self._deleted = False
        self.figures = FiguresCache()  # expired figures of partly expired segments (storage_engine.rules.figures)
        # Set when the shard cannot be served (a damaged sealed segment, a failed write);
        # reads and appends raise it, other shards are unaffected.
        self.failure: Exception | None = None

    def check_usable(self) -> None:
        if self._closed:
            raise UnknownNamespaceError(self.namespace) if self._deleted else EngineClosedError()
        f = self.failure
        if isinstance(f, CorruptSegmentError):
            raise CorruptSegmentError(f.path, f.position, f.reason)
        if f is not None:
            raise f

    @contextmanager
    def reading(self) -> Iterator[Any]:
        """Pin the shard's storage for the duration of a read; yields the current view."""
        with self._readers_done:
            self.check_usable()
            self._readers += 1
        try:
            yield self.view
        finally:
            with self._readers_done:
                self._readers -= 1
                if self._readers == 0:
                    self._readers_done.notify_all()

    # -- appending (the shard's I/O worker only) -----------------------------------------------
    def append_group(self, bodies: list[EncodedRecords]) -> list[int]:
        """Append batches in order, as one group commit; return each batch's base offset."""
        with self.write_lock:
            self.check_usable()
            try:
                return self._append_group(bodies)
            except Exception as exc:
                # Memory, storage and index may now disagree, and after a failed fsync the
                # page cache cannot be trusted (fsyncgate): stop serving the shard; reopening
                # recovers it.
                self.failure = exc
                raise

    @abc.abstractmethod
    def _append_group(self, bodies: list[EncodedRecords]) -> list[int]:
        """The store's group commit (write lock held): store each batch, index and account it
        with :meth:`_index_appended`, then write the index WriteBatch and publish."""

    def _index_appended(
        self,
        wb: Any,
        body: EncodedRecords,
        meta: SegmentMeta,
        length: int,
        position: int | None,
        now: int,
        dirty: dict[int, SegmentMeta],
    ) -> int:
        """Index a batch appended at the end offset into ``wb``, account it to its segment's
        ``meta`` (marked ``dirty``) and move the end offset past it; returns its base offset.

        ``length`` is what the store spends on the batch; ``position`` its place in the segment
        file, ``None`` for a store without files (no sparse offsets; a segment's first batch
        is then the one that finds it without records)."""
        base = self._next_offset
        self.index.index_batch(
            wb,
            body,
            meta,
            base_offset=base,
            length=length,
            position=position,
            first_in_segment=meta.record_count == 0 if position is None else position == 0,
            interval_bytes=self.policy.index_interval_bytes,
            now=now,
        )
        dirty[meta.base_offset] = meta
        self._next_offset = base + body.last_delta + 1
        return base

    # -- records: what each store implements --------------------------------------------------

    @abc.abstractmethod
    def iter_records(self, view: Any, start: int, *, min_timestamp: int | None = None) -> Iterator[Record]:
        """Records at or after ``start`` up to ``view.end_offset`` in offset order. Batches whose
        records are all older than ``min_timestamp`` may be skipped (a hint, not a filter)."""

    @abc.abstractmethod
    def record_at(self, offset: int) -> Record | None:
        """The record stored at ``offset``, or ``None``; call within :meth:`reading`."""

    def fetch(self, view: Any, offsets: Sequence[int]) -> list[Record]:
        """The records at ``offsets`` (ascending) that exist; one scan while they are close."""
        out: list[Record] = []
        i = 0
        while i < len(offsets):
            for r in self.iter_records(view, offsets[i]):
                while i < len(offsets) and offsets[i] < r.offset:
                    i += 1  # no record there (removed by a rewrite)
                if i == len(offsets):
                    break
                if r.offset == offsets[i]:
                    out.append(r)
                    i += 1
                if i == len(offsets) or offsets[i] - r.offset > FETCH_GAP:
                    break
            else:
                break
        return out

    # -- metadata -------------------------------------------------------------------------
    def segment_infos(self) -> list[SegmentInfo]:
        return self._infos(self.view)

    def lifecycle_segments(self) -> list[SegmentInfo]:
        return self.segment_infos()

    def due_facts(self) -> tuple[object | None, Callable[[], list[SegmentFacts]], SegmentFacts]:
        """For due times (:mod:`storage_engine.rules.due`): metadata only, sealed facts built when asked."""
        view = self.view
        token, active = view.due_layout()
        return token, lambda: [m.facts() for m in view.metas()[:-1]], active.facts()

    def stats(self) -> ShardStats:
        view = self.view
        return shard_stats_of(self.namespace, self.shard, view.log_start_offset, view.end_offset, self._infos(view))

    def _infos(self, view: Any) -> list[SegmentInfo]:
        """The view's segments with their expired figures at the clock's now."""
        metas: list[SegmentMeta] = view.metas()
        now, ttl_ms = self.clock.now_ms(), self.policy.ttl_ms
        infos = [
            m.to_info(self.namespace, self.shard, self.figures.figures(m.facts(), ttl_ms, now, self._profile_rows))
            for m in metas
        ]
        self.figures.retain(m.base_offset for m in metas)
        return infos

    def _profile_rows(self, first: int, last: int) -> Iterator[ProfileRow]:
        """The figures' view of the stored records ``first..last`` (:mod:`storage_engine.rules.figures`)."""
        dead = set(self.index.store.dead_offsets(self.index.prefix, first, last + 1))
        with self.reading() as current:
            for r in self.iter_records(current, first):
                if r.offset > last:
                    break
                yield r.timestamp, r.expire_at, encoded_size(r), r.offset in dead

    def expired_roll_due(self, policy: NamespacePolicy, now: int) -> int | None:
        """When the active segment passes its expired-share roll threshold (:mod:`storage_engine.rules.due`)."""
        _, active = self.view.due_layout()
        facts = active.facts()
        return expired_roll_due(
            policy,
            facts.record_count,
            active.created_at,
            lambda n: self.figures.expired_by(facts, policy.ttl_ms, now, self._profile_rows, n),
        )

    # -- lifecycle: what each store implements ---------------------------------------------
    @abc.abstractmethod
    def _live_metas(self) -> list[SegmentMeta]:
        """Metadata of the live segments in offset order, the active one last (write lock held)."""

    @abc.abstractmethod
    def _publish(self) -> None:
        """Publish a new view after the live segments or the active metadata changed."""

    @abc.abstractmethod
    def _detach(self, metas: list[SegmentMeta]) -> None:
        """Take DELETING segments out of the live list and publish (write lock held)."""

    @abc.abstractmethod
    def _segment_records(self, meta: SegmentMeta, indexed_only: bool = False) -> Iterator[Record]:
        """Every record of a sealed or deleting segment (with ``indexed_only``, at least
        those with a key, tags or a deadline; batches without may be skipped)."""

    @abc.abstractmethod
    def _release_dropped(self, metas: list[SegmentMeta], now: int, delay_ms: int, work: ShardWork) -> None:
        """Release the storage of deleted segments (after their metadata is gone)."""

    @abc.abstractmethod
    def roll_empty(self, now: int) -> bool:
        """Seal a non-empty active segment and start an empty one; whether it rolled."""

    @abc.abstractmethod
    def rewrite_segment(self, base: int, now: int, remove: Removal = ()) -> ShardWork:
        """Rewrite a sealed segment without its expired and dead records and those ``remove``
        names (:meth:`storage_engine.lifecycle.LifecycleShard.rewrite_segment`)."""

    def remove_due_files(self, now: int, node: NodePolicy, *, purge: bool = False) -> ShardWork:
        """Remove deleted files that are due, or all with ``purge`` (stores without files have none)."""
        return ShardWork()

    def pending_file_bytes(self) -> int:
        """Bytes of deleted files waiting for removal (stores without files have none)."""
        return 0

    def due_files(self, now: int, node: NodePolicy, *, purge: bool = False) -> tuple[int, int]:
        """``(files, bytes)`` :meth:`remove_due_files` would remove now (stores without files have none)."""
        return 0, 0

    def drop_files(self, bases: Collection[int], delay_ms: int) -> tuple[int, int]:
        """What a drop of ``bases`` would do to files: none removed, none pending (stores without files)."""
        return 0, 0

    def _verify_storage(self, view: Any) -> tuple[int, list[str]]:
        """Store-specific checks (the sparse offset index of segment files)."""
        return 0, []

    # -- lifecycle: shared steps ----------------------------------------------------------------
    def _meta_for(self, offset: int) -> SegmentMeta | None:
        """The live segment whose offset range holds ``offset`` (write lock held)."""
        metas = self._live_metas()
        i = bisect.bisect_right([m.base_offset for m in metas], offset) - 1
        if i < 0:
            return None
        m = metas[i]
        return m if offset <= max(m.last_offset, m.base_offset - 1) else None

    def _unindex(self, wb: Any, offset: int, key: bytes | None, tags: Sequence[str], expire_at: int | None) -> int:
        """:meth:`ShardIndex.unindex <storage_engine.segment.shard_index.ShardIndex.unindex>`."""
        return self.index.unindex(wb, offset, key, tags, expire_at)

    def _commit_dead(self, wb: Any, dirty: dict[int, SegmentMeta]) -> None:
        store = self.index.store
        for meta in dirty.values():
            store.put_segment(wb, self.index.prefix, meta)
        store.write(wb)
        if dirty:
            self._publish()  # the active segment's live count is part of the view

    def _records_map(self, offsets: Sequence[int]) -> dict[int, Record]:
        if not offsets:
            return {}
        with self.reading() as view:
            return {r.offset: r for r in self.fetch(view, sorted(offsets))}

    def expire_entries(self, entries: Sequence[TTLEntry], now: int) -> ShardWork:
        """Layer 2 per entry: unindex, delete the TTL entry, mark dead, in one WriteBatch per call
        (:func:`storage_engine.segment.dead_marks.mark_expired_entries`).

        This is the scan's inner loop, run under the write lock: the caller keeps
        ``entries`` to a few hundred (one lock hold).
        """
        work = ShardWork()
        found = self._records_map([e.offset for e in entries if e.flags != 0])
        with self.write_lock:
            self.check_usable()
            wb = self.index.store.batch()
            dirty, expired, deleted = mark_expired_entries(
                wb, self.index, self._live_metas(), entries, found, self.figures
            )
            self._commit_dead(wb, dirty)
        work.expired_records = expired
        work.index_entries_deleted = deleted
        return work

    def expire_offsets(self, offsets: Sequence[int], now: int) -> ShardWork:
        """Read checks: mark the expired, not yet dead records at ``offsets`` dead."""
        return self._kill(list(self._records_map(offsets).values()), now)

    def _kill(self, records: Sequence[Record], now: int) -> ShardWork:
        """Mark expired records dead with their index entries, a chunk per WriteBatch."""
        work = ShardWork()
        store = self.index.store
        ttl_ms = self.policy.ttl_ms
        for i in range(0, len(records), KILL_CHUNK):
            with self.write_lock:
                self.check_usable()
                wb = store.batch()
                dirty: dict[int, SegmentMeta] = {}
                for r in records[i : i + KILL_CHUNK]:
                    meta = self._meta_for(r.offset)
                    if meta is None or not is_expired(r.timestamp, r.expire_at, ttl_ms, now):
                        continue
                    if store.is_dead(self.index.prefix, r.offset):
                        continue
                    work.index_entries_deleted += self._unindex(wb, r.offset, r.key, r.tags, r.expire_at)
                    mark_dead(wb, self.index, r.offset, encoded_size(r), meta, dirty)
                    work.expired_records += 1
                self._commit_dead(wb, dirty)
        return work

    def _kill_expired_in(self, meta: SegmentMeta, now: int) -> ShardWork:
        """Mark every expired record of a sealed segment dead (a rewrite's first step)."""
        ttl_ms = self.policy.ttl_ms
        dead = set(self.index.store.dead_offsets(self.index.prefix, meta.base_offset, meta.last_offset + 1))
        expired = [
            r
            for r in self._segment_records(meta)
            if r.offset not in dead and is_expired(r.timestamp, r.expire_at, ttl_ms, now)
        ]
        return self._kill(expired, now)

    def drop_segments(self, bases: Sequence[int], now: int, delay_ms: int) -> ShardWork:
        """Delete sealed segments whole (see the module docstring for the three steps)."""
        work = ShardWork()
        wanted = set(bases)
        with self.write_lock:
            self.check_usable()
            metas = [m for m in self._live_metas()[:-1] if m.base_offset in wanted and m.state is SegmentState.SEALED]
            if not metas:
                return work
            wb = self.index.store.batch()
            for m in metas:
                m.state = SegmentState.DELETING
                self.index.store.put_segment(wb, self.index.prefix, m)
            self.index.store.write(wb, sync=True)
            self._detach(metas)
        self._finish_drop(metas, now, delay_ms, work)
        return work

    def _finish_drop(self, metas: list[SegmentMeta], now: int, delay_ms: int, work: ShardWork) -> None:
        """Steps 2 and 3 of a deletion (also what opening a shard runs for DELETING segments)."""
        store = self.index.store
        prefix = self.index.prefix
        for m in metas:
            if m.live_count <= 0 or not m.content_flags & INDEXED_FLAGS:
                continue  # every record is dead (its entries went with it) or none was indexed
            dead = set(store.dead_offsets(prefix, m.base_offset, m.last_offset + 1))
            pending: list[Record] = []
            for r in self._segment_records(m, indexed_only=True):
                if r.offset not in dead and (r.key is not None or r.tags or r.expire_at is not None):
                    pending.append(r)
                if len(pending) >= UNINDEX_CHUNK:
                    work.index_entries_deleted += self._unindex_chunk(pending)
                    pending = []
            work.index_entries_deleted += self._unindex_chunk(pending)
        self._before_forget(metas)
        with self.write_lock:
            wb = store.batch()
            start = self.view.log_start_offset
            below = [m for m in metas if m.base_offset < start]
            for m in metas:
                store.drop_offset_range(wb, prefix, m.base_offset, max(m.base_offset, m.last_offset + 1))
                store.delete_segment(wb, prefix, m.base_offset)
            if below:
                store.drop_times_below(wb, prefix, start, max(m.max_timestamp for m in below))
            store.write(wb, sync=True)
        work.segments_deleted += len(metas)
        work.records_removed += sum(m.record_count for m in metas)
        work.bytes_reclaimed += sum(m.size_bytes for m in metas)
        self.counters.add_many({"segments_deleted_total": len(metas)})
        self._release_dropped(metas, now, delay_ms, work)

    def _before_forget(self, metas: list[SegmentMeta]) -> None:
        """Between steps 2 and 3 of a deletion: release what the segments have outside the index
        store and the local files (an offloaded segment's objects). Idempotent: a crash after it
        runs it again from the DELETING metadata."""

    def _unindex_chunk(self, records: Sequence[Record]) -> int:
        if not records:
            return 0
        n = 0
        with self.write_lock:
            wb = self.index.store.batch()
            for r in records:
                n += self._unindex(wb, r.offset, r.key, r.tags, r.expire_at)
            self.index.store.write(wb)
        return n

    def compact_deleted(self) -> None:
        self.index.store.compact_ranges(self.index.prefix, self.clock.now_ms())

    # -- key compaction (storage_engine.compaction.store_io.CompactableShard) -------------------------
    def compaction_records(self, base: int) -> Iterator[Record]:
        """Every stored record of live segment ``base`` (dead ones included), in offset order."""
        for m in self.view.metas():
            if m.base_offset == base:
                yield from self._segment_records(m)
                return

    @abc.abstractmethod
    def removed_bytes(self, info: SegmentInfo, remove: Collection[int]) -> int:
        """Bytes a rewrite of segment ``info`` without ``remove`` reclaims (as the store's
        ``rewrite_segment`` counts them)."""

    def cleaner_checkpoint(self) -> bytes | None:
        return self.index.store.cleaner_checkpoint(self.index.prefix)

    def save_cleaner_checkpoint(self, raw: bytes) -> None:
        """One synced RocksDB write."""
        store = self.index.store
        wb = store.batch()
        store.put_cleaner_checkpoint(wb, self.index.prefix, raw)
        store.write(wb, sync=True)

    # -- verification ---------------------------------------------------------------------------------
    def verify(self, now: int) -> tuple[int, int, list[str]]:
        """Indexes against data (see :meth:`StorageAdapter.verify`); run it on a quiet shard."""
        with self.reading() as view:
            metas: list[SegmentMeta] = view.metas()
            records = {r.offset: r for r in self.iter_records(view, view.log_start_offset)}
            storage_checked, problems = self._verify_storage(view)
        checked, found = verify_index(
            self.route, self.index, metas, records, view.log_start_offset, view.end_offset, self.policy.ttl_ms, now
        )
        return len(records), checked + storage_checked, problems + found

    # -- durability and closing ----------------------------------------------------------------
    def sync_if_due(self) -> bool:
        """Called by the I/O worker: fsync once the ``interval`` has passed; whether data is still unsynced."""
        with self.write_lock:
            if self._closed or self.failure is not None:
                return False
            if self.sync_schedule.due():
                self._sync()
            return self.sync_schedule.dirty

    def _sync(self) -> None:
        self._sync_storage()
        self._synced()

    def _synced(self) -> None:
        """Every acknowledged write is durable now (by :meth:`_sync` or a synced write)."""
        self.sync_schedule.synced()
        self.counters.add("fsyncs_total")

    @abc.abstractmethod
    def _sync_storage(self) -> None:
        """Make every acknowledged write durable."""

    @abc.abstractmethod
    def _release(self) -> None:
        """Close files or handles; called once, with no reader or writer left."""

    def close(self, *, sync: bool = True, deleted: bool = False) -> None:
        """Wait for the running group commit and in-flight reads, fsync, release. Idempotent.

        ``deleted``: the namespace is being deleted; later calls report it unknown.
        """
        with self.write_lock:
            if self._closed:
                return
            with self._readers_done:
                self._closed = True
                self._deleted = deleted
                while self._readers:
                    self._readers_done.wait()
            if sync and self.failure is None:
                self._sync()
            self._release()
