"""RocketMQ file cleaning and disk watermarks (DESIGN §3), as small named predicates.

The node-level cleaner asks :func:`clean_trigger` whether this run may delete
at all, then walks each shard's sealed segments oldest first with
:func:`cleanable_prefix`. Hours come from the clock in UTC.

Files already renamed ``.deleted`` (retention, reclamation, an earlier run)
still occupy the disk until their ``file_delete_delay_ms`` passes. They are
gone already as far as the log is concerned, so they never justify deleting
more: above a watermark the cleaner purges them first
(:func:`purge_pending_first`), and its decisions measure the disk as it will
be once the ones still pending (held by a reader) are gone
(:func:`use_after_pending`). Without this, bytes retention had just freed
would make the next run force-delete live, unexpired segments.

With tiered storage (DESIGN §3 "Tiers") the cleaner offloads before it deletes, drops local
copies of segments already in the object store before anything that exists nowhere else
(:func:`local_copies_first`, :func:`clean_action`) and never counts a segment only in the object
store as freeing local disk (:func:`cleanable_prefix` passes over it).
"""

from __future__ import annotations

from collections.abc import Sequence

from storage_engine.api import DiskStatus, SegmentInfo, SegmentState, SegmentTier
from storage_engine.policies.policy import HOUR_MS, NodePolicy

DAY_HOURS = 24


def parse_hours(spec: str | None) -> frozenset[int]:
    """Hours of a ``;`` list (``"04"``, ``"03;04"``) with ranges (``"01-05"``, ``"22-02"`` wraps)."""
    hours: set[int] = set()
    if not spec:
        return frozenset()
    for part in spec.split(";"):
        bounds = [int(h) for h in part.strip().split("-")]
        start, end = bounds[0], bounds[-1]
        h = start
        while True:
            hours.add(h)
            if h == end:
                break
            h = (h + 1) % DAY_HOURS
    return frozenset(hours)


def hour_of(now_ms: int) -> int:
    """The hour of day (UTC) of a clock reading."""
    return (now_ms // HOUR_MS) % DAY_HOURS


def in_delete_hours(now_ms: int, policy: NodePolicy) -> bool:
    """The hour is one of ``delete_when``: scheduled deletion of expired files may run."""
    return hour_of(now_ms) in parse_hours(policy.delete_when)


def in_off_peak(now_ms: int, policy: NodePolicy) -> bool:
    """Non-urgent scans and rewrites may run now (always, without ``off_peak_hours``)."""
    return policy.off_peak_hours is None or hour_of(now_ms) in parse_hours(policy.off_peak_hours)


def file_expired(segment: SegmentInfo, policy: NodePolicy, now_ms: int) -> bool:
    """Last written at least ``file_reserved_ms`` ago (RocketMQ's ``fileReservedTime``)."""
    return now_ms - segment.modified_at >= policy.file_reserved_ms


def disk_status(used: int, capacity: int, policy: NodePolicy, source: str, pending: int = 0) -> DiskStatus:
    """The watermark flags of a measurement (strict: above each ratio).

    ``pending`` is the bytes of ``.deleted`` files waiting for removal, part of
    ``used``. The flags say where the disk is now; the cleaner's decisions use
    :func:`use_after_pending` instead.
    """
    ratio = used / capacity if capacity > 0 else 0.0
    return DiskStatus(
        used_bytes=used,
        capacity_bytes=capacity,
        used_ratio=ratio,
        source=source,
        over_max_used=ratio > policy.disk_max_used_ratio,
        clean_forcibly=ratio > policy.disk_clean_forcibly_ratio,
        disk_full=ratio > policy.disk_warning_ratio,
        pending_delete_bytes=pending,
    )


def use_after_pending(status: DiskStatus) -> float:
    """The used ratio once every pending ``.deleted`` file is removed (what cleaning decides on)."""
    if status.capacity_bytes <= 0:
        return 0.0
    return max(0, status.used_bytes - status.pending_delete_bytes) / status.capacity_bytes


def purge_pending_first(status: DiskStatus) -> bool:
    """Above the lowest cleaning watermark with ``.deleted`` files waiting: remove those
    before anything else (regardless of their delay; a reader still holding one keeps it
    until released or ``destroy_forcibly_after_ms``)."""
    return status.over_max_used and status.pending_delete_bytes > 0


def forced_cleaning(status: DiskStatus, policy: NodePolicy) -> bool:
    """Above ``disk_clean_forcibly_ratio`` (and allowed), unexpired files go too.

    Measured without pending ``.deleted`` files: they go anyway, so they must not
    make the cleaner force-delete a live segment.
    """
    return policy.clean_forcibly_enabled and use_after_pending(status) > policy.disk_clean_forcibly_ratio


def cleaning_pressure(status: DiskStatus, policy: NodePolicy) -> bool:
    """Above ``disk_max_used_ratio`` without pending ``.deleted`` files: expired files go at any hour."""
    return use_after_pending(status) > policy.disk_max_used_ratio


def clean_trigger(now_ms: int, status: DiskStatus, policy: NodePolicy, manual: bool) -> str | None:
    """Why this cleaner run may delete (``"manual"``, ``"forced"``, ``"disk"``, ``"schedule"``), or ``None``."""
    if manual:
        return "manual"
    if forced_cleaning(status, policy):
        return "forced"
    if cleaning_pressure(status, policy):
        return "disk"
    if in_delete_hours(now_ms, policy):
        return "schedule"
    return None


def cleanable_prefix(
    segments: Sequence[SegmentInfo], policy: NodePolicy, now_ms: int, forced: bool
) -> list[SegmentInfo]:
    """The sealed segments (oldest first) this run may delete in one shard.

    Never the active segment; stops at the first segment that does not
    qualify (expired, or anything sealed when ``forced``). Segments only in the object store
    (tier ``remote``) are passed over: they hold no local disk, so removing them frees nothing
    here (retention and TTL delete them).
    """
    out: list[SegmentInfo] = []
    for segment in segments:
        if segment.state is not SegmentState.SEALED:
            break
        if segment.tier is SegmentTier.REMOTE:
            continue
        if not (forced or file_expired(segment, policy, now_ms)):
            break
        out.append(segment)
    return out


# What the cleaner does with a candidate segment (tiered storage, DESIGN §3 "Tiers").
DROP_LOCAL = "drop_local"  # the segment is in the object store too: only its local copy goes
DELETE = "delete"  # the segment goes whole (its objects too, if any)


def clean_action(segment: SegmentInfo, policy: NodePolicy, now_ms: int, *, forced: bool, tiered: bool) -> str | None:
    """What the cleaner may do with ``segment`` (a sealed one of :func:`cleanable_prefix`), or ``None``:
    stop this shard's walk.

    - in the object store too (``both``): drop its local copy when its file is expired or cleaning
      is forced — the data stays readable, so this is always preferred to deleting it;
    - local only, in a namespace with remote storage (``tiered``): it exists nowhere else, so it is
      deleted only by forced cleaning (the cleaner offloads such segments first);
    - local only otherwise: deleted when its file is expired or cleaning is forced (as before tiers).
    """
    expired = file_expired(segment, policy, now_ms)
    if segment.tier is SegmentTier.BOTH:
        return DROP_LOCAL if expired or forced else None
    if tiered:
        return DELETE if forced else None
    return DELETE if expired or forced else None


def local_copies_first(status: DiskStatus, policy: NodePolicy) -> bool:
    """Above ``disk_clean_forcibly_ratio`` (pending ``.deleted`` files excluded): local copies of
    segments already in the object store go before anything that exists nowhere else, whether or
    not forced cleaning is enabled (dropping them loses nothing)."""
    return use_after_pending(status) > policy.disk_clean_forcibly_ratio
