"""What the lifecycle calls of the contract answer (:mod:`storage_engine.api`): a step's
:class:`LifecycleResult`, a compaction's :class:`CompactionEstimate`, the node's :class:`NextDue`,
and which of their counts add up over steps, namespaces and runs.

Plain ints, floats and strings, so they serialise to JSON as they are; the node sends them field
by field, the client and the control plane rebuild and sum them. Each figure is defined once, here
(re-exported by :mod:`storage_engine.model`, where the other typed objects live).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

# The counts of a LifecycleResult that add up over steps, namespaces or runs (jobs, sweeps, task runs).
LIFECYCLE_COUNTS = (
    "scanned",
    "expired_records",
    "index_entries_deleted",
    "segments_deleted",
    "segments_rewritten",
    "records_removed",
    "bytes_reclaimed",
    "files_removed",
    "forced_deletes",
    "rolled",
)
# The further counts of a compaction result that add up the same way.
COMPACTION_COUNTS = ("records_written", "bytes_before", "bytes_after", "rounds")
# The further counts of an offload result (tiered storage) that add up the same way.
OFFLOAD_COUNTS = ("segments_offloaded", "bytes_offloaded", "local_copies_dropped", "local_bytes_dropped")
# The further counts of a recall result (tiered storage) that add up the same way.
RECALL_COUNTS = ("segments_recalled", "bytes_recalled")
# The further counts of a subscription step (message TTL, backlog-quota eviction) that add up the same way.
SUBSCRIPTION_COUNTS = ("cursors_moved", "messages_acknowledged")
# The counts that say a step changed data (records expired or removed, segments deleted, rewritten or moved
# between tiers, cursors moved): the summing counts but the ones that only look (scanned) or seal (rolled).
CHANGE_COUNTS = (
    *(name for name in LIFECYCLE_COUNTS if name not in ("scanned", "rolled")),
    "segments_offloaded",
    "local_copies_dropped",
    "segments_recalled",
    "cursors_moved",
)


@dataclass(frozen=True, slots=True)
class LifecycleResult:
    """What one bounded lifecycle call did (every lifecycle call returns one).

    Plain ints, floats and strings only, so it serialises to JSON as is
    (:meth:`to_dict`). ``more`` is true when the call stopped at its limit
    (``limit``, ``max_delete_per_scan``, ``delete_batch_max``, a pacing
    budget) with work left: call again. ``skipped`` names why nothing was
    attempted (``"off_peak"``, ``"not_due"``, ``"policy"``), else ``None``.

    - ``scanned``: TTL-index entries, records or segments examined;
    - ``expired_records``: records newly marked dead (layer 2 and read checks);
    - ``index_entries_deleted``: key, tag and TTL index entries deleted;
    - ``segments_deleted`` / ``segments_rewritten``: whole segments dropped /
      rewritten without their dead records; ``records_removed`` the records
      that left the store through either;
    - ``bytes_reclaimed``: the bytes the call actually freed, for every call
      that deletes (retention, reclamation, file cleaning, the deadline-driven
      sweeps): what its drops and rewrites took out of the store, minus what
      is still on disk as ``.deleted`` files (``file_delete_delay_ms``, or held
      by a reader), plus the ``.deleted`` files of earlier calls it removed
      (a file's bytes count as freed by the call that removes it, once);
      stores without files free what they drop at once;
      ``pending_delete_bytes``: the bytes of the ``.deleted`` files of the
      shards the call worked on (the node's, for file cleaning) still on disk
      after it (:func:`storage_engine.rules.work.count_freed`; a dry run: what the
      real call would leave);
    - ``files_removed``: ``.deleted`` files removed for good by this call;
    - ``forced_deletes``: segments deleted by disk pressure although not expired;
    - ``rolled``: active segments sealed by this call, so that what they hold
      could be treated as sealed: an idle one (see the lifecycle calls of
      :class:`StorageAdapter`), or, for retention, one rolled so every old
      segment could go; ``log_start_offset``: the shard's new log start when one
      shard was named, else ``None``;
    - compaction: ``scanned`` counts records read, ``records_written`` the
      records kept in rewritten segments, ``bytes_before`` / ``bytes_after``
      the stored bytes of the shards before and after (estimated by a dry
      run), ``rounds`` the key-map rounds (one per map fill);
    - offload (tiered storage): ``segments_offloaded`` / ``bytes_offloaded`` the
      sealed segments uploaded and verified by the call and their bytes,
      ``local_copies_dropped`` / ``local_bytes_dropped`` the local files of
      offloaded segments removed past local retention;
    - recall (tiered storage): ``segments_recalled`` / ``bytes_recalled`` the offloaded segments
      whose local copies were downloaded, verified and made local again (a dry run: would be);
    - subscriptions (message TTL ``expire_subscriptions``, backlog-quota eviction
      ``enforce_backlog_quota``): ``cursors_moved`` the subscription cursors (one per
      subscription and shard) the call moved forward, each counted once however far or how often
      it moved; ``messages_acknowledged`` the stored offsets those moves acknowledged on the
      consumers' behalf (from the first unacknowledged offset, never below the log start, up to the
      new cursor), i.e. the backlog messages they skipped. Nothing is deleted or marked dead by a
      cursor move, so ``expired_records`` stays 0 for these calls.

    A dry run (``dry_run=True``) reports every one of these figures as what the real call, repeated
    while ``more``, would then report, summed (DESIGN §3 "Dry runs").

    ``namespaces_changed``: the namespaces the call changed (a dry run: would change), sorted, so a
    node-wide sweep says whom its counts belong to. A namespace changed when one of
    :attr:`CHANGE_COUNTS` is above 0 for it (records expired or removed, segments deleted, rewritten or
    moved between tiers, files removed, cursors moved; scanning and rolling alone change nothing). A call
    on one namespace names it by itself (``__post_init__``); the node-wide expiry scan, the sweeps over
    every namespace, the deadline-driven sweeps, offload and recall collect the names of theirs. Node-wide
    file cleaning (a node-level operation) leaves it empty.
    """

    operation: str
    namespace: str | None = None
    shard: int | None = None
    scanned: int = 0
    expired_records: int = 0
    index_entries_deleted: int = 0
    segments_deleted: int = 0
    segments_rewritten: int = 0
    records_removed: int = 0
    bytes_reclaimed: int = 0
    files_removed: int = 0
    forced_deletes: int = 0
    rolled: int = 0
    duration_ms: float = 0.0
    more: bool = False
    skipped: str | None = None
    log_start_offset: int | None = None
    records_written: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    rounds: int = 0
    pending_delete_bytes: int = 0
    segments_offloaded: int = 0
    bytes_offloaded: int = 0
    local_copies_dropped: int = 0
    local_bytes_dropped: int = 0
    segments_recalled: int = 0
    bytes_recalled: int = 0
    cursors_moved: int = 0
    messages_acknowledged: int = 0
    namespaces_changed: tuple[str, ...] = ()

    CHANGE_COUNTS: ClassVar[tuple[str, ...]] = CHANGE_COUNTS

    def __post_init__(self) -> None:
        # One shape whatever the caller passed (a set of a sweep, a JSON list of a node's answer), and a call on
        # one namespace names it when it changed it, so only node-wide sweeps collect names themselves.
        changed = set(self.namespaces_changed)
        if self.namespace is not None and any(getattr(self, name) for name in self.CHANGE_COUNTS):
            changed.add(self.namespace)
        object.__setattr__(self, "namespaces_changed", tuple(sorted(changed)))

    def to_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class CompactionEstimate:
    """What compaction would do with the data stored now (a dry run; nothing changes): the
    stored bytes before and after, what it would reclaim and remove, and its key-map rounds.
    The active segment counts as the sealed segment it becomes when it rolls (the idle-segment
    rule or an append rolls it, and compaction then cleans it), so that data waiting in it is
    not left out; ``active_records_removable`` / ``active_bytes_reclaimable`` are the part of
    ``records_removable`` / ``reclaimable_bytes`` that waits for that roll (records in the active
    segment, and older ones only its keys supersede): the rest is exactly what a manual
    :meth:`StorageAdapter.compact` removes now. Estimates of several shards or nodes add up
    (``+``); ``shard`` is ``None`` for a sum."""

    namespace: str
    shard: int | None = None
    bytes_before: int = 0
    bytes_after: int = 0
    reclaimable_bytes: int = 0
    records_removable: int = 0
    rounds: int = 0
    active_records_removable: int = 0
    active_bytes_reclaimable: int = 0

    def __add__(self, other: CompactionEstimate) -> CompactionEstimate:
        counts = [f.name for f in fields(self) if f.name not in ("namespace", "shard")]  # every figure adds up
        summed = {name: getattr(self, name) + getattr(other, name) for name in counts}
        return CompactionEstimate(namespace=self.namespace, shard=None, **summed)

    def to_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class NextDue:
    """When each kind of node-wide lifecycle sweep next has work (:meth:`StorageAdapter.next_due`).

    ``due`` maps ``expire-scan``, ``reclaim`` and ``retention`` to the earliest due time in ms
    (at or before ``now``: due now; ``None``: nothing stored makes it due); ``shards`` is how
    many shards were looked at and ``recomputed`` how many of them had their sealed segments
    read again (changed since the previous call).
    """

    now: int
    due: dict[str, int | None]
    shards: int = 0
    recomputed: int = 0
    duration_ms: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}
