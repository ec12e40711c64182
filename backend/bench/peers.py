"""The lifecycle bench's peers (issue 15): the same load against NATS JetStream and Redis Streams.

Each namespace × shard of our system is one stream of the peer:

- **NATS JetStream** (Debian's ``nats-server``, started here on a free loopback port with a
  temporary store directory): a file-backed stream ``B_<ns>_<shard>`` on subject
  ``b.<ns>.<shard>`` with ``MaxAge`` = the TTL, so the server removes messages itself. A
  produce call publishes its records and waits for every ack. Sampled through
  ``$JS.API.STREAM.LIST`` (every stream's ``messages`` and ``first_ts``).
- **Redis Streams** (the local Redis, a database of its own and a key prefix unique to the
  run, deleted at the end): a stream per namespace × shard, a produce call is one pipeline of
  ``XADD``; a trimmer thread runs exact ``XTRIM <key> MINID <now − TTL>`` over every stream
  once a second (Redis has no TTL per stream entry: that loop is what a Redis user runs).
  Sampled with ``XLEN`` and the first entry's id (its ms part is the server's time).

Everything listens on and connects to 127.0.0.1 only, and every loop is bounded by the
phase's seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from calendar import timegm
from pathlib import Path
from typing import Any

import nats
import redis

from backend.bench.measure import Load, Sample, Sampler, now_ms, summary

NATS_SERVER_CANDIDATES = ("/usr/sbin/nats-server", "/usr/bin/nats-server")
INSTALL_HINT = "install it with `make peers` (Debian's nats-server package)"


def nats_server_path(given: str | None = None) -> str | None:
    """The nats-server binary: ``given``, on PATH, or where Debian puts it; ``None`` when absent."""
    if given:
        return given if os.access(given, os.X_OK) else None
    found = shutil.which("nats-server")
    if found:
        return found
    return next((p for p in NATS_SERVER_CANDIDATES if os.access(p, os.X_OK)), None)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stream_names(names: list[str], shards: int) -> list[tuple[str, int, str]]:
    """(namespace, shard, peer stream key) for every namespace × shard."""
    return [(name, shard, f"{name}.{shard}") for name in names for shard in range(shards)]


_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?Z")


def rfc3339_ms(text: str) -> int | None:
    """NATS's ``first_ts`` (nanosecond RFC 3339, UTC) in ms since the epoch; ``None`` for the zero time."""
    m = _RFC3339.fullmatch(text)
    if m is None:
        return None
    year, month, day, hour, minute, second, frac = m.groups()
    if int(year) < 1971:
        return None
    seconds = timegm((int(year), int(month), int(day), int(hour), int(minute), int(second), 0, 0, 0))
    return seconds * 1000 + int((frac or "0")[:3].ljust(3, "0"))


# -- NATS JetStream -------------------------------------------------------------------------------------------
def _nats_subject(key: str) -> str:
    return "b." + key


def _nats_stream(key: str) -> str:
    return "B_" + key.replace(".", "_").replace("-", "_")


def run_nats(args: argparse.Namespace, names: list[str], scratch: Path) -> dict[str, Any]:
    binary = nats_server_path(getattr(args, "nats_server", None))
    if binary is None:
        raise SystemExit(f"nats-server not found: {INSTALL_HINT}")
    port = _free_port()
    store = Path(tempfile.mkdtemp(prefix="nats-store-", dir=scratch))
    log = open(scratch / "nats-server.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(
        [binary, "-js", "-sd", str(store), "-a", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        return asyncio.run(_nats_phase(args, names, port))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        shutil.rmtree(store, ignore_errors=True)


async def _nats_connect(port: int) -> Any:
    deadline = time.monotonic() + 20
    while True:
        try:
            return await nats.connect(f"nats://127.0.0.1:{port}", connect_timeout=2, max_reconnect_attempts=0)
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _nats_phase(args: argparse.Namespace, names: list[str], port: int) -> dict[str, Any]:
    nc = await _nats_connect(port)
    js = nc.jetstream(timeout=30)
    streams = stream_names(names, args.shards)
    ttl_s = args.ttl_ms / 1000
    for i in range(0, len(streams), 50):  # created 50 at a time: bounded concurrency
        await asyncio.gather(
            *(
                js.add_stream(name=_nats_stream(key), subjects=[_nats_subject(key)], max_age=ttl_s, storage="file")
                for _, _, key in streams[i : i + 50]
            )
        )
    load = Load(names, args.shards, args.rate, args.batch, args.ttl_ms, args.record_bytes)
    payload = b"x" * args.record_bytes
    samples: list[Sample] = []
    errors = 0
    stop = asyncio.Event()

    async def probe(t_s: float) -> Sample:
        stored = worst = 0
        offset, total = 0, 1
        while offset < total:
            msg = await nc.request("$JS.API.STREAM.LIST", json.dumps({"offset": offset}).encode(), timeout=10)
            body = json.loads(msg.data)
            total = int(body.get("total", 0))
            page = body.get("streams") or []
            if not page:
                break
            offset += len(page)
            for info in page:
                state = info.get("state", {})
                stored += int(state.get("messages", 0))
                first = rfc3339_ms(state.get("first_ts", "")) if state.get("messages") else None
                if first is not None:
                    worst = max(worst, now_ms() - (first + args.ttl_ms))
        at = now_ms()
        return Sample(t_s, stored, stored - load.ledger.unexpired(at), max(0, worst) / 1000)

    async def sampler() -> None:
        nonlocal errors
        start = time.monotonic()
        tick = 0
        while not stop.is_set():
            tick += 1
            try:
                await asyncio.wait_for(stop.wait(), max(0.0, start + tick * args.sample_s - time.monotonic()))
                return
            except TimeoutError:
                pass
            try:
                samples.append(await probe(time.monotonic() - start))
            except Exception:
                errors += 1

    async def produce() -> None:
        rng = random.Random(7)
        interval = args.batch / args.rate
        start = next_at = time.monotonic()
        while time.monotonic() - start < args.seconds:
            name, shard = rng.choice(names), rng.randrange(args.shards)
            subject = _nats_subject(f"{name}.{shard}")
            deadline = now_ms() + args.ttl_ms
            started = time.perf_counter()
            await asyncio.gather(*(js.publish(subject, payload) for _ in range(args.batch)))
            load.latencies_ms.append((time.perf_counter() - started) * 1000)
            load.ledger.add(deadline, args.batch)
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    task = asyncio.create_task(sampler())
    try:
        await produce()
    finally:
        stop.set()
        await task
        await nc.close()
    return summary(
        "nats-jetstream",
        load,
        samples,
        args.warmup_s,
        args.seconds,
        streams=len(streams),
        probe_errors=errors,
        how=f"JetStream file streams with MaxAge={ttl_s:g}s, one per namespace x shard",
    )


# -- Redis Streams ----------------------------------------------------------------------------------------------
def run_redis(args: argparse.Namespace, names: list[str]) -> dict[str, Any]:
    client = redis.Redis.from_url(args.peer_redis_url)
    prefix = f"lcbench15:{uuid.uuid4().hex[:8]}"
    keys = [f"{prefix}:{key}" for _, _, key in stream_names(names, args.shards)]
    load = Load(names, args.shards, args.rate, args.batch, args.ttl_ms, args.record_bytes)
    payload = b"x" * args.record_bytes
    stop = threading.Event()
    trims: list[float] = []

    def trimmer() -> None:
        conn = redis.Redis.from_url(args.peer_redis_url)
        while not stop.wait(1.0):
            started = time.perf_counter()
            min_id = f"{now_ms() - args.ttl_ms}-0"
            pipe = conn.pipeline(transaction=False)
            for key in keys:
                pipe.xtrim(key, minid=min_id, approximate=False)
            pipe.execute()
            trims.append((time.perf_counter() - started) * 1000)
        conn.close()

    probe_conn = redis.Redis.from_url(args.peer_redis_url)

    def probe(t_s: float) -> Sample:
        pipe = probe_conn.pipeline(transaction=False)
        for key in keys:
            pipe.xlen(key)
            pipe.xrange(key, count=1)
        answers = pipe.execute()
        at = now_ms()
        stored = sum(int(n) for n in answers[0::2])
        worst = 0
        for first in answers[1::2]:
            if first:
                entry_ms = int(first[0][0].split(b"-")[0])
                worst = max(worst, at - (entry_ms + args.ttl_ms))
        return Sample(t_s, stored, stored - load.ledger.unexpired(at), max(0, worst) / 1000)

    def send(name: str, shard: int, deadline: int) -> None:
        pipe = client.pipeline(transaction=False)
        key = f"{prefix}:{name}.{shard}"
        for _ in range(args.batch):
            pipe.xadd(key, {"v": payload})
        pipe.execute()

    trim_thread = threading.Thread(target=trimmer, name="xtrim", daemon=True)
    try:
        trim_thread.start()
        sampler = Sampler(probe, args.sample_s).start()
        load.run(args.seconds, send)
        samples = sampler.stop()
    finally:
        stop.set()
        trim_thread.join()
        for i in range(0, len(keys), 500):
            client.delete(*keys[i : i + 500])
        probe_conn.close()
        client.close()
    return summary(
        "redis-streams",
        load,
        samples,
        args.warmup_s,
        args.seconds,
        streams=len(keys),
        probe_errors=sampler.errors,
        trim_pass_p50_ms=round(sorted(trims)[len(trims) // 2], 2) if trims else None,
        how="XADD pipelines; exact XTRIM MINID now-TTL over every stream once a second",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--peers",
        default="",
        help="comma-separated peers to run the same load against after our system: nats, redis",
    )
    parser.add_argument("--nats-server", default=None, help="nats-server binary (default: on PATH or /usr/sbin)")
    parser.add_argument(
        "--peer-redis-url",
        default="redis://127.0.0.1:6379/14",
        help="Redis for the Redis Streams peer (a database of its own; keys carry a per-run prefix)",
    )


def parse_peers(text: str) -> list[str]:
    peers = [p.strip() for p in text.split(",") if p.strip()]
    unknown = sorted(set(peers) - {"nats", "redis"})
    if unknown:
        raise SystemExit(f"--peers: unknown {', '.join(unknown)} (known: nats, redis)")
    return peers
