"""The node's lifecycle routes: one bounded engine step per call, or a job.

``POST /v1/namespaces/{ns}/lifecycle/{operation}`` runs one bounded step and
answers the engine's result (``more`` says whether to call again);
``POST /v1/jobs`` repeats the same step on the node until done, with
progress at ``GET /v1/jobs/{id}`` and cancellation by ``DELETE``. One table,
:data:`OPERATIONS`, maps operation names to engine calls for both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from storage_engine.api import LifecycleResult, StorageAdapter
from storage_engine.errors import InvalidArgumentError
from storage_engine.node.jobs import JobRegistry
from storage_engine.node.params import json_body, only
from storage_engine.policy import node_policy_from
from storage_engine.validation import check_int, check_offset, int_from_text

if TYPE_CHECKING:
    from storage_engine.node.routes import RouteTable

Step = Callable[[], LifecycleResult]
# operation → (scope, how to call the engine once); the call's arguments are
# (engine, namespace, shard, limit, manual, dry_run).
OPERATIONS: dict[str, tuple[str, Callable[..., LifecycleResult]]] = {
    # "any": a namespace (optionally one shard), or without one a node-wide sweep of every namespace.
    "expire-scan": (
        "any",
        lambda e, ns, shard, limit, manual, dry: e.expire_scan(ns, shard, limit, manual=manual, dry_run=dry),
    ),
    "retention": ("any", lambda e, ns, shard, limit, manual, dry: e.apply_retention(ns, shard, dry_run=dry)),
    "reclaim": (
        "any",
        lambda e, ns, shard, limit, manual, dry: e.reclaim(ns, shard, limit, manual=manual, dry_run=dry),
    ),
    "clean-files": ("node", lambda e, ns, shard, limit, manual, dry: e.clean_files(manual=manual, dry_run=dry)),
    "compact": (
        "namespace",
        lambda e, ns, shard, limit, manual, dry: e.compact(ns, shard, manual=manual, dry_run=dry),
    ),
    "compact-dirtiest": ("node", lambda e, ns, shard, limit, manual, dry: e.compact_dirtiest(limit or 1)),
    "subscription-ttl": ("any", lambda e, ns, shard, limit, manual, dry: e.expire_subscriptions(ns, shard)),
    "backlog-quota": ("namespace", lambda e, ns, shard, limit, manual, dry: e.enforce_backlog_quota(ns)),
}
# Operations that take ``dry_run`` (report what would happen, change nothing).
DRY_RUNS = frozenset({"expire-scan", "retention", "reclaim", "clean-files", "compact"})


def _optional_int(value: Any, name: str, minimum: int) -> int | None:
    """A query parameter's text or a JSON body's integer, from ``minimum`` to 2^63-1."""
    if value is None:
        return None
    if isinstance(value, str):
        return int_from_text(value, name, minimum)
    return check_int(value, name, minimum)


def _plan(keep: Any) -> dict[int, list[int]]:
    """A compaction plan's ``keep``: segment base offset (a JSON key, so text) → offsets to keep."""
    if not isinstance(keep, dict):
        raise InvalidArgumentError("keep", "is required: {segment base offset: [offsets to keep]}")
    plan: dict[int, list[int]] = {}
    for base_text, offsets in keep.items():
        base = int_from_text(base_text, "keep")  # the key's text is in no message: it may be anything
        if not isinstance(offsets, list):
            raise InvalidArgumentError(f"keep.{base}", "must be a list of offsets to keep")
        plan[base] = [check_offset(o, f"keep.{base}[{i}]") for i, o in enumerate(offsets)]
    return plan


def _flag(value: Any, name: str) -> bool:
    if value in (None, False, "false", "0", ""):
        return False
    if value in (True, "true", "1"):
        return True
    raise InvalidArgumentError(name, "must be true or false")


def make_step(engine: StorageAdapter, operation: str, args: dict[str, Any]) -> tuple[Step, dict[str, Any]]:
    """The bound engine call for ``operation`` and the target it acts on."""
    if operation not in OPERATIONS:
        raise InvalidArgumentError("operation", f"must be one of {', '.join(sorted(OPERATIONS))}")
    scope, call = OPERATIONS[operation]
    namespace = args.get("namespace")
    if scope == "namespace" and not isinstance(namespace, str):
        raise InvalidArgumentError("namespace", f"is required for {operation}")
    if namespace is not None and not isinstance(namespace, str):
        raise InvalidArgumentError("namespace", "must be a namespace name (a string)")
    shard = _optional_int(args.get("shard"), "shard", 0)
    limit = _optional_int(args.get("limit"), "limit", 1)
    manual = _flag(args.get("manual"), "manual")
    dry_run = _flag(args.get("dry_run"), "dry_run")
    if dry_run and operation not in DRY_RUNS:
        raise InvalidArgumentError("dry_run", f"is offered for {', '.join(sorted(DRY_RUNS))}, not {operation}")
    if isinstance(namespace, str):
        engine.get_namespace(namespace)  # unknown namespace → 404 now, not inside a job
    if isinstance(namespace, str):
        target = {"namespace": namespace, "shard": shard}
    elif shard is not None:
        raise InvalidArgumentError("shard", f"needs a namespace for {operation}")
    else:
        target = {"node": True}
    return (lambda: call(engine, namespace, shard, limit, manual, dry_run)), target


def policy_etag(version: int) -> str:
    """The node policy's entity tag: its version, quoted (a strong validator)."""
    return f'"{version}"'


def etag_matches(if_match: str, version: int) -> bool:
    """RFC 9110 If-Match: ``*`` or a list holding the current tag (strong comparison: a weak
    ``W/`` tag never matches)."""
    tags = [tag.strip() for tag in if_match.split(",")]
    return "*" in tags or policy_etag(version) in tags


def _policy_answer(engine: StorageAdapter) -> JSONResponse:
    version = engine.node_policy_version()
    return JSONResponse(
        {"policy": engine.node_policy().to_dict(), "version": version}, headers={"ETag": policy_etag(version)}
    )


def add_lifecycle_routes(table: RouteTable, engine: StorageAdapter, jobs: JobRegistry) -> None:
    route = table.add

    @route("/v1/namespaces/{ns}/lifecycle/{operation}", "POST", "lifecycle_step")
    async def namespace_step(request: Request) -> Response:
        args = {"namespace": request.path_params["ns"], **request.query_params}
        step, _ = make_step(engine, request.path_params["operation"], args)
        return JSONResponse((await run_in_threadpool(step)).to_dict())

    @route("/v1/node/lifecycle/{operation}", "POST", "node_lifecycle_step")
    async def node_step(request: Request) -> Response:
        step, _ = make_step(engine, request.path_params["operation"], dict(request.query_params))
        return JSONResponse((await run_in_threadpool(step)).to_dict())

    @route("/v1/namespaces/{ns}/compaction-estimate", "GET", "compaction_estimate")
    async def compaction_estimate(request: Request) -> Response:
        shard = _optional_int(request.query_params.get("shard"), "shard", 0)
        return JSONResponse(await run_in_threadpool(engine.compaction_estimate, request.path_params["ns"], shard))

    @route("/v1/namespaces/{ns}/compaction-plan", "POST", "compaction_plan")
    async def compaction_plan(request: Request) -> Response:
        """Compact one shard by a plan computed elsewhere (Spark): ``{"shard", "keep": {base: [offsets]}}``."""
        body = await json_body(request)
        only(body, {"shard", "keep"})
        shard = _optional_int(body.get("shard"), "shard", 0)
        if shard is None:
            raise InvalidArgumentError("shard", "is required: the shard the plan compacts")
        plan = _plan(body.get("keep"))
        result = await run_in_threadpool(engine.compact_with_plan, request.path_params["ns"], shard, plan)
        return JSONResponse(result.to_dict())

    @route("/v1/namespaces/{ns}/verify", "POST", "verify")
    async def verify(request: Request) -> Response:
        report = await run_in_threadpool(engine.verify, request.path_params["ns"])
        return JSONResponse(report.to_dict())

    @route("/v1/node/disk", "POST", "disk_check")
    async def disk_check(request: Request) -> Response:
        status = await run_in_threadpool(engine.check_disk)
        return JSONResponse(status.to_dict())

    # Policy and version are read and changed under one lock, so an answer never pairs
    # a policy with another change's version, and If-Match is checked against the version
    # the change replaces.
    policy_lock = asyncio.Lock()

    @route("/v1/node/policy", "GET", "get_node_policy")
    async def get_node_policy(request: Request) -> Response:
        async with policy_lock:
            return _policy_answer(engine)

    @route("/v1/node/policy", "PUT", "put_node_policy")
    async def put_node_policy(request: Request) -> Response:
        body = await json_body(request)
        only(body, {"policy"})
        values = body.get("policy")
        if not isinstance(values, dict):
            raise InvalidArgumentError("policy", "must be a JSON object of node policy fields")
        policy = node_policy_from(values)  # a refused policy changes nothing, If-Match or not
        if_match = request.headers.get("if-match")
        async with policy_lock:
            current = engine.node_policy_version()
            if if_match is not None and not etag_matches(if_match, current):
                return JSONResponse(
                    {
                        "error": "precondition_failed",
                        "message": f"If-Match {if_match} does not match the node policy's version {current}",
                        "field": "If-Match",
                        "version": current,
                    },
                    status_code=412,
                    headers={"ETag": policy_etag(current)},
                )
            await run_in_threadpool(engine.set_node_policy, policy)
            return _policy_answer(engine)

    @route("/v1/jobs", "POST", "start_job")
    async def start_job(request: Request) -> Response:
        body = await json_body(request)
        only(body, {"operation", "namespace", "shard", "limit", "manual"})
        operation = body.get("operation")
        if not isinstance(operation, str):
            raise InvalidArgumentError("operation", "is required")
        step, target = await run_in_threadpool(make_step, engine, operation, body)
        return JSONResponse(jobs.start(operation, target, step).to_dict(), status_code=202)

    @route("/v1/jobs", "GET", "list_jobs")
    async def list_jobs(request: Request) -> Response:
        return JSONResponse({"jobs": [j.to_dict() for j in jobs.list()]})

    @route("/v1/jobs/{id}", "GET", "get_job")
    async def get_job(request: Request) -> Response:
        return JSONResponse(jobs.get(request.path_params["id"]).to_dict())

    @route("/v1/jobs/{id}", "DELETE", "cancel_job")
    async def cancel_job(request: Request) -> Response:
        return JSONResponse(jobs.cancel(request.path_params["id"]).to_dict())
