"""What only the memory adapter promises beyond the contract: exact logical sizes."""

from __future__ import annotations

from storage_engine import open_engine
from storage_engine.api import NewRecord
from storage_engine.clock import ManualClock
from storage_engine.config import EngineConfig
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.validation import record_size


def test_logical_segments_roll_by_record_size() -> None:
    engine = open_engine(EngineConfig(adapter="memory"), ManualClock())
    engine.create_namespace("ns", 1, NamespacePolicy(segment_bytes=1024))
    record = NewRecord(b"x" * 300, key=b"k", tags=("t",))
    size = record_size(record)
    per_segment = 1024 // size
    for _ in range(2 * per_segment + 1):
        engine.append("ns", 0, [record])
    segments = engine.list_segments("ns", 0)
    assert [s.record_count for s in segments] == [per_segment, per_segment, 1]
    assert [s.size_bytes for s in segments] == [per_segment * size, per_segment * size, size]
    assert engine.shard_stats("ns", 0).size_bytes == (2 * per_segment + 1) * size
    engine.close()
