"""Lifecycle policies: every field, its built-in default and its rule, in one place.

Two policies exist (DESIGN §3):

- :class:`NamespacePolicy`: per namespace (expiry, retention, segment rolling,
  compaction, subscriptions and backlog quotas, tiered storage);
- :class:`NodePolicy`: per storage node (file cleaning, disk watermarks, pacing, the tier cache).

Durations are milliseconds and sizes are bytes; ``None`` means "infinite /
unset". Policies inherit built-in defaults → cluster default → namespace
overrides; :func:`resolve_policy` merges the layers and says where each
effective value came from. The control plane imports this module for its
defaults and validation so that the node and Django never disagree.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from storage_engine.errors import PolicyValidationError
from storage_engine.policies.bounds import MAX_INT64, MIN_INT64, finite_number, int_ok, int_rule, range_rule, unit_of
from storage_engine.policies.keymap_size import MIN_MAP_BUDGET_BYTES

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
MiB = 1 << 20
GiB = 1 << 30

CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
BACKLOG_QUOTA_POLICIES = ("producer_request_hold", "producer_exception", "consumer_backlog_eviction")


@dataclass(frozen=True)
class NamespacePolicy:
    # Expiry (TTL, three layers)
    ttl_ms: int | None = None
    read_time_check: bool = True
    read_check_queue_size: int = 10_000
    scan_batch_size: int = 1_000
    max_delete_per_scan: int = 100_000
    scan_interval_ms: int = 60_000
    reclaim_dead_ratio: float = 0.5
    # Retention (Kafka)
    cleanup_policy: str = "delete"
    retention_ms: int | None = 7 * DAY_MS
    retention_bytes: int | None = None
    segment_bytes: int = GiB
    segment_ms: int = 7 * DAY_MS
    segment_expired_roll_ratio: float | None = 0.5
    index_interval_bytes: int = 4096
    max_record_bytes: int = MiB
    # Compaction
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int | None = None
    delete_retention_ms: int = DAY_MS
    compaction_check_interval_ms: int = 5 * 60_000
    # Subscriptions and backlog (Pulsar)
    ttl_check_interval_ms: int = 5 * 60_000
    backlog_quota_bytes: int | None = None
    backlog_quota_seconds: int | None = None
    backlog_quota_policy: str = "producer_request_hold"
    backlog_hold_timeout_ms: int = 30_000
    retention_respects_subscriptions: bool = False
    # Tiered storage (Kafka's remote.storage.enable, local.retention.*): what stays on local disk
    # while retention_ms / retention_bytes, TTL and compaction apply to the whole log across tiers.
    # None: as much as the total retention (the local copy goes when the segment goes).
    remote_storage_enabled: bool = False
    local_retention_ms: int | None = None
    local_retention_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def deletes(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compacts(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")


@dataclass(frozen=True)
class NodePolicy:
    clean_interval_ms: int = 10_000
    file_reserved_ms: int = 72 * HOUR_MS
    delete_when: str = "04"
    delete_interval_ms: int = 100
    delete_batch_max: int = 10
    destroy_forcibly_after_ms: int = 120_000
    file_delete_delay_ms: int = 60_000
    disk_max_used_ratio: float = 0.75
    disk_clean_forcibly_ratio: float = 0.85
    disk_warning_ratio: float = 0.90
    clean_forcibly_enabled: bool = True
    delete_rate_per_s: int | None = None
    reclaim_bytes_per_s: int | None = None
    off_peak_hours: str | None = None
    urgent_expired_ratio: float = 0.5
    compaction_map_budget_bytes: int = 64 * MiB
    # Tiered storage: the on-disk cache of ranged reads of offloaded segments, and the offloader's pacing.
    tier_cache_bytes: int = 256 * MiB
    offload_bandwidth_bytes_per_s: int | None = None
    offload_concurrency: int = 2

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


P = TypeVar("P", NamespacePolicy, NodePolicy)

# field → (minimum, maximum) for integers and ratios; None = no bound on that side.
_BOUNDS: dict[str, tuple[float | None, float | None]] = {
    "ttl_ms": (1, None),
    "read_check_queue_size": (1, 10_000_000),
    "scan_batch_size": (1, 1_000_000),
    "max_delete_per_scan": (1, None),
    "scan_interval_ms": (1_000, None),
    "reclaim_dead_ratio": (0.0, 1.0),
    "retention_ms": (0, None),  # 0 is Kafka's "every sealed segment is eligible at once"
    "retention_bytes": (1, None),
    "segment_bytes": (1024, 16 * GiB),
    "segment_ms": (1, None),
    "segment_expired_roll_ratio": (0.0, 1.0),  # and > 0 (validate_namespace_policy)
    "index_interval_bytes": (1, 64 * MiB),
    "max_record_bytes": (1, 64 * MiB),
    "min_cleanable_dirty_ratio": (0.0, 1.0),
    "min_compaction_lag_ms": (0, None),
    "max_compaction_lag_ms": (0, None),
    "delete_retention_ms": (0, None),
    "compaction_check_interval_ms": (1_000, None),
    "ttl_check_interval_ms": (1_000, None),
    "backlog_quota_bytes": (1, None),
    "backlog_quota_seconds": (1, None),
    "backlog_hold_timeout_ms": (0, 600_000),
    "clean_interval_ms": (100, None),
    "file_reserved_ms": (0, None),
    "delete_interval_ms": (0, 60_000),
    "delete_batch_max": (1, 100_000),
    "destroy_forcibly_after_ms": (0, None),
    "file_delete_delay_ms": (0, None),
    "disk_max_used_ratio": (0.0, 1.0),
    "disk_clean_forcibly_ratio": (0.0, 1.0),
    "disk_warning_ratio": (0.0, 1.0),
    "delete_rate_per_s": (1, None),
    "reclaim_bytes_per_s": (1, None),
    "urgent_expired_ratio": (0.0, 1.0),
    "compaction_map_budget_bytes": (MIN_MAP_BUDGET_BYTES, None),  # the smallest key map compaction can honour
    "local_retention_ms": (0, None),
    "local_retention_bytes": (1, None),
    "tier_cache_bytes": (MiB, None),  # at least one cache block (storage_engine.tier.remote_reads)
    "offload_bandwidth_bytes_per_s": (1, None),
    "offload_concurrency": (1, 64),
}


def _check_field(name: str, value: Any, default: Any, errors: dict[str, str]) -> None:
    info = FIELDS[name]
    if value is None:
        if not info.nullable:
            errors[name] = "is required (null is not allowed)"
        return
    expected: type = type(default) if default is not None else (str if info.unit == "hours" else int)
    if expected is bool:
        if not isinstance(value, bool):
            errors[name] = "must be true or false"
        return
    if expected is str:
        if not isinstance(value, str):
            errors[name] = "must be a string"
        return
    # Numbers: a bool is not one; NaN and ±Infinity compare false with every bound (they would
    # pass) and a stored one breaks every later JSON answer; past 64 bits nothing can store it.
    # The texts (bounds in digits, the unit from the field's name) are storage_engine.policies.bounds'.
    low, high = _BOUNDS.get(name, (None, None))
    if expected is int and not int_ok(value):
        errors[name] = int_rule(MIN_INT64 if low is None else int(low), MAX_INT64 if high is None else int(high), name)
        return
    if not finite_number(value):
        errors[name] = "must be a finite number" + (" from 0 to 1" if unit_of(name) == "ratio" else "")
        return
    if (low is not None and value < low) or value > (high if high is not None else MAX_INT64):
        errors[name] = range_rule(name, low, high)


_HOUR = re.compile(r"[0-9]{1,2}")  # ASCII: str.isdigit() takes "²", which int() then refuses


def _check_hours(name: str, value: object, errors: dict[str, str]) -> None:
    if not isinstance(value, str) or name in errors:  # null, or the type is already reported
        return
    for part in value.split(";"):
        part = part.strip()
        hours = part.split("-") if name == "off_peak_hours" else [part]
        if not part or len(hours) > 2 or not all(_HOUR.fullmatch(h) and int(h) <= 23 for h in hours):
            rule = "a ';' list of hours 00-23" + (" or ranges like 01-05" if name == "off_peak_hours" else "")
            shown = value if len(value) <= 40 else value[:40] + "…"
            errors[name] = f"must be {rule}; got {shown!r}"
            return


def validate_namespace_policy(p: NamespacePolicy) -> None:
    """Raise :class:`PolicyValidationError` naming every field that breaks a rule."""
    errors: dict[str, str] = {}
    defaults = NamespacePolicy()
    for f in fields(p):
        _check_field(f.name, getattr(p, f.name), getattr(defaults, f.name), errors)
    if "cleanup_policy" not in errors and p.cleanup_policy not in CLEANUP_POLICIES:
        errors["cleanup_policy"] = f"must be one of {', '.join(CLEANUP_POLICIES)}"
    if "segment_expired_roll_ratio" not in errors and p.segment_expired_roll_ratio == 0:
        errors["segment_expired_roll_ratio"] = "must be > 0 (null turns the rule off)"
    if "backlog_quota_policy" not in errors and p.backlog_quota_policy not in BACKLOG_QUOTA_POLICIES:
        errors["backlog_quota_policy"] = f"must be one of {', '.join(BACKLOG_QUOTA_POLICIES)}"
    if not errors:
        if p.max_compaction_lag_ms is not None and p.min_compaction_lag_ms > p.max_compaction_lag_ms:
            errors["min_compaction_lag_ms"] = "must be ≤ max_compaction_lag_ms"
        if (
            p.backlog_quota_seconds is not None
            and p.retention_ms is not None
            and (p.retention_ms <= p.backlog_quota_seconds * 1000)
        ):
            errors["retention_ms"] = "must exceed the backlog quota (backlog_quota_seconds × 1000)"
        if (
            p.backlog_quota_bytes is not None
            and p.retention_bytes is not None
            and (p.retention_bytes <= p.backlog_quota_bytes)
        ):
            errors["retention_bytes"] = "must exceed the backlog quota (backlog_quota_bytes)"
        _check_local_retention(p, errors)
    if errors:
        raise PolicyValidationError(errors)


def _check_local_retention(p: NamespacePolicy, errors: dict[str, str]) -> None:
    """Local retention never exceeds the total (``None`` local: the same as the total; ``None``
    total: infinite, so any local bound fits). Remote storage goes with any ``cleanup_policy``:
    compaction rewrites offloaded segments too (:mod:`storage_engine.tier.rewrite`)."""
    for local_name, total_name in (
        ("local_retention_ms", "retention_ms"),
        ("local_retention_bytes", "retention_bytes"),
    ):
        local, total = getattr(p, local_name), getattr(p, total_name)
        if local is not None and total is not None and local > total:
            errors[local_name] = f"must be ≤ {total_name} ({total}): local retention never exceeds total retention"


def effective_local_retention(p: NamespacePolicy) -> tuple[int | None, int | None]:
    """``(ms, bytes)`` that bound the local copies of offloaded segments: the ``local_retention_*``
    fields, or the total retention where they are unset (``None``: no bound)."""
    ms = p.local_retention_ms if p.local_retention_ms is not None else p.retention_ms
    size = p.local_retention_bytes if p.local_retention_bytes is not None else p.retention_bytes
    return ms, size


def validate_node_policy(p: NodePolicy) -> None:
    """Raise :class:`PolicyValidationError` naming every field that breaks a rule."""
    errors: dict[str, str] = {}
    defaults = NodePolicy()
    for f in fields(p):
        _check_field(f.name, getattr(p, f.name), getattr(defaults, f.name), errors)
    _check_hours("delete_when", p.delete_when, errors)
    _check_hours("off_peak_hours", p.off_peak_hours, errors)
    ratio_fields = ("disk_max_used_ratio", "disk_clean_forcibly_ratio", "disk_warning_ratio")
    if not any(f in errors for f in ratio_fields):
        if not p.disk_max_used_ratio <= p.disk_clean_forcibly_ratio:
            errors["disk_max_used_ratio"] = "must be ≤ disk_clean_forcibly_ratio"
        elif not p.disk_clean_forcibly_ratio <= p.disk_warning_ratio:
            errors["disk_clean_forcibly_ratio"] = "must be ≤ disk_warning_ratio"
        elif not p.disk_warning_ratio < 1:
            errors["disk_warning_ratio"] = "must be < 1"
    if errors:
        raise PolicyValidationError(errors)


def _build(cls: type[P], values: Mapping[str, Any]) -> P:
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise PolicyValidationError({name: "unknown field" for name in unknown})
    return cls(**values)


def namespace_policy_from(values: Mapping[str, Any]) -> NamespacePolicy:
    """Build and validate a namespace policy from overrides on the built-in defaults."""
    policy = _build(NamespacePolicy, values)
    validate_namespace_policy(policy)
    return policy


def node_policy_from(values: Mapping[str, Any]) -> NodePolicy:
    """Build and validate a node policy from overrides on the built-in defaults."""
    policy = _build(NodePolicy, values)
    validate_node_policy(policy)
    return policy


@dataclass(frozen=True)
class ResolvedField:
    value: Any
    source: str  # "builtin", or the name of the layer that set it


def resolve_policy(cls: type[P], layers: list[tuple[str, Mapping[str, Any]]]) -> tuple[P, dict[str, ResolvedField]]:
    """Merge override layers (lowest first) over the built-in defaults.

    ``layers`` is e.g. ``[("cluster", {...}), ("namespace", {...})]``; a key
    present in a layer overrides (even with ``None``, meaning "infinite");
    an absent key inherits. Returns the validated effective policy and, per
    field, its value and the layer it came from.
    """
    defaults = cls()
    resolved = {f.name: ResolvedField(getattr(defaults, f.name), "builtin") for f in fields(cls)}
    for layer_name, overrides in layers:
        unknown = sorted(set(overrides) - set(resolved))
        if unknown:
            raise PolicyValidationError({name: "unknown field" for name in unknown})
        for name, value in overrides.items():
            resolved[name] = ResolvedField(value, layer_name)
    policy = cls(**{name: r.value for name, r in resolved.items()})
    if isinstance(policy, NamespacePolicy):
        validate_namespace_policy(policy)
    else:
        validate_node_policy(policy)
    return policy, resolved


@dataclass(frozen=True)
class FieldInfo:
    """How a policy field is shown and typed: its group, unit and meaning."""

    group: str  # expiry | retention | compaction | subscriptions | cleaning | disk | pacing
    unit: str  # ms | bytes | ratio | count | bool | choice | hours
    help: str
    nullable: bool = False  # null means infinite / unset
    choices: tuple[str, ...] = ()


NAMESPACE_FIELDS: dict[str, FieldInfo] = {
    "ttl_ms": FieldInfo("expiry", "ms", "Records expire this long after their timestamp", nullable=True),
    "read_time_check": FieldInfo("expiry", "bool", "Hide expired records on read (layer 1)"),
    "read_check_queue_size": FieldInfo("expiry", "count", "Bound of the read-time clean-up queue"),
    "scan_batch_size": FieldInfo("expiry", "count", "TTL-index entries deleted per WriteBatch"),
    "max_delete_per_scan": FieldInfo("expiry", "count", "Cap on entries one scan deletes"),
    "scan_interval_ms": FieldInfo("expiry", "ms", "How often the TTL-index scan runs"),
    "reclaim_dead_ratio": FieldInfo("expiry", "ratio", "Dead fraction at which a sealed segment is rewritten"),
    "cleanup_policy": FieldInfo("retention", "choice", "What happens to old data", choices=CLEANUP_POLICIES),
    "retention_ms": FieldInfo("retention", "ms", "Delete segments older than this", nullable=True),
    "retention_bytes": FieldInfo("retention", "bytes", "Delete oldest segments above this size", nullable=True),
    "segment_bytes": FieldInfo("retention", "bytes", "Roll the active segment at this size"),
    "segment_ms": FieldInfo("retention", "ms", "Roll the active segment at this age"),
    "segment_expired_roll_ratio": FieldInfo(
        "expiry",
        "ratio",
        "Roll the active segment once more than this share of its records is expired, so reclamation "
        "drops or rewrites them on a shard that keeps receiving appends (only a segment at least 10 s "
        "old; 1 or null: only a wholly expired one)",
        nullable=True,
    ),
    "index_interval_bytes": FieldInfo("retention", "bytes", "Bytes between sparse offset-index entries"),
    "max_record_bytes": FieldInfo("retention", "bytes", "Largest record accepted"),
    "min_cleanable_dirty_ratio": FieldInfo("compaction", "ratio", "Compact when the dirty share exceeds this"),
    "min_compaction_lag_ms": FieldInfo("compaction", "ms", "Never compact records younger than this"),
    "max_compaction_lag_ms": FieldInfo(
        "compaction", "ms", "Compact dirty data older than this regardless", nullable=True
    ),
    "delete_retention_ms": FieldInfo("compaction", "ms", "How long tombstones survive after a clean"),
    "compaction_check_interval_ms": FieldInfo("compaction", "ms", "How often compaction is considered"),
    "ttl_check_interval_ms": FieldInfo("subscriptions", "ms", "How often subscription message TTL runs"),
    "backlog_quota_bytes": FieldInfo("subscriptions", "bytes", "Backlog size limit", nullable=True),
    "backlog_quota_seconds": FieldInfo("subscriptions", "count", "Backlog age limit in seconds", nullable=True),
    "backlog_quota_policy": FieldInfo(
        "subscriptions", "choice", "What happens over the backlog quota", choices=BACKLOG_QUOTA_POLICIES
    ),
    "backlog_hold_timeout_ms": FieldInfo("subscriptions", "ms", "How long a held producer waits"),
    "retention_respects_subscriptions": FieldInfo("subscriptions", "bool", "Retention deletes only acknowledged data"),
    "remote_storage_enabled": FieldInfo("retention", "bool", "Offload sealed segments to the node's object store"),
    "local_retention_ms": FieldInfo(
        "retention", "ms", "Keep local copies of offloaded segments this long (unset: retention_ms)", nullable=True
    ),
    "local_retention_bytes": FieldInfo(
        "retention", "bytes", "Keep this many bytes per shard locally (unset: retention_bytes)", nullable=True
    ),
}

NODE_FIELDS: dict[str, FieldInfo] = {
    "clean_interval_ms": FieldInfo("cleaning", "ms", "How often the file cleaner runs"),
    "file_reserved_ms": FieldInfo("cleaning", "ms", "Keep files this long after their last write"),
    "delete_when": FieldInfo("cleaning", "hours", "Hours (';' list) when expired files are deleted"),
    "delete_interval_ms": FieldInfo("cleaning", "ms", "Pause between two file deletions"),
    "delete_batch_max": FieldInfo("cleaning", "count", "Files deleted per cleaner run at most"),
    "destroy_forcibly_after_ms": FieldInfo("cleaning", "ms", "Remove a file still held by a reader after this"),
    "file_delete_delay_ms": FieldInfo("cleaning", "ms", "Delay between renaming to .deleted and removal"),
    "disk_max_used_ratio": FieldInfo("disk", "ratio", "Above this, expired files are deleted at any hour"),
    "disk_clean_forcibly_ratio": FieldInfo("disk", "ratio", "Above this, oldest files go even if not expired"),
    "disk_warning_ratio": FieldInfo("disk", "ratio", "Above this, writes are rejected (disk full)"),
    "clean_forcibly_enabled": FieldInfo("disk", "bool", "Allow forced deletion of unexpired files"),
    "delete_rate_per_s": FieldInfo("pacing", "count", "Deletions per second at most", nullable=True),
    "reclaim_bytes_per_s": FieldInfo("pacing", "bytes", "Reclamation I/O per second at most", nullable=True),
    "off_peak_hours": FieldInfo("pacing", "hours", "Hours for non-urgent rewrites (e.g. 01-05)", nullable=True),
    "urgent_expired_ratio": FieldInfo("pacing", "ratio", "Expired ratio that makes work urgent off-peak"),
    "compaction_map_budget_bytes": FieldInfo("pacing", "bytes", "Memory budget of the compaction key map"),
    "tier_cache_bytes": FieldInfo("disk", "bytes", "On-disk cache of reads of offloaded segments"),
    "offload_bandwidth_bytes_per_s": FieldInfo(
        "pacing", "bytes", "Offload upload bytes per second at most", nullable=True
    ),
    "offload_concurrency": FieldInfo("pacing", "count", "Segments uploaded at the same time at most"),
}

FIELDS: dict[str, FieldInfo] = {**NAMESPACE_FIELDS, **NODE_FIELDS}


def namespace_policy_recovered(values: Mapping[str, Any]) -> tuple[NamespacePolicy, list[str]]:
    """A stored namespace policy as it is loaded: every field that breaks a rule (say a NaN
    stored before validation refused it) falls back to its default, so one bad value can
    never make the namespace unlistable. Returns the policy and the names of the fields reset."""
    known = {f.name for f in fields(NamespacePolicy)}
    kept: dict[str, Any] = {}
    reset: list[str] = []
    for name, value in values.items():
        if name not in known:
            continue
        try:
            validate_namespace_policy(NamespacePolicy(**{**kept, name: value}))
        except (PolicyValidationError, TypeError, ValueError):
            reset.append(name)
            continue
        kept[name] = value
    return NamespacePolicy(**kept), reset
