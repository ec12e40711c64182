"""A shard's segment files for readers outside the node (:mod:`storage_engine.formats.segment_files`).

The one place that says which files of a data directory a reader may read, how many bytes of each,
and which records in them are dead: the node answers ``GET .../segment-files`` with it, and a
process that opens a stopped node's data directory itself (``spark_jobs --offline``) calls it on
its own engine, so both get the same answer. Only the ``segment`` adapter keeps records in files.
A segment in the object store (tiered storage) is listed with its tier and its data object's key.
"""

from __future__ import annotations

from dataclasses import replace

from storage_engine.api import SegmentState, SegmentTier, StorageAdapter
from storage_engine.errors import InvalidArgumentError
from storage_engine.formats.segment_files import LIST_SEALED, LIST_STATES, SegmentFileInfo, SegmentFilePage, dead_ranges


def segment_file_page(
    engine: StorageAdapter,
    namespace: str,
    shard: int,
    *,
    state: str = LIST_SEALED,
    dead: bool = True,
    after: int = -1,
    limit: int | None = None,
) -> SegmentFilePage:
    """The segment files of one shard with base offset above ``after``, at most ``limit`` of them.

    ``state`` ``"sealed"`` lists sealed segments only (the active one is never listed: it is still
    written); ``"all"`` adds the active segment with its committed size (the bytes readers may see:
    whole batches only). Segments and sizes come from one snapshot of the shard's log; a sealed
    segment rewritten afterwards has a new, smaller file (see
    :class:`~storage_engine.segment.segment.SegmentFileChangedError`). ``dead`` adds the offsets
    marked dead in each listed segment (read from the index store after the snapshot, so a rewrite
    in between can only have removed some of them from the file as well).

    Raises :class:`~storage_engine.errors.UnknownNamespaceError` / ``UnknownShardError``, and
    :class:`InvalidArgumentError` for a bad ``state`` or an adapter without segment files.
    """
    from storage_engine.adapters.segment import SegmentAdapter
    from storage_engine.segment.log import ShardLog
    from storage_engine.segment.segment import file_name
    from storage_engine.segment.tiered_log import TieredShardLog
    from storage_engine.tier.context import ShardTier

    if state not in LIST_STATES:
        raise InvalidArgumentError("state", f"must be one of {', '.join(LIST_STATES)}")
    if not isinstance(engine, SegmentAdapter):
        engine.get_namespace(namespace)  # an unknown namespace is a 404 on every adapter
        raise InvalidArgumentError(
            "adapter", f"the {engine.name!r} adapter keeps no segment files (only the 'segment' adapter does)"
        )
    log = engine._shard(namespace, shard)
    if not isinstance(log, ShardLog):  # never: the segment adapter's shards are logs of files
        raise InvalidArgumentError("adapter", f"shard {namespace}/{shard} keeps no segment files")
    root = engine.data_dir.root
    relative_dir = log.directory.relative_to(root).as_posix()
    found: list[SegmentFileInfo] = []
    more = False
    with log.reading() as view:
        last_index = len(view.segments) - 1
        for i, seg in enumerate(view.segments):
            active = i == last_index
            if seg.base_offset <= after or (active and state == LIST_SEALED):
                continue
            if limit is not None and len(found) == limit:
                more = True
                break
            meta = view.active_meta if active else seg.meta
            public = SegmentTier.LOCAL if active else meta.tier.public
            hooks = log.tier if isinstance(log, TieredShardLog) and public is not SegmentTier.LOCAL else None
            found.append(
                SegmentFileInfo(
                    namespace=namespace,
                    shard=shard,
                    base_offset=seg.base_offset,
                    last_offset=meta.last_offset,
                    file=f"{relative_dir}/{file_name(seg.base_offset)}",
                    size_bytes=view.active_size if active else seg.size,
                    state=SegmentState.ACTIVE if active else meta.state,
                    record_count=meta.record_count,
                    dead=None,
                    tier=public,
                    object_key=hooks.data_key(meta) if isinstance(hooks, ShardTier) else None,
                    tier_uri=hooks.tier.uri if isinstance(hooks, ShardTier) else None,
                )
            )
    if dead:
        store, prefix = log.index.store, log.index.prefix
        found = [
            replace(s, dead=dead_ranges(store.dead_offsets(prefix, s.base_offset, s.last_offset + 1)))
            if s.last_offset >= 0
            else replace(s, dead=())
            for s in found
        ]
    return SegmentFilePage(namespace, shard, tuple(found), found[-1].base_offset if more else None)
