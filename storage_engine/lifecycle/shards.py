"""What a shard of any store provides to the lifecycle parts, and what the engine provides.

:class:`LifecycleShard` is the store side: the per-shard mechanisms (drop, rewrite with a
removal rule, expire TTL entries or offsets, remove due files, verify). :class:`ShardSource`
is the engine side: the namespaces and shards the parts work on, the TTL index walk and the
disk measurement, which differ per store. The parts (:mod:`storage_engine.lifecycle`) decide
*what* to do from the rule modules; these two protocols say *where*.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from typing import NamedTuple, Protocol

from storage_engine.api import SegmentInfo, ShardStats
from storage_engine.formats.batch_columns import RecordColumns
from storage_engine.policies.policy import NamespacePolicy, NodePolicy
from storage_engine.rules.figures import SegmentFacts
from storage_engine.rules.work import ShardWork

# What a removal rule (key compaction's ``rewrite_segment(..., remove=rule)``) says per record.
KEEP = 0
REMOVE = 1  # leave it out; it may be its key's latest record (its key entry is checked)
SUPERSEDED = 2  # leave it out; a later record of its key exists, so its key entry points elsewhere

RemovalRule = Callable[[RecordColumns], Sequence[int]]
"""Called with the columns of a run of stored live records (one batch, or a chunk), in
offset order; returns ``KEEP``/``REMOVE``/``SUPERSEDED`` for each. Deciding while the
rewrite streams keeps the caller's memory independent of the segment's size.

A rule may also have a ``by_offset(first, count)`` attribute: the decisions for the
dense offsets ``first .. first+count-1`` from the offsets alone (``None`` when it needs
the columns); a store may ask it first for a batch without tags or deadlines, and skip
decoding the batch when it answers."""

Removal = Collection[int] | RemovalRule
"""What ``rewrite_segment`` removes besides dead and expired records: offsets, or a rule."""


def removal_rule(remove: Removal) -> RemovalRule | None:
    """``remove`` as a rule (``None`` when it removes nothing)."""
    if callable(remove):
        return remove
    if not remove:
        return None
    wanted = remove if isinstance(remove, (set, frozenset)) else frozenset(remove)
    return lambda cols: [REMOVE if o in wanted else KEEP for o in cols.offsets]


class TTLEntry(NamedTuple):
    """One TTL-index entry: the record at ``offset`` expires at ``expire_at``.

    ``size`` is the record's encoded size and ``flags`` says whether it has a
    key (``EXPIRE_HAS_KEY``) or tags (``EXPIRE_HAS_TAGS``), so that the scan reads only records it must (−1:
    unknown, read it). A tuple rather than a dataclass: the scan makes one per expired
    record, and a tuple is made in a third of the time.
    """

    shard: int
    offset: int
    expire_at: int
    size: int
    flags: int
    namespace: str = ""  # set by the adapter: a node-wide scan sees every namespace's entries
    key: bytes = b""  # the entry's key in the store, when it has one (saves packing it again)


TTL_UNKNOWN = -1  # flags of an entry written before entries carried them: read the record


class LifecycleShard(Protocol):
    """What a shard of any adapter provides to the lifecycle driver."""

    shard: int

    def lifecycle_segments(self) -> list[SegmentInfo]:
        """Live segments in offset order, the active one last."""
        ...

    def roll_empty(self, now: int) -> bool:
        """Seal a non-empty active segment and start an empty one at the end offset."""
        ...

    def drop_segments(self, bases: Sequence[int], now: int, delay_ms: int) -> ShardWork:
        """Delete sealed segments whole (never the active one) with their index entries;
        files are removed once ``delay_ms`` has passed and no reader holds them."""
        ...

    def rewrite_segment(self, base: int, now: int, remove: Removal = ()) -> ShardWork:
        """Rewrite a sealed segment without its expired and dead records (offsets unchanged)."""
        ...

    def expire_entries(self, entries: Sequence[TTLEntry], now: int) -> ShardWork:
        """Apply the per-entry TTL-scan step (DESIGN §3, layer 2) to due TTL-index entries."""
        ...

    def expire_offsets(self, offsets: Sequence[int], now: int) -> ShardWork:
        """Mark expired, not yet dead records at ``offsets`` dead, with their index entries (read checks)."""
        ...

    def remove_due_files(self, now: int, node: NodePolicy, *, purge: bool = False) -> ShardWork:
        """Remove ``.deleted`` files whose delay has passed (every one with ``purge``) and that
        no reader holds (or forcibly, after ``destroy_forcibly_after_ms``)."""
        ...

    def pending_file_bytes(self) -> int:
        """Bytes of the shard's ``.deleted`` files still on disk (0 for stores without files)."""
        ...

    def due_files(self, now: int, node: NodePolicy, *, purge: bool = False) -> tuple[int, int]:
        """``(files, bytes)`` :meth:`remove_due_files` would remove now, by its rules (a dry run's)."""
        ...

    def drop_files(self, bases: Collection[int], delay_ms: int) -> tuple[int, int]:
        """What :meth:`drop_segments` of ``bases`` now would do to their files: ``(files removed at once,
        bytes left on disk as .deleted files)``."""
        ...

    def compact_deleted(self) -> None:
        """Ask the store to drop deleted ranges now (RocksDB ``compact_range``)."""
        ...

    def verify(self, now: int) -> tuple[int, int, list[str]]:
        """(records checked, index entries checked, problems) of this shard."""
        ...

    def stats(self) -> ShardStats: ...

    def due_facts(self) -> tuple[object | None, Callable[[], Sequence[SegmentFacts]], SegmentFacts]:
        """Metadata for due times (:class:`storage_engine.rules.due.DueShard`)."""
        ...

    def expired_roll_due(self, policy: NamespacePolicy, now: int) -> int | None:
        """When the active segment is rolled for its expired share (:class:`storage_engine.rules.due.DueShard`)."""
        ...


class ShardSource(Protocol):
    """What the engine provides to the lifecycle parts: its namespaces, shards and TTL index."""

    def lifecycle_namespace(self, name: str) -> tuple[NamespacePolicy, Sequence[LifecycleShard]]:
        """The namespace's policy and shards (raises for an unknown or closed namespace)."""
        ...

    def lifecycle_namespaces(self) -> list[tuple[NamespacePolicy, Sequence[LifecycleShard]]]:
        """Every namespace's policy and shards, in name order."""
        ...

    def namespace_names(self) -> list[str]:
        """Every namespace's name (node-wide steps walk them)."""
        ...

    def ttl_candidates(
        self, namespace: str | None, shard: int | None, now: int, scanned: list[int]
    ) -> Iterator[TTLEntry]:
        """TTL-index entries of the namespace (every namespace for ``None``) with ``expire_at ≤
        now``, in index order, from the start, each naming its namespace; ``scanned[0]`` counts
        every entry looked at (other namespaces' too)."""
        ...

    def ttl_first(self) -> int | None:
        """The first TTL-index entry's ``expire_at`` over every namespace (``None``: empty)."""
        ...

    def ttl_scan_begin(self, namespaces: Sequence[str]) -> object | None:
        """A TTL scan of every shard of ``namespaces`` starts (an empty list: of one shard only).
        Stores whose index keeps what a scan deleted as tombstones for a while (RocksDB) note
        where the scan starts, so that the next one can start where it stopped."""
        ...

    def ttl_scan_end(self, token: object | None, stop: TTLEntry | None, now: int, ok: bool) -> None:
        """The scan begun with ``token`` ended: every entry of its namespaces before ``stop`` (all
        those due at ``now`` for ``None``) is gone; ``ok`` false: it failed part way."""
        ...

    def measure_disk(self) -> tuple[int, int, str]:
        """(used bytes, capacity bytes, source) of the data directory now."""
        ...

    def pending_delete_bytes(self) -> int:
        """Bytes of ``.deleted`` files waiting for removal, over every shard (0 without files)."""
        ...
