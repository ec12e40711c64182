"""The node's probes, public (no token), for orchestrators and the control plane.

- ``GET /livez``: the process answers HTTP (an orchestrator restarts it when not). It
  asks nothing of the engine: a full disk is no reason to restart a node.
- ``GET /readyz``: whether the node can do its job now: 200, or 503 with problem
  details whose ``reasons`` name each cause — ``engine_closed`` (not open: starting or
  shutting down), ``disk_full`` (appends refused above ``disk_warning_ratio``),
  ``shard_failed`` (shards stopped by a corrupt segment or a failed write). The disk is
  measured at the probe, like a scrape of ``/metrics`` does.
- ``GET /health``: the same findings for people and the control plane: 200 with
  ``status`` ``ok`` or ``degraded`` (and the reasons) while the engine is open — the node
  still serves reads and its lifecycle work, which is what frees a full disk — and 503
  once the engine is closed. Compose's health check uses it, so a degraded node does not
  keep the web console (the way to fix it) from starting.

A shard failure names its namespace and shard only to a caller holding a token: a
public answer says how many shards failed, not what this node stores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from storage_engine.api import StorageAdapter
from storage_engine.errors import EngineClosedError
from storage_engine.node.auth import ACCESS
from storage_engine.node.params import arguments
from storage_engine.node.problems import problem_response

if TYPE_CHECKING:
    from storage_engine.node.routes import RouteTable

Reason = dict[str, Any]


def readiness(engine: StorageAdapter, named: bool) -> list[Reason]:
    """Why the node is not ready (empty when it is); ``named``: list the failed shards by name."""
    try:
        failed = engine.failed_shards()
        disk = engine.check_disk()
    except EngineClosedError:
        return [{"reason": "engine_closed", "detail": "the engine is not open (starting or shutting down)"}]
    reasons: list[Reason] = []
    if disk.disk_full:
        warning = engine.node_policy().disk_warning_ratio
        reasons.append(
            {
                "reason": "disk_full",
                "detail": f"appends are refused: disk use {disk.used_ratio:.1%} is above disk_warning_ratio {warning}",
                "used_ratio": disk.used_ratio,
                "warning_ratio": warning,
            }
        )
    if failed:
        reason: Reason = {
            "reason": "shard_failed",
            "detail": f"{len(failed)} shard(s) stopped by a failure; a restart recovers them from their files",
            "shards": len(failed),
        }
        if named:
            reason["failed"] = [{"namespace": f.namespace, "shard": f.shard, "code": f.code} for f in failed]
        reasons.append(reason)
    return reasons


def add_probe_routes(table: RouteTable, engine: StorageAdapter) -> None:
    route = table.add

    def named(request: Request) -> bool:
        return request.scope.get(ACCESS) in ("full", "metrics")

    @route("/livez", "GET", "livez")
    async def livez(request: Request) -> Response:
        await arguments(request)
        return JSONResponse({"status": "ok"})

    @route("/readyz", "GET", "readyz")
    async def readyz(request: Request) -> Response:
        await arguments(request)
        reasons = await run_in_threadpool(readiness, engine, named(request))
        if not reasons:
            return JSONResponse({"status": "ready", "adapter": engine.name})
        detail = "not ready: " + "; ".join(r["detail"] for r in reasons)
        return problem_response(503, "not_ready", detail, path=request.url.path, reasons=reasons)

    @route("/health", "GET", "health")
    async def health(request: Request) -> Response:
        await arguments(request)
        reasons = await run_in_threadpool(readiness, engine, named(request))
        if any(r["reason"] == "engine_closed" for r in reasons):
            return problem_response(503, "engine_closed", reasons[0]["detail"], path=request.url.path)
        status = "degraded" if reasons else "ok"
        return JSONResponse({"status": status, "adapter": engine.name, "reasons": reasons})
