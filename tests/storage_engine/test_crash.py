"""Crash tests: SIGKILL a writer process at random points while it appends, then
check on reopen that every acknowledged record is there exactly once, that no
index entry points at missing data and that offsets go on without a gap.

The writer prints one line per append *after* ``append`` returned, so every
complete line is an acknowledgement. SIGKILL leaves the page cache intact, so
this holds in every durability mode; the modes rotate across iterations.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from storage_engine import open_engine
from storage_engine.adapters.indexed import IndexedLogAdapter
from storage_engine.api import NewRecord, Record
from storage_engine.config import Durability, EngineConfig

# Iterations per adapter: the segment adapter has the recovery code; RocksDB's
# WriteBatch is atomic by itself, so a few runs check the shared layers.
ITERATIONS = {"segment": 20, "rocksdb": 6}
SHARDS = 2

WRITER = """
import random, sys, threading
from storage_engine import open_engine
from storage_engine.api import NewRecord
from storage_engine.config import Durability, EngineConfig
from storage_engine.errors import NamespaceExistsError
from storage_engine.policies.policy import NamespacePolicy

data_dir, adapter, durability, run = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
engine = open_engine(EngineConfig(data_dir=data_dir, adapter=adapter, durability=Durability(durability), io_workers=2))
try:
    policy = NamespacePolicy(retention_ms=None, segment_bytes=16384, index_interval_bytes=700)
    engine.create_namespace("crash", SHARDS_, policy)
except NamespaceExistsError:
    pass
lock = threading.Lock()
print("ready", flush=True)

def produce(p):
    rnd = random.Random(run * 100 + p)
    i = 0
    while True:
        shard, n, batch = rnd.randrange(SHARDS_), rnd.randint(1, 12), f"{run}.{p}.{i}"
        records = [
            NewRecord(
                f"{batch}:{j}:".encode() + b"x" * rnd.randint(0, 200),
                key=b"k%d" % rnd.randrange(20) if rnd.random() < 0.5 else None,
                tags=("t%d" % rnd.randrange(3),) if rnd.random() < 0.3 else (),
                expire_at=4_000_000_000_000 + rnd.randrange(10**6) if rnd.random() < 0.2 else None,
            )
            for j in range(n)
        ]
        result = engine.append("crash", shard, records)
        with lock:
            sys.stdout.write(f"{shard} {result.base_offset} {n} {batch}\\n")
            sys.stdout.flush()
        i += 1

threads = [threading.Thread(target=produce, args=(p,), daemon=True) for p in range(3)]
for t in threads:
    t.start()
threads[0].join()
""".replace("SHARDS_", str(SHARDS))

Ack = tuple[int, int, int, str]  # shard, base offset, count, batch id


def run_writer(data_dir: Path, adapter: str, durability: Durability, run: int, rnd: random.Random) -> list[Ack]:
    """Start the writer, let it append for a random while, SIGKILL it; return its acknowledgements."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(data_dir), adapter, durability.value, str(run)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    lines: list[bytes] = []
    ready = proc.stdout.readline()
    assert ready == b"ready\n", proc.stderr.read() if proc.stderr else b""
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, b"")))  # type: ignore[union-attr]
    reader.start()
    time.sleep(rnd.uniform(0.05, 0.7))  # the kill point, not a wait for time to pass in the engine
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    reader.join(30)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else b""
    acks = []
    for line in lines:
        if line.endswith(b"\n"):  # a torn last line is an acknowledgement that never left
            shard, base, n, batch = line.decode().split()
            acks.append((int(shard), int(base), int(n), batch))
    return acks


def read_shard(engine: IndexedLogAdapter, shard: int) -> list[Record]:
    out: list[Record] = []
    offset = 0
    while True:
        page = engine.read("crash", shard, offset, max_records=997)
        if not page.records:
            return out
        out.extend(page.records)
        offset = page.next_offset


@pytest.mark.slow
@pytest.mark.parametrize("adapter", ITERATIONS)
def test_acknowledged_appends_survive_sigkill(tmp_path: Path, adapter: str) -> None:
    data_dir = tmp_path / "data"
    rnd = random.Random(20240601)
    total = 0
    modes = list(Durability)
    for run in range(ITERATIONS[adapter]):
        # Offsets of earlier runs are covered by the dense-offset check; values by their own run.
        acked = run_writer(data_dir, adapter, modes[run % len(modes)], run, rnd)
        total += len(acked)
        engine = open_engine(EngineConfig(data_dir=data_dir, adapter=adapter))
        assert isinstance(engine, IndexedLogAdapter)
        try:
            for shard in range(SHARDS):
                stored = read_shard(engine, shard)
                end = engine.shard_stats("crash", shard).end_offset
                # Exactly once and dense: offsets 0..end-1, each once, in order.
                assert [r.offset for r in stored] == list(range(end)), f"run {run} shard {shard}"
                for s, base, n, batch in acked:
                    if s == shard:
                        assert base + n <= end, f"run {run}: acknowledged {batch} at {base}+{n} lost (end {end})"
                        for j in range(n):
                            assert stored[base + j].value.startswith(f"{batch}:{j}:".encode())  # type: ignore[union-attr]
                prefix = engine._shard("crash", shard).index.prefix
                assert engine.store.dangling_entries(prefix, end) == [], f"run {run} shard {shard}"
                segments = engine.list_segments("crash", shard)
                assert sum(s.record_count for s in segments) == end
                assert segments[-1].last_offset == end - 1 or segments[-1].record_count == 0
                # Offsets go on without a gap.
                result = engine.append("crash", shard, [NewRecord(f"check.{run}.{shard}:0:".encode())])
                assert result.base_offset == end
                assert engine.read("crash", shard, end).records[0].value == f"check.{run}.{shard}:0:".encode()
        finally:
            engine.close()
    assert total > ITERATIONS[adapter]  # the writers got appends acknowledged at all
