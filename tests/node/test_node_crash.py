"""SIGKILL a node under concurrent produce load, restart it: every acknowledged
record is present exactly once, and offsets are dense."""

from __future__ import annotations

import signal
import threading

import pytest

from storage_engine.api import NewRecord
from storage_engine.errors import StorageError
from storage_engine.node_api.client import NodeClient
from tests.support.processes import start_node, wait_until

pytestmark = pytest.mark.slow
PRODUCERS = 4
SHARDS = 2


def produce_until_failure(url: str, token: str, producer: int, acked: list[bytes], stop: threading.Event) -> None:
    with NodeClient(url, token, timeout_s=5, retries=0, binary=producer % 2 == 0) as client:
        n = 0
        while not stop.is_set():
            batch = [NewRecord(value=f"p{producer}-{n + i}".encode()) for i in range(50)]
            try:
                client.append("load", producer % SHARDS, batch)
            except StorageError:
                return  # the node died: what was not acknowledged may or may not be there
            acked.extend(r.value for r in batch if r.value is not None)
            n += len(batch)


def read_all(client: NodeClient, shard: int) -> list[tuple[int, bytes]]:
    out, offset = [], 0
    while True:
        result = client.read("load", shard, offset, max_records=5000, max_bytes=8 << 20)
        if not result.records:
            return out
        out += [(r.offset, r.value) for r in result.records]
        offset = result.next_offset


@pytest.mark.parametrize("round_", range(3))
def test_acknowledged_records_survive_sigkill_exactly_once(tmp_path, round_):
    data_dir = tmp_path / "node"
    node = start_node(data_dir)
    with NodeClient(node.url, node.token) as admin:
        admin.create_namespace("load", SHARDS)
    acked: list[list[bytes]] = [[] for _ in range(PRODUCERS)]
    stop = threading.Event()
    threads = [
        threading.Thread(target=produce_until_failure, args=(node.url, node.token, p, acked[p], stop))
        for p in range(PRODUCERS)
    ]
    for t in threads:
        t.start()
    wait_until(lambda: sum(map(len, acked)) >= 2_000 * (round_ + 1), 60, "produce load")
    node.popen.send_signal(signal.SIGKILL)
    node.popen.wait(10)
    stop.set()
    for t in threads:
        t.join(30)

    node = start_node(data_dir)
    try:
        with NodeClient(node.url, node.token) as client:
            stored = [read_all(client, shard) for shard in range(SHARDS)]
        for shard_records in stored:
            assert [o for o, _ in shard_records] == list(range(len(shard_records)))  # dense, no gap
        values = [v for shard_records in stored for _, v in shard_records]
        assert len(values) == len(set(values)), "a record was stored twice"
        missing = {v for p in acked for v in p} - set(values)
        assert not missing, f"{len(missing)} acknowledged records lost"
        # Appends continue after the last offset.
        with NodeClient(node.url, node.token) as client:
            assert client.append("load", 0, [NewRecord(value=b"after")]).base_offset == len(stored[0])
    finally:
        node.stop()
