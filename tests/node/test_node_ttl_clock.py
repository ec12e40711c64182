"""A record's TTL becomes ``expire_at`` in one place, the node's wire decoding, on the node's clock: a client
sends ``ttl_ms`` as given, in JSON even when it otherwise speaks the binary framing (which has no field for it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage_engine.api import NewRecord
from storage_engine.clock import ManualClock
from storage_engine.node_api.client import NodeClient
from tests.support.clocked_node import clocked_node

NODE_NOW = 1_600_000_000_000  # years away from this process's wall clock


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_ttl_ms_is_added_to_the_nodes_clock_whatever_the_clients_framing(tmp_path: Path, binary: bool) -> None:
    clock = ManualClock(NODE_NOW)
    with clocked_node(tmp_path / "data", clock) as url, NodeClient(url, "t", binary=binary) as client:
        client.create_namespace("ns", 2)
        base = client.append("ns", 0, [NewRecord(b"a"), NewRecord(b"b")], ttl_ms=60_000).base_offset
        clock.advance(1_000)
        [(shard, offset)] = client.produce("ns", [NewRecord(b"c", key=b"k")], ttl_ms=5_000)
        own = NewRecord(b"d", expire_at=NODE_NOW + 9_000_000)  # its own deadline: stored as sent
        plain = client.append("ns", 1, [own]).base_offset
        stored = client.read("ns", 0, base).records
        placed = client.read("ns", shard, offset, max_records=1).records[0]
        kept = client.read("ns", 1, plain, max_records=1).records[0]
    assert [(r.timestamp, r.expire_at) for r in stored[:2]] == [(NODE_NOW, NODE_NOW + 60_000)] * 2
    assert (placed.timestamp, placed.expire_at) == (NODE_NOW + 1_000, NODE_NOW + 6_000)
    assert kept.expire_at == NODE_NOW + 9_000_000


def test_a_record_with_its_own_deadline_takes_no_ttl_as_well() -> None:
    with pytest.raises(ValueError, match="not both"):
        NodeClient("http://127.0.0.1:1")._records_payload([NewRecord(b"x", expire_at=5)], None, 1_000)
