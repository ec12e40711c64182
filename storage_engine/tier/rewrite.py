"""Rewriting a segment that is in the object store (*both* or *remote*): reclamation and key
compaction (DESIGN §3 "Tiers": compaction applies to the whole log) download, rewrite and upload
it under a new generation before the catalog swaps it in.

:func:`rewrite_offloaded` (called by :meth:`TieredShardLog.rewrite_segment
<storage_engine.segment.tiered_log.TieredShardLog.rewrite_segment>` as the log's ``rewriter``, which
the ``segment`` adapter gives every shard; under the lifecycle lock, so
no offload, recall or other rewrite runs meanwhile), for segment ``base`` under generation ``g0``:

0. **Leftovers first**: the stale generations of the shard's segments (earlier crashes, or old
   objects a reader still held) are deleted (:func:`clean_stale`). A store that cannot be reached
   fails the rewrite here with :class:`~storage_engine.errors.TierError`, before anything
   changed.
1. **Rewrite locally**: the shared first step (:meth:`~storage_engine.segment.log.ShardLog.stage_rewrite`)
   writes ``<base>.log.cleaned`` in the shard's directory from the segment's bytes, its local file
   (*both*) or its objects through the read cache (*remote*). Nothing removed: done; nothing left:
   the segment is deleted whole (its objects with it, as retention does).
   *Crash*: opening the shard removes the ``.cleaned`` file; nothing else changed.
2. **Intent**: the segment's metadata records a fresh generation ``g1`` as its
   ``stale_generation`` (one synced write, :meth:`~storage_engine.segment.tiered_log.TieredShardLog.begin_rewrite`)
   before any byte is uploaded under it.
   *Crash from here to 4*: the segment is still the old one (``g0``, its objects intact); open
   removes the ``.cleaned`` file; whatever was uploaded under ``g1`` is named by the metadata, so
   ``verify`` accepts it and the next tier step (an offload step or a rewrite of the shard,
   :func:`clean_stale`) deletes it and clears the field. No listing of the store is needed.
3. **Upload and verify** the ``.cleaned`` file and its manifest under ``g1``
   (:func:`~storage_engine.tier.upload.upload_segment`, the offload's code: multipart upload
   hashed as read, size and ETag or read-back checks, manifest read back). A failure removes the
   ``.cleaned`` file, tries to delete what ``g1`` holds, and raises: nothing was deleted, the old
   segment stays in the log.
4. **Swap** (the shared swap, :meth:`~storage_engine.segment.log.ShardLog.swap_rewritten`, via
   :meth:`~storage_engine.segment.tiered_log.TieredShardLog.swap_offloaded_rewrite`): one synced
   WriteBatch with the new sparse offsets, the removed records' index deletions and the metadata
   *remote* under ``g1`` with ``g0`` stale — the decision; then the ``.cleaned`` file replaces
   ``<base>.log`` and a second synced write says *both*.
   *Crash after the WriteBatch, before the second write*: the local ``<base>.log`` (the old
   file, or the new one) belongs to a *remote* segment, so opening the shard removes it
   (:mod:`storage_engine.segment.recovery`) and the segment is read from its ``g1`` objects,
   which the index's new positions describe; the next offload may drop the local copy of a
   *both* segment as usual (:mod:`storage_engine.tier.rules`).
5. **Old objects**: ``g0``'s manifest, then its data object, are deleted, and the stale field
   cleared (one synced write) — unless the old segment was served from the store and a reader
   still holds it (kept in ``ShardTier.retired``: the first step after it lets go deletes them),
   or the store fails now: then the next step deletes them.
   *Crash during 5*: ``g0`` is still the stale generation; ``verify`` accepts its (partial)
   objects and the next step finishes.

So after a crash anywhere, the log holds either the old segment (``g0``) or the new one (``g1``),
with every record once; objects of the other generation are either gone or named as stale.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from storage_engine.errors import TierError
from storage_engine.lifecycle import Removal, ShardWork
from storage_engine.segment.meta import TierState
from storage_engine.segment.segment import Segment
from storage_engine.segment.tiered_log import TieredShardLog
from storage_engine.tier.context import ShardTier
from storage_engine.tier.layout import new_generation
from storage_engine.tier.upload import upload_segment

log = logging.getLogger(__name__)


def clean_stale(tlog: TieredShardLog, shard: ShardTier) -> int:
    """Delete the objects of every stale generation of the shard's live segments (manifest, then
    data; missing ones are fine), forgetting each generation once its objects are gone; how many
    were. Raises :class:`~storage_engine.errors.TierError` (what is left stays for the next step)."""
    done = 0
    for meta in tlog.stale_metas():
        held = shard.retired.get((meta.base_offset, meta.stale_generation))
        if held is not None and held.refs > 0:
            continue  # a reader still reads the replaced segment from these objects
        shard.retired.pop((meta.base_offset, meta.stale_generation), None)
        shard.delete_objects(replace(meta, tier_generation=meta.stale_generation))
        done += tlog.clear_stale(meta.base_offset, meta.stale_generation)
    return done


def rewrite_offloaded(tlog: TieredShardLog, base: int, now: int, remove: Removal) -> ShardWork:
    """Steps 0–5 of the module docstring for the live segment ``base`` (*both* or *remote*): the
    log's ``rewriter`` (:data:`~storage_engine.segment.tiered_log.OffloadedRewrite`)."""
    shard = tlog.tier
    if not isinstance(shard, ShardTier):
        return ShardWork()
    clean_stale(tlog, shard)
    staged = tlog.stage_rewrite(base, now, remove)
    if isinstance(staged, ShardWork):
        return staged
    seg, rewrite = staged
    generation = new_generation()
    try:
        if tlog.begin_rewrite(base, generation) is None:  # no longer such a segment
            rewrite.path.unlink(missing_ok=True)
            return rewrite.work
        target = replace(rewrite.meta, tier=TierState.BOTH, tier_generation=generation, stale_generation=0)
        source = Segment.open(rewrite.path, target)
        try:
            sparse = rewrite.sparse
            index = tuple((int(sparse[j]), int(sparse[j + 1])) for j in range(0, len(sparse), 2))
            pace = shard.context.transfer_pace()  # gives way to appends, as an offload's upload does
            upload_segment(shard, tlog, target, now, source=source, offset_index=index, pace=pace)
        finally:
            source.close()
    except Exception:
        rewrite.path.unlink(missing_ok=True)
        try:  # what the failed upload left under the new generation (else: the next step)
            clean_stale(tlog, shard)
        except TierError as exc:
            log.warning("%s: objects of an abandoned rewrite of segment %d stay for now: %s", tlog.route, base, exc)
        raise
    old_generation = seg.meta.tier_generation
    work = tlog.swap_offloaded_rewrite(seg, rewrite, generation)
    if not seg.local and seg.refs > 0:  # a reader still reads the old objects: a later step deletes them
        shard.retired[(base, old_generation)] = seg
    else:
        try:
            shard.delete_objects(replace(seg.meta, tier_generation=old_generation))
            tlog.clear_stale(base, old_generation)
        except TierError as exc:
            log.warning("%s: old objects of rewritten segment %d stay for the next step: %s", tlog.route, base, exc)
    return work
