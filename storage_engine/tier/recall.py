"""The recall lifecycle operation (DESIGN §3 "Tiers"): local copies of offloaded segments brought
back from the object store, the inverse of dropping a local copy.

One call (:meth:`Recaller.recall`) is one bounded, resumable step, under the lifecycle lock (so no
retention, offload or cleaner changes a segment while it is downloaded; appends do not wait):

1. per shard, the candidates (:func:`~storage_engine.tier.rules.recall_candidates`): sealed
   segments only in the object store (tier ``remote``) that the policy keeps local — every one when
   ``remote_storage_enabled`` is off, else those local retention would keep if they were local
   again (so the next offload step does not drop them at once) — oldest first, at most ``limit``
   per call (default ``DEFAULT_RECALL_SEGMENTS``; ``more`` when it stopped the call);
2. room on disk: refused (:class:`RecallDiskError`) when disk use, the segments' sizes added,
   would pass ``disk_max_used_ratio`` (measured as the file cleaner measures it: pending
   ``.deleted`` files excluded; above it the cleaner drops local copies of segments also in the
   object store, so the recall would be undone) or ``disk_warning_ratio`` (appends refused). A
   step that recalled some segments before it ran out of room stops there with ``more``; the
   next one is refused;
3. per segment: its manifest is read and checked against the metadata
   (:func:`~storage_engine.tier.verify.manifest_mismatches`); the data object is downloaded
   (:func:`~storage_engine.tier.fetch.fetch_verified`: ranged GETs, hashed as they arrive)
   into ``<base>.log.recall.tmp`` in the shard's directory (truncating what an interrupted recall
   left there); its size and checksum must be the manifest's, else
   :class:`~storage_engine.tier.upload.TierVerifyError`; the file is fsynced, renamed to the
   segment's file name and the directory fsynced;
4. :meth:`~storage_engine.segment.tiered_log.TieredShardLog.finish_recall`: REMOTE → BOTH (one
   synced write under the shard's write lock), the file replaces the remote stand-in in the log,
   and the object's blocks leave the read cache.

Crash safety: before step 4's write the metadata says REMOTE, and opening the shard removes both
a ``.tmp`` file and a file of a REMOTE segment, so a crash anywhere leaves the segment remote and
readable; the next call downloads it again. Nothing in the object store changes. A failure
(store unreachable, a mismatch) removes the temporary file, leaves the segment remote, counts
``tier_recall_failures_total`` and raises; segments recalled before it in the same call stay
recalled.

A dry run downloads nothing and has no budget: it takes every candidate at once (``limit``
ignored) and stops only where the disk would refuse the next (refused itself when the first
would be), so it answers in one call with ``more`` false: what the real steps, repeated while
``more``, recall in sum. (A dry run that answered ``more`` would have its caller repeat the same
step on the same state forever, each time counting the same segments again.)
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage_engine.api import DiskStatus, LifecycleResult, SegmentInfo, SegmentTier
from storage_engine.errors import StorageError
from storage_engine.lifecycle.runtime import LifecycleRuntime
from storage_engine.policies.policy import NamespacePolicy, NodePolicy
from storage_engine.rules.cleaning import use_after_pending
from storage_engine.rules.validation import select_shards
from storage_engine.segment.datadir import fsync_dir
from storage_engine.segment.meta import SegmentMeta
from storage_engine.segment.tiered_log import TieredShardLog
from storage_engine.tier.context import ShardTier
from storage_engine.tier.fetch import fetch_verified
from storage_engine.tier.manifest import Manifest, ManifestError
from storage_engine.tier.rules import recall_candidates
from storage_engine.tier.verify import manifest_mismatches

log = logging.getLogger(__name__)

DEFAULT_RECALL_SEGMENTS = 16  # segments one recall call downloads at most (16 × 1 GiB ≈ 3 min at 100 MB/s)
OPERATION = "recall"
TMP_SUFFIX = ".recall.tmp"  # opening a shard removes every *.tmp file (storage_engine.segment.recovery)

TieredNamespaces = Callable[[str | None], list[tuple[str, NamespacePolicy, Sequence[TieredShardLog]]]]


class RecallDiskError(StorageError):
    """A recall would bring disk use above a node policy watermark (``field`` names it)."""

    code = "recall_disk_limit"

    def __init__(self, field: str, limit: float, used_ratio: float, after_ratio: float, size: int, why: str) -> None:
        self.field = field
        self.limit = limit
        self.used_ratio = round(used_ratio, 4)
        self.size = size
        self.rule = f"disk use after a recall must stay at or below {field} ({limit:.0%}): {why}"
        super().__init__(
            f"recall refused: {size} bytes would bring disk use from {used_ratio:.1%} to {after_ratio:.1%}, above "
            f"{field} {limit:.0%} ({why}); free disk, raise {field}, or recall less (limit, one shard)"
        )


def room_problem(status: DiskStatus, node: NodePolicy, nbytes: int) -> RecallDiskError | None:
    """Why ``nbytes`` more on disk are refused to a recall now, or ``None``."""
    capacity = status.capacity_bytes
    if capacity <= 0:
        return None
    raw = (status.used_bytes + nbytes) / capacity
    if raw > node.disk_warning_ratio:
        return RecallDiskError(
            "disk_warning_ratio", node.disk_warning_ratio, status.used_ratio, raw, nbytes, "appends would be refused"
        )
    now_ratio = use_after_pending(status)
    after = now_ratio + nbytes / capacity
    if after > node.disk_max_used_ratio:
        why = "the file cleaner would drop the recalled copies again"
        return RecallDiskError("disk_max_used_ratio", node.disk_max_used_ratio, now_ratio, after, nbytes, why)
    return None


def download(hooks: ShardTier, meta: SegmentMeta, target: Path) -> int:
    """Step 3 for ``meta`` (a REMOTE segment): its data object written to ``target`` (truncated
    first), checked against its manifest and fsynced; returns the bytes downloaded."""
    tier = hooks.tier
    manifest_key, key = hooks.manifest_key(meta), hooks.data_key(meta)
    manifest = Manifest.from_bytes(manifest_key, tier.get(manifest_key))
    mismatches = manifest_mismatches(hooks, meta, manifest)
    if mismatches:
        raise ManifestError(manifest_key, "; ".join(mismatches))
    pace = hooks.context.transfer_pace()  # gives way to appends between chunks, as uploads do

    def write(chunk: Any) -> None:
        f.write(chunk)
        pace()

    with open(target, "wb") as f:
        size = fetch_verified(tier, key, manifest, meta.size_bytes, write)
        f.flush()
        os.fsync(f.fileno())
    return size


@dataclass(slots=True)
class _Job:
    log: TieredShardLog
    hooks: ShardTier
    info: SegmentInfo
    namespace: str = ""  # whom the recall changes (LifecycleResult.namespaces_changed)


class Recaller:
    """The engine's recall step (one per ``segment`` engine)."""

    def __init__(self, rt: LifecycleRuntime, namespaces: TieredNamespaces) -> None:
        self._rt = rt
        self._namespaces = namespaces

    def recall(
        self, namespace: str | None, shard: int | None = None, limit: int | None = None, *, dry_run: bool = False
    ) -> LifecycleResult:
        rt = self._rt
        rt.check_limit(limit)
        t0 = time.perf_counter()
        named = self._namespaces(namespace)
        budget = None if dry_run else DEFAULT_RECALL_SEGMENTS if limit is None else limit
        totals: dict[str, Any] = {"segments_recalled": 0, "bytes_recalled": 0}
        with rt.ops:
            now = rt.clock.now_ms()
            jobs, held_back, more = self._choose(named, shard, budget, now, totals)
            if namespace is not None and not jobs and held_back:
                return rt.result(OPERATION, namespace, shard, t0, skipped="policy", **totals)
            status = rt.disk.check() if jobs else None
            node = rt.node_policy
            try:
                for job in jobs:
                    assert status is not None
                    problem = room_problem(status, node, totals["bytes_recalled"] + job.info.size_bytes)
                    if problem is not None:
                        if not totals["segments_recalled"]:
                            raise problem
                        more = not dry_run  # the next step is refused, saying why
                        break
                    if dry_run or self._recall_one(job):
                        totals["segments_recalled"] += 1
                        totals["bytes_recalled"] += job.info.size_bytes
                        totals.setdefault("namespaces_changed", set()).add(job.namespace)
            finally:
                if not dry_run:
                    rt.counters.add_many(
                        {
                            "tier_segments_recalled_total": totals["segments_recalled"],
                            "tier_bytes_recalled_total": totals["bytes_recalled"],
                        }
                    )
        return rt.result(OPERATION, namespace, shard, t0, more=more, **totals)

    @staticmethod
    def _choose(
        named: list[tuple[str, NamespacePolicy, Sequence[TieredShardLog]]],
        shard: int | None,
        budget: int | None,
        now: int,
        totals: dict[str, Any],
    ) -> tuple[list[_Job], int, bool]:
        """The step's segments (oldest first per shard, at most ``budget``: ``None`` for all), how
        many remote-only segments the policy keeps remote, and whether the budget left some out."""
        jobs: list[_Job] = []
        held_back = 0
        for name, policy, shards in named:
            for s in select_shards(name, shards, shard):
                hooks = s.tier
                if not isinstance(hooks, ShardTier):
                    continue
                segments = s.lifecycle_segments()
                totals["scanned"] = totals.get("scanned", 0) + len(segments)
                chosen = recall_candidates(segments, policy, now)
                held_back += sum(1 for x in segments[:-1] if x.tier is SegmentTier.REMOTE) - len(chosen)
                for info in chosen:
                    if budget is not None and len(jobs) >= budget:
                        return jobs, held_back, True
                    jobs.append(_Job(s, hooks, info, name))
        return jobs, held_back, False

    def _recall_one(self, job: _Job) -> bool:
        """Steps 3–4 for one segment; whether it is local again (``False``: it changed meanwhile)."""
        s, hooks, base = job.log, job.hooks, job.info.base_offset
        meta = s.remote_meta(base)
        if meta is None:
            return False
        final = s.recall_path(base)
        tmp = final.with_name(final.name + TMP_SUFFIX)
        try:
            size = download(hooks, meta, tmp)
            os.replace(tmp, final)
            fsync_dir(final.parent)
            if not s.finish_recall(base, meta.tier_generation, size):
                return False
        except Exception as exc:
            self._rt.counters.add("tier_recall_failures_total")
            log.warning("%s: recall of segment %d failed: %s", s.route, base, exc)
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        hooks.context.cache.forget(hooks.data_key(meta))
        return True
