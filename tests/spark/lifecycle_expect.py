"""The lifecycle report computed by hand, in plain Python, from records as tuples: the reference the Spark
transforms and the job are checked against."""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from spark_jobs.transforms import LIFETIME_BUCKETS

DAY_MS = 86_400_000


@dataclass(frozen=True)
class Rec:
    namespace: str
    shard: int
    offset: int
    timestamp: int
    key: bytes | None
    tags: tuple[str, ...]
    headers: Mapping[str, bytes]
    value: bytes | None
    expire_at: int | None

    @property
    def size(self) -> int:
        """The codec's record size: 33 fixed + key + tags + headers + value."""
        return (
            33
            + len(self.key or b"")
            + sum(1 + len(t.encode()) for t in self.tags)
            + sum(6 + len(n.encode()) + len(v) for n, v in self.headers.items())
            + len(self.value or b"")
        )


def nearest_rank(values: list[int], p: float) -> int | None:
    """Spark's percentile_approx on a few values: the smallest value with at least p of them at or below."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


def utc_day(ms: int) -> dt.date:
    return dt.date(1970, 1, 1) + dt.timedelta(days=ms // DAY_MS)


def expected_report(
    records: Iterable[Rec],
    now_ms: int,
    ttls: Mapping[str, int],
    by_day: bool = True,
    dead: frozenset[tuple[str, int, int]] = frozenset(),
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """``dead``: (namespace, shard, offset) of records the node marked dead: expired whatever their fields
    say, with no time past expiry unless their fields have one."""
    records = list(records)
    latest: dict[tuple[str, int, bytes], int] = {}
    for r in records:
        if r.key is not None:
            k = (r.namespace, r.shard, r.key)
            latest[k] = max(latest.get(k, -1), r.offset)
    groups: dict[tuple[Any, ...], list[Rec]] = defaultdict(list)
    for r in records:
        groups[(r.namespace, utc_day(r.timestamp)) if by_day else (r.namespace,)].append(r)
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for group, rs in groups.items():
        expiries = []
        for r in rs:
            ttl = ttls.get(r.namespace)
            sides = [x for x in (r.expire_at, None if ttl is None else r.timestamp + ttl) if x is not None]
            expiries.append(min(sides) if sides else None)
        lifetimes = [e - r.timestamp for r, e in zip(rs, expiries, strict=True) if e is not None]
        by_fields = [(r, e) for r, e in zip(rs, expiries, strict=True) if e is not None and e <= now_ms]
        overdue = [now_ms - e for _, e in by_fields]
        expired = [
            (r, e)
            for r, e in zip(rs, expiries, strict=True)
            if (e is not None and e <= now_ms) or (r.namespace, r.shard, r.offset) in dead
        ]
        superseded = [r for r in rs if r.key is not None and r.offset < latest[(r.namespace, r.shard, r.key)]]
        keyed = sum(1 for r in rs if r.key is not None)
        size = sum(r.size for r in rs)
        histogram = {}
        lower = None
        for name, upper in LIFETIME_BUCKETS:
            histogram[name] = sum(
                1 for x in lifetimes if (lower is None or x > lower) and (upper is None or x <= upper)
            )
            lower = upper
        expired_bytes = sum(r.size for r, _ in expired)
        out[group] = {
            "records": len(rs),
            "bytes": size,
            "expired_records": len(expired),
            "expired_bytes": expired_bytes,
            "expired_ratio": len(expired) / len(rs),
            "expired_bytes_ratio": expired_bytes / size if size else None,
            "unbounded_records": len(rs) - len(lifetimes),
            "lifetime_p50_ms": nearest_rank(lifetimes, 0.5),
            "lifetime_p90_ms": nearest_rank(lifetimes, 0.9),
            "lifetime_p99_ms": nearest_rank(lifetimes, 0.99),
            "lifetime_histogram": histogram,
            "overdue_p50_ms": nearest_rank(overdue, 0.5),
            "overdue_p90_ms": nearest_rank(overdue, 0.9),
            "overdue_p99_ms": nearest_rank(overdue, 0.99),
            "overdue_max_ms": max(overdue) if overdue else None,
            "keyed_records": keyed,
            "superseded_records": len(superseded),
            "superseded_bytes": sum(r.size for r in superseded),
            "duplicate_key_ratio": len(superseded) / keyed if keyed else None,
        }
    return out


def report_rows_to_dict(
    rows: Iterable[Mapping[str, Any]], by_day: bool = True
) -> dict[tuple[Any, ...], dict[str, Any]]:
    out = {}
    for row in rows:
        row = dict(row)
        group = (row.pop("namespace"), row.pop("date")) if by_day else (row.pop("namespace"),)
        row.pop("now_ms", None)
        histogram = row["lifetime_histogram"]
        row["lifetime_histogram"] = histogram if isinstance(histogram, dict) else histogram.asDict()
        out[group] = row
    return out
