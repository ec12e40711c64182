"""Latency of the list and summary endpoints at scale (issue 7).

Seeds ``--namespaces`` namespaces (4 shards each, with shard status rows) and
``--segments`` catalog rows spread over them, then times each endpoint in
process through Django's test client as a logged-in viewer: the first page,
a deep page (following cursors), filters and orderings, and a summary.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Iterator
from typing import Any

from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection, reset_queries
from django.test import Client
from django.test.utils import CaptureQueriesContext

from backend.apps.catalog.models import Segment, ShardStatus
from backend.apps.namespaces.models import Namespace
from backend.apps.nodes.models import StorageNode

SHARDS = 4
BATCH = 20_000


def seed(namespaces: int, segments: int) -> float:
    started = time.perf_counter()
    node = StorageNode.objects.create(name="bench-node", url="http://127.0.0.1:9")
    Namespace.objects.bulk_create(
        (Namespace(name=f"ns-{i:05d}", shards=SHARDS, node=node, sync_state="synced") for i in range(namespaces)),
        batch_size=BATCH,
    )
    ids = list(Namespace.objects.order_by("name").values_list("id", flat=True))
    ShardStatus.objects.bulk_create(
        (
            ShardStatus(
                namespace_id=n,
                shard=s,
                size_bytes=1 << 30,
                record_count=10**6,
                live_count=9 * 10**5,
                segment_count=segments // (namespaces * SHARDS),
            )
            for n in ids
            for s in range(SHARDS)
        ),
        batch_size=BATCH,
    )
    per_shard = max(1, segments // (len(ids) * SHARDS))
    now = 1_700_000_000_000
    rows: list[Segment] = []
    for n in ids:
        for s in range(SHARDS):
            for k in range(per_shard):
                base = k * 10_000
                rows.append(
                    Segment(
                        namespace_id=n,
                        shard=s,
                        base_offset=base,
                        last_offset=base + 9_999,
                        record_count=10_000,
                        live_count=10_000 - (k % 7) * 1_000,
                        size_bytes=(k % 13 + 1) * (1 << 20),
                        min_timestamp=now + k * 60_000,
                        max_timestamp=now + (k + 1) * 60_000,
                        max_expire_at=None,
                        has_unbounded=True,
                        state="active" if k == per_shard - 1 else "sealed",
                        created_at_ms=now,
                        modified_at_ms=now,
                        expired_ratio=(k % 7) / 10,
                    )
                )
            if len(rows) >= BATCH:
                Segment.objects.bulk_create(rows, batch_size=BATCH)
                rows.clear()
    Segment.objects.bulk_create(rows, batch_size=BATCH)
    return time.perf_counter() - started


def _time(client: Client, url: str, requests: int) -> tuple[list[float], int]:
    latencies = []
    queries = 0
    for _ in range(requests):
        reset_queries()
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.get(url)
            latencies.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise SystemExit(f"{url} answered {response.status_code}: {response.content[:300]!r}")
        queries = len(captured)
    return latencies, queries


def _deep_cursor(client: Client, url: str, pages: int) -> str:
    for _ in range(pages):
        nxt = client.get(url).json()["next"]
        if not nxt:
            break
        url = nxt.replace("http://testserver", "")
    return url


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    call_command("migrate", interactive=False, verbosity=0)
    seconds = seed(args.namespaces, args.segments)

    yield {
        "bench": "api",
        "system": "seed",
        "namespaces": args.namespaces,
        "segments": Segment.objects.count(),
        "seconds": round(seconds, 2),
        "database": connection.vendor,
    }
    user = User.objects.create_user("bench-viewer", password="bench-pw-123")
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    middle = f"ns-{args.namespaces // 2:05d}"
    endpoints = {
        "namespaces first page": "/api/namespaces/",
        "namespaces page 5": _deep_cursor(client, "/api/namespaces/", 5),
        "segments first page": "/api/segments/",
        "segments page 20": _deep_cursor(client, "/api/segments/?page_size=100", 20),
        "segments of one namespace": f"/api/segments/?namespace={middle}",
        "segments sealed, 4 MiB+": "/api/segments/?state=sealed&min_size=4194304",
        "segments by size desc": "/api/segments/?ordering=-size_bytes",
        "segments expired ratio ≥ 0.5": "/api/segments/?min_expired_ratio=0.5",
        "namespace summary": f"/api/namespaces/{middle}/summary",
    }
    for name, url in endpoints.items():
        client.get(url)  # warm caches
        latencies, queries = _time(client, url, args.requests)
        latencies.sort()
        yield {
            "bench": "api",
            "system": name,
            "url": url[:80],
            "requests": args.requests,
            "queries": queries,
            "p50_ms": round(statistics.median(latencies), 2),
            "p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
            "database": connection.vendor,
        }


def emit(line: dict[str, Any], as_json: bool) -> None:
    print(json.dumps(line) if as_json else "  ".join(f"{k}={v}" for k, v in line.items()), flush=True)
