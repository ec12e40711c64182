"""Prometheus exposition for a node: engine figures plus HTTP request metrics.

Names follow Prometheus conventions (base units, ``_total`` counters, ratios
0–1), all prefixed ``lcs_``.
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict

from storage_engine.api import EngineStats

SHARD_GAUGES = {
    "log_start_offset": ("lcs_shard_log_start_offset", "First offset still stored"),
    "end_offset": ("lcs_shard_end_offset", "Offset the next record will get"),
    "record_count": ("lcs_shard_stored_records", "Records stored (live and not yet reclaimed)"),
    "live_count": ("lcs_shard_live_records", "Records neither expired nor deleted"),
    "size_bytes": ("lcs_shard_stored_bytes", "Bytes stored"),
    "segment_count": ("lcs_shard_segments", "Segments"),
    "expired_records": ("lcs_shard_expired_records", "Records expired but not yet reclaimed"),
    "expired_bytes": ("lcs_shard_expired_bytes", "Bytes of records expired but not yet reclaimed"),
    "expired_ratio": ("lcs_shard_expired_ratio", "Expired-not-reclaimed records / stored records (0-1)"),
    "expired_bytes_ratio": ("lcs_shard_expired_bytes_ratio", "Expired-not-reclaimed bytes / stored bytes (0-1)"),
}
# Engine counters that need their meaning spelled out (the others are named well enough).
COUNTER_HELP = {
    "disk_used_bytes": "Disk bytes used: every file under the data directory with a quota, else the filesystem's",
    "disk_capacity_bytes": "Disk capacity: the quota, else the filesystem's used plus available bytes",
    "disk_used_ratio": "disk_used_bytes / disk_capacity_bytes (0-1), compared with the node policy's watermarks",
    "disk_full": "1 while appends are rejected above disk_warning_ratio",
    "disk_pending_delete_bytes": "Bytes of deleted segment files not yet removed (.deleted), part of disk_used_bytes",
}
_UNSAFE = re.compile(r"[^a-zA-Z0-9_:]")


class NodeMetrics:
    """Request counts and total durations per route and status; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count: dict[tuple[str, int], int] = defaultdict(int)
        self._seconds: dict[str, float] = defaultdict(float)
        self._calls: dict[str, int] = defaultdict(int)

    def observe(self, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self._count[(route, status)] += 1
            self._seconds[route] += seconds
            self._calls[route] += 1

    def snapshot(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return {
                route: {"requests": self._calls[route], "seconds_sum": round(self._seconds[route], 6)}
                for route in sorted(self._calls)
            }

    def lines(self) -> list[str]:
        with self._lock:
            out = [
                "# HELP lcs_node_http_requests_total HTTP requests by route and status",
                "# TYPE lcs_node_http_requests_total counter",
            ]
            out += [
                f'lcs_node_http_requests_total{{route="{r}",status="{s}"}} {n}'
                for (r, s), n in sorted(self._count.items())
            ]
            out += [
                "# HELP lcs_node_http_request_duration_seconds Time spent serving requests",
                "# TYPE lcs_node_http_request_duration_seconds summary",
            ]
            for route in sorted(self._calls):
                out.append(f'lcs_node_http_request_duration_seconds_sum{{route="{route}"}} {self._seconds[route]:.6f}')
                out.append(f'lcs_node_http_request_duration_seconds_count{{route="{route}"}} {self._calls[route]}')
            return out


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


BACKLOG_GAUGES = {
    "backlog_messages": ("lcs_subscription_backlog_messages", "Unacknowledged messages", 1),
    "backlog_bytes": ("lcs_subscription_backlog_bytes", "Unacknowledged bytes", 1),
    "backlog_age_ms": ("lcs_subscription_backlog_age_seconds", "Age of the oldest unacknowledged message", 1000),
}


def render_prometheus(stats: EngineStats, http: NodeMetrics, backlog: list[dict[str, object]] | None = None) -> str:
    lines = [
        "# HELP lcs_namespaces Namespaces on this node",
        "# TYPE lcs_namespaces gauge",
        f"lcs_namespaces {stats.namespaces}",
    ]
    for attr, (name, help_text) in SHARD_GAUGES.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        for s in stats.shards:
            lines.append(f'{name}{{namespace="{_label(s.namespace)}",shard="{s.shard}"}} {getattr(s, attr)}')
    for key, value in sorted(stats.counters.items()):
        name = "lcs_" + _UNSAFE.sub("_", key)
        kind = "counter" if name.endswith("_total") else "gauge"
        if key in COUNTER_HELP:
            lines.append(f"# HELP {name} {COUNTER_HELP[key]}")
        lines += [f"# TYPE {name} {kind}", f"{name} {value}"]
    for key, (name, help_text, divisor) in BACKLOG_GAUGES.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        for row in backlog or []:
            labels = (
                f'namespace="{_label(str(row["namespace"]))}",subscription="{_label(str(row["subscription"]))}",'
                f'shard="{row["shard"]}"'
            )
            lines.append(f"{name}{{{labels}}} {float(row[key]) / divisor:g}")  # type: ignore[arg-type]
    lines += http.lines()
    return "\n".join(lines) + "\n"
