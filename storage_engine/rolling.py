"""When the active segment of a shard rolls (DESIGN §2), in one place so that
file-backed and logical segments seal at the same points."""

from __future__ import annotations

from storage_engine.policy import NamespacePolicy


def should_roll(
    policy: NamespacePolicy,
    record_count: int,
    size_bytes: int,
    first_timestamp: int | None,
    batch_bytes: int,
    batch_max_timestamp: int,
) -> bool:
    """Whether to seal the active segment before appending a batch of ``batch_bytes``.

    An empty segment never rolls (so no empty segment is ever sealed and an
    empty append, which never calls this, leaves segments alone). A batch is
    never split: it rolls the segment when it would push it past
    ``segment_bytes``, so a sealed segment only exceeds ``segment_bytes`` when
    a single batch does. Age is Kafka's: the batch's largest record timestamp
    (broker time for records without one) minus the segment's first record
    timestamp must exceed ``segment_ms``; measuring against record time rather
    than the clock keeps a replay of old producer timestamps from rolling on
    every append.
    """
    if record_count == 0:
        return False
    if size_bytes + batch_bytes > policy.segment_bytes:
        return True
    return first_timestamp is not None and batch_max_timestamp - first_timestamp > policy.segment_ms
