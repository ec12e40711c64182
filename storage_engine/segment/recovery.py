"""Recovery of one shard's log when it opens: segment files, index and metadata brought
back in line after any shutdown, clean or not.

Bring files, index and metadata back in line after any shutdown.

1. Segment files are the truth: metadata without a file is dropped;
   a file without metadata (created just before a crash) gets fresh
   metadata from its contents.
2. Every batch of every segment is checked (header and CRC). At the
   first damaged batch: if its segment is sealed, the damage is real
   (sealed segments are fsynced before they are marked sealed) and the
   shard fails with CorruptSegmentError, files untouched for an
   operator; otherwise it is the torn tail of an interrupted write, so
   the file is cut there and any later segment removed, which keeps
   offsets dense.
3. If the checkpoint (last indexed offset) is within the data, the
   batches after it are re-indexed. If it points past the data (data
   lost in ``interval``/``none`` mode, or the tail cut in step 2), every
   index entry of the shard is dropped and the shard re-indexed, so no
   entry points at missing data.


What a crash can leave, given the order of a group commit (see
:mod:`storage_engine.segment.log`): data ahead of the index (a torn or unindexed
tail), never behind it in ``fsync`` mode; a ``.cleaned`` file of an unfinished
rewrite (deleted), a ``.swap`` file of a decided one (renamed over its ``.log``, then
the whole shard re-indexed), DELETING metadata of an interrupted deletion (its
segments are handed back for :class:`~storage_engine.segment.log.ShardLog` to
finish the deletion), ``.deleted`` files (removed).

Offloaded segments (tiered storage, :mod:`storage_engine.tier`): a segment whose metadata says
its tier is *remote* has no local file by design; it is opened as a remote segment (``remote``,
reads go to the object store) and its batches are not re-verified here (``verify`` checks the
object against its manifest's checksum). A local file still present for it is the leftover of
an interrupted drop of the local copy (the metadata is switched first) and is removed. A segment
uploaded and verified (*both*) whose local file is missing is served remotely from then on.
A rewrite of an offloaded segment (:mod:`storage_engine.tier.rewrite`) relies on the first rule:
its catalog write says *remote* under the new generation before the new local file replaces the
old one, so a crash in between leaves an old (or new) local file that this removes, and the
segment is served from its new objects; its ``.cleaned`` file is removed as any other.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rocksdict import WriteBatch

from storage_engine.api import SegmentState
from storage_engine.errors import CorruptSegmentError
from storage_engine.formats.codec import (
    FLAG_HAS_EXPIRE,
    FLAG_HAS_KEYS,
    FLAG_HAS_TAGS,
    BatchHeader,
    decode_records,
    encoded_size,
    expire_flags,
)
from storage_engine.lifecycle.counters import Counters
from storage_engine.segment.datadir import fsync_dir
from storage_engine.segment.meta import SegmentMeta, TierState
from storage_engine.segment.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    SUFFIX,
    SWAP_SUFFIX,
    Segment,
    parse_file_name,
)
from storage_engine.segment.shard_index import ShardIndex

log = logging.getLogger(__name__)

_REINDEX_COMMIT_EVERY = 4096  # batches per WriteBatch while re-indexing at open


@dataclass(slots=True)
class Recovered:
    """What recovery leaves for the log: its live segments in offset order (the active one
    last), segments whose deletion was interrupted, the end offset, and the damage that
    keeps the shard from being served (``None``: none)."""

    segments: list[Segment]
    dropping: dict[int, Segment]
    next_offset: int
    failure: CorruptSegmentError | None


@dataclass(frozen=True, slots=True)
class RecoveredBatch:
    """A batch re-read from its segment file, indexed as its append indexed it
    (:class:`~storage_engine.segment.shard_index.IndexedBatch`). The header keeps no
    minimum deadline: 0 is a lower bound, enough for the figures to stay exact."""

    count: int
    last_delta: int
    first_timestamp: int
    min_timestamp: int
    max_timestamp: int
    max_expire_at: int
    min_expire_at: int
    has_unbounded: bool
    flags: int
    keys: list[tuple[int, bytes]] = field(default_factory=list)
    tags: list[tuple[int, str]] = field(default_factory=list)
    expires: list[tuple[int, int, int, int]] = field(default_factory=list)

    @classmethod
    def read(cls, h: BatchHeader, buf: bytes, off: int, *, path: str) -> RecoveredBatch:
        """The batch with header ``h`` at ``off`` of ``buf``; records are decoded only when
        the header says some carry a key, tags or a deadline."""
        batch = cls(
            count=h.record_count,
            last_delta=h.last_offset_delta,
            first_timestamp=h.first_timestamp,
            min_timestamp=h.min_timestamp,
            max_timestamp=h.max_timestamp,
            max_expire_at=h.max_expire_at,
            min_expire_at=0 if h.max_expire_at >= 0 else -1,
            has_unbounded=h.has_unbounded,
            flags=h.flags,
        )
        if h.flags & (FLAG_HAS_KEYS | FLAG_HAS_TAGS | FLAG_HAS_EXPIRE):
            for r in decode_records(buf, off, h, path=path):
                delta = r.offset - h.base_offset
                if r.key is not None:
                    batch.keys.append((delta, r.key))
                batch.tags.extend((delta, t) for t in r.tags)
                if r.expire_at is not None:
                    batch.expires.append((delta, r.expire_at, encoded_size(r), expire_flags(r)))
        return batch


RemoteFactory = Callable[[SegmentMeta], Segment]  # a segment served from the object store


def recover(
    directory: Path,
    index: ShardIndex,
    *,
    route: str,
    counters: Counters,
    interval_bytes: int,
    now: int,
    remote: RemoteFactory | None = None,
) -> Recovered:
    """Recover the shard whose segment files are in ``directory`` (see the module docstring)."""
    return LogRecovery(directory, index, route, counters, interval_bytes, now, remote).run()


def _fresh_meta(seg: Segment, now: int) -> SegmentMeta:
    """Empty metadata for a segment about to be re-indexed; where its bytes are is kept."""
    m = seg.meta
    return SegmentMeta(
        seg.base_offset,
        created_at=m.created_at,
        modified_at=now,
        state=m.state,
        tier=m.tier,
        tier_generation=m.tier_generation,
        stale_generation=m.stale_generation,
    )


@dataclass(slots=True)
class LogRecovery:
    """One run of recovery over one shard's directory and index part."""

    directory: Path
    index: ShardIndex
    route: str
    counters: Counters
    interval_bytes: int
    now: int
    remote: RemoteFactory | None = None
    segments: list[Segment] = field(default_factory=list)
    dropping: dict[int, Segment] = field(default_factory=dict)
    next_offset: int = 0
    failure: CorruptSegmentError | None = None
    reindex_all: bool = False  # a rewrite swap was finished: rebuild every index entry

    def run(self) -> Recovered:
        """The three steps of the module docstring, in order."""
        store = self.index.store
        prefix = self.index.prefix
        now = self.now
        wb = store.batch()
        metas = {m.base_offset: m for m in store.segments(prefix)}
        files: dict[int, Path] = {}
        for entry in sorted(os.scandir(self.directory), key=lambda e: e.name):
            base = parse_file_name(entry.name)
            if base is not None:
                files[base] = Path(entry.path)
            elif entry.name.endswith((".tmp", DELETED_SUFFIX, CLEANED_SUFFIX)):
                # A deleted file nobody can hold any more, or an unfinished rewrite.
                os.unlink(entry.path)
            elif entry.name.endswith(SUFFIX + SWAP_SUFFIX):
                # A complete rewrite whose swap was decided (see rewrite_segment): finish it,
                # then rebuild the shard's index from the files, which are the truth.
                target = Path(entry.path[: -len(SWAP_SUFFIX)])
                os.replace(entry.path, target)
                fsync_dir(self.directory)
                files[parse_file_name(target.name) or 0] = target
                self.reindex_all = True
                log.warning("%s: finished the interrupted swap of %s", self.route, target.name)
        remote: dict[int, Segment] = {}
        for base, m in metas.items():
            if m.tier is TierState.BOTH and base not in files and self.remote is not None:
                # Uploaded and verified, and its local copy is gone (removed by hand): serve it remotely.
                log.warning("%s: segment %d has no local file; serving it from the object store", self.route, base)
                m.tier = TierState.REMOTE
        for base in sorted(b for b, m in metas.items() if m.tier is TierState.REMOTE and self.remote is not None):
            assert self.remote is not None
            if base in files:  # the local copy's drop was interrupted after the metadata switched
                log.warning("%s: removing %s, offloaded and dropped locally", self.route, files[base].name)
                os.unlink(files.pop(base))
                fsync_dir(self.directory)
            remote[base] = self.remote(metas[base])
        for base in sorted(set(metas) - set(files) - set(remote)):
            log.warning("%s: segment %d has metadata but no file; dropping the metadata", self.route, base)
            store.delete_segment(wb, prefix, base)
            del metas[base]
        for base in sorted(b for b, m in metas.items() if m.state is SegmentState.DELETING):
            # A deletion began (the segment left the log) and was interrupted: open() finishes it.
            meta = metas.pop(base)
            self.dropping[base] = remote.pop(base) if base in remote else Segment.open(files.pop(base), meta)
        newest_known = max(metas, default=-1)
        for base in sorted(b for b in set(files) - set(metas) if b < newest_known):
            # Only the newest file can lack metadata legitimately (a roll just before a crash);
            # an older one is a deleted segment whose file was not renamed yet.
            log.warning("%s: removing %s, deleted before a crash", self.route, files[base].name)
            os.unlink(files.pop(base))
        cp = self.index.checkpoint
        local_metas = {b: m for b, m in metas.items() if b not in remote}
        if not files:  # never lose the end offset, even if every file is gone
            base = max([cp.next_offset, *(m.next_offset for m in metas.values())])
            meta = SegmentMeta(base, created_at=now, modified_at=now)
            self.segments = [*(remote[b] for b in sorted(remote)), Segment.create(self.directory, meta)]
            metas = dict(sorted((b, m) for b, m in metas.items() if b in remote))
        else:
            opened = {
                b: Segment.open(files[b], local_metas.get(b) or SegmentMeta(b, created_at=now, modified_at=now))
                for b in files
            }
            self.segments = [opened[b] if b in opened else remote[b] for b in sorted({*opened, *remote})]
            if self.segments[-1].base_offset in remote:  # the active file is gone: start one at the end
                end = max([cp.next_offset, *(m.next_offset for m in metas.values())])
                self.segments.append(Segment.create(self.directory, SegmentMeta(end, created_at=now, modified_at=now)))
        known = set(metas)

        # Step 2: verify every batch; find where the valid data ends.
        ends: list[int] = []  # end offset of each segment's valid data
        for i, seg in enumerate(self.segments):
            expected = seg.base_offset
            if seg.base_offset in remote:  # not downloaded: its object is checked by verify
                expected = seg.meta.next_offset
                if i and seg.base_offset < ends[-1]:
                    self.failure = CorruptSegmentError(
                        str(seg.path), 0, f"base offset {seg.base_offset} does not follow offset {ends[-1] - 1}"
                    )
                    log.error("%s: %s; the shard is unavailable until repaired", self.route, self.failure)
                    self.next_offset = max(cp.next_offset, expected)
                    return self._result()
                ends.append(expected)
                continue
            try:
                if i and (seg.base_offset < ends[-1] or (seg.base_offset > ends[-1] and seg.base_offset not in known)):
                    # Cannot follow from a crash (a roll fsyncs the full segment before
                    # creating the next file); handled like damage so offsets stay dense.
                    # A gap before a known segment is legal: a rewrite or a whole-segment
                    # drop removed records there.
                    raise CorruptSegmentError(
                        str(seg.path), 0, f"base offset {seg.base_offset} does not follow offset {ends[-1] - 1}"
                    )
                for _pos, h, _buf, _off in seg.iter_batches(0, seg.size):
                    if h.base_offset < expected:
                        raise CorruptSegmentError(str(seg.path), _pos, f"base offset {h.base_offset} < {expected}")
                    expected = h.next_offset
            except CorruptSegmentError as err:
                if seg.meta.state is not SegmentState.ACTIVE and i < len(self.segments) - 1:
                    log.error("%s: %s; the shard is unavailable until repaired", self.route, err)
                    self.failure = err
                    self.counters.add("corrupt_segments_total")
                    self.next_offset = max(cp.next_offset, expected)
                    return self._result()
                if self._truncate_tail(i, err, wb):
                    ends.append(expected)
                break
            ends.append(expected)
        self.next_offset = ends[-1]
        for seg in self.segments[:-1]:
            seg.meta.state = SegmentState.SEALED
        self.segments[-1].meta.state = SegmentState.ACTIVE

        # Step 3: re-index what the checkpoint does not cover.
        bases = [s.base_offset for s in self.segments]
        i = bisect.bisect_right(bases, cp.segment_base) - 1
        checkpoint_ok = (
            not self.reindex_all
            and cp.next_offset <= self.next_offset
            and i >= 0
            and bases[i] == cp.segment_base
            and cp.position <= self.segments[i].size
            and cp.next_offset >= self.segments[0].base_offset
        )
        if checkpoint_ok:
            start_index, start_pos = i, cp.position
            for seg in self.segments[i + 1 :]:  # never indexed: their metadata starts over
                seg.meta = _fresh_meta(seg, now)
        else:
            if self.reindex_all:
                self.counters.add("recovery_swaps_finished_total")
            elif cp.next_offset > self.next_offset:
                lost = cp.next_offset - self.next_offset
                log.warning("%s: index reaches offset %d but data ends at %d", self.route, cp.next_offset, ends[-1])
                self.counters.add("recovery_index_past_data_total", lost)
            self.index.reset(wb, self.segments[0].base_offset, self.segments[0].base_offset)
            for seg in self.segments:
                seg.meta = _fresh_meta(seg, now)
            start_index, start_pos = 0, 0
        self._reindex(wb, start_index, start_pos, now)
        return self._result()

    def _result(self) -> Recovered:
        return Recovered(self.segments, self.dropping, self.next_offset, self.failure)

    def _truncate_tail(self, i: int, err: CorruptSegmentError, wb: WriteBatch) -> bool:
        """Cut segment ``i`` at the damaged batch and delete every later segment (crash recovery).

        Segment ``i`` goes too when nothing of it is valid and it is not the
        first. Returns whether segment ``i`` is kept.
        """
        keep = err.position > 0 or i == 0
        first_dropped = i + 1 if keep else i
        lost = self.segments[i].size - err.position if keep else 0
        for later in self.segments[first_dropped:]:
            lost += later.size
            later.close()
            os.unlink(later.path)
            self.index.store.delete_segment(wb, self.index.prefix, later.base_offset)
        del self.segments[first_dropped:]
        log.warning("%s: torn tail: %s; truncating %d bytes", self.route, err, lost)
        if keep:
            self.segments[i].truncate(err.position)
        self.counters.add_many({"recovery_truncations_total": 1, "recovery_truncated_bytes_total": lost})
        return keep

    def _reindex(self, wb: WriteBatch, start_index: int, start_pos: int, now: int) -> None:
        """Index every batch from segment ``start_index`` at ``start_pos`` to the end, committing as it goes."""
        store = self.index.store
        pending = 0
        reindexed = 0
        for i in range(start_index, len(self.segments)):
            seg = self.segments[i]
            pos0 = start_pos if i == start_index else 0
            for pos, h, buf, off in seg.iter_batches(pos0, seg.size, verify=False):
                self._index_batch(wb, seg, pos, h, buf, off, now)
                pending += 1
                reindexed += 1
                if pending >= _REINDEX_COMMIT_EVERY:  # the checkpoint covers these segments now
                    self.index.commit(wb, [s.meta for s in self.segments[start_index : i + 1]])
                    store.write(wb)
                    wb = store.batch()
                    pending = 0
        cp = self.index.checkpoint
        if cp.next_offset < self.next_offset:
            # Dropped segments (an idle shard's sealed tail) left a gap before an empty active
            # segment: no batch moves the checkpoint there, so it goes to the end offset.
            cp.next_offset, cp.segment_base, cp.position = self.next_offset, self.segments[-1].base_offset, 0
        self.index.commit(wb, [s.meta for s in self.segments])  # states may have changed in step 2
        store.write(wb, sync=True)
        if reindexed:
            log.info("%s: re-indexed %d batches", self.route, reindexed)
            self.counters.add("recovery_reindexed_batches_total", reindexed)

    def _index_batch(
        self, wb: WriteBatch, seg: Segment, pos: int, h: BatchHeader, buf: bytes, off: int, now: int
    ) -> None:
        batch = RecoveredBatch.read(h, buf, off, path=str(seg.path))
        self.index.index_batch(
            wb,
            batch,
            seg.meta,
            base_offset=h.base_offset,
            length=h.length,
            position=pos,
            first_in_segment=pos == 0,
            interval_bytes=self.interval_bytes,
            now=now,
        )
