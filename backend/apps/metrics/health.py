"""The system's health as ``/api/health`` reports it: the control plane's own parts (core's checks)
and the storage nodes as the metrics collection last found them."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.utils import timezone

from backend.apps.core.selectors import (
    ComponentHealth,
    check_beat,
    check_broker,
    check_database,
    check_worker,
)
from backend.apps.metrics.selectors import node_health
from backend.apps.nodes.gateway import node_health_summary


def check_node() -> ComponentHealth:
    """The nodes as the metrics collection last found them (the same health the Nodes page shows); the
    nodes are asked now only when no collection looked at one of them recently (no worker or beat)."""
    found = node_health()
    if found and all(h["health"] != "unknown" for h in found.values()):
        down = [f"{name}: {h['error'] or 'unavailable'}" for name, h in found.items() if h["health"] != "healthy"]
        if down:
            return ComponentHealth(False, "; ".join(down) + " (at the last metrics collection)")
        return ComponentHealth(True, "reachable at the last metrics collection: " + ", ".join(found))
    ok, detail = node_health_summary()
    return ComponentHealth(ok, detail)


def system_health() -> dict[str, Any]:
    components = {
        "database": check_database(),
        "broker": check_broker(),
        "node": check_node(),
        "worker": check_worker(),
        "beat": check_beat(),
    }
    return {
        "status": "ok" if all(c.ok for c in components.values()) else "degraded",
        "checked_at": timezone.now(),
        "components": {name: asdict(c) for name, c in components.items()},
    }
