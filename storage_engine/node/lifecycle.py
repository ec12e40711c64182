"""The node's lifecycle routes: one bounded engine step per call.

``POST /v1/namespaces/{ns}/lifecycle/{operation}`` and
``POST /v1/node/lifecycle/{operation}`` run one bounded step of an operation
of :mod:`storage_engine.node_api.protocol` and answer the engine's result (``more``
says whether to call again). Repeating steps until done, with progress and
cancellation, is the control plane's task runs' job: the node keeps no jobs of
its own. :data:`CALLS` maps each operation to its engine call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from storage_engine.api import DiskStatus, LifecycleResult, StorageAdapter
from storage_engine.errors import InvalidArgumentError
from storage_engine.node.params import arguments
from storage_engine.node.problems import problem_response
from storage_engine.node_api.protocol import ARGUMENTS, Operation, StepRequest
from storage_engine.policies.policy import node_policy_from
from storage_engine.rules.validation import check_offset, int_from_text

if TYPE_CHECKING:
    from storage_engine.node.routes import RouteTable

Call = Callable[[StorageAdapter, StepRequest], LifecycleResult | DiskStatus]
# operation → its engine call; a request only carries the arguments its operation takes
CALLS: dict[Operation, Call] = {
    Operation.EXPIRE_SCAN: lambda e, r: e.expire_scan(
        r.namespace, r.shard, r.limit, manual=r.manual, dry_run=r.dry_run
    ),
    Operation.RETENTION: lambda e, r: e.apply_retention(r.namespace, r.shard, dry_run=r.dry_run),
    Operation.RECLAIM: lambda e, r: e.reclaim(r.namespace, r.shard, r.limit, manual=r.manual, dry_run=r.dry_run),
    Operation.CLEAN_FILES: lambda e, r: e.clean_files(manual=r.manual, dry_run=r.dry_run),
    Operation.COMPACT: lambda e, r: e.compact(r.namespace or "", r.shard, manual=r.manual, dry_run=r.dry_run),
    Operation.COMPACT_DIRTIEST: lambda e, r: e.compact_dirtiest(r.limit or 1, dry_run=r.dry_run),
    Operation.SUBSCRIPTION_TTL: lambda e, r: e.expire_subscriptions(r.namespace, r.shard, dry_run=r.dry_run),
    Operation.BACKLOG_QUOTA: lambda e, r: e.enforce_backlog_quota(r.namespace or "", dry_run=r.dry_run),
    Operation.DISK_CHECK: lambda e, r: e.check_disk(),
    Operation.OFFLOAD: lambda e, r: e.offload(r.namespace, r.shard, r.limit, dry_run=r.dry_run),
    Operation.RECALL: lambda e, r: e.recall(r.namespace, r.shard, r.limit, dry_run=r.dry_run),
}


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


def run_step(engine: StorageAdapter, request: StepRequest) -> LifecycleResult | DiskStatus:
    """One step on this engine (an unknown namespace is a 404 before anything runs)."""
    if request.namespace is not None:
        engine.get_namespace(request.namespace)
    return CALLS[request.operation](engine, request)


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


def add_lifecycle_routes(table: RouteTable, engine: StorageAdapter) -> None:
    route = table.add

    @route("/v1/namespaces/{ns}/lifecycle/{operation}", "POST", "lifecycle_step")
    async def namespace_step(request: Request) -> Response:
        args = await arguments(request, ARGUMENTS)
        step = StepRequest.from_params(request.path_params["operation"], request.path_params["ns"], args)
        return JSONResponse((await run_in_threadpool(run_step, engine, step)).to_dict())

    @route("/v1/node/lifecycle/{operation}", "POST", "node_lifecycle_step")
    async def node_step(request: Request) -> Response:
        args = await arguments(request, ARGUMENTS)
        step = StepRequest.from_params(request.path_params["operation"], None, args)
        return JSONResponse((await run_in_threadpool(run_step, engine, step)).to_dict())

    @route("/v1/namespaces/{ns}/compaction-estimate", "GET", "compaction_estimate")
    async def compaction_estimate(request: Request) -> Response:
        shard = (await arguments(request, {"shard"})).optional_integer("shard")
        estimate = await run_in_threadpool(engine.compaction_estimate, request.path_params["ns"], shard)
        return JSONResponse(estimate.to_dict())

    @route("/v1/namespaces/{ns}/compaction-plan", "POST", "compaction_plan")
    async def compaction_plan(request: Request) -> Response:
        """Compact one shard by a plan computed elsewhere (Spark): ``{"shard", "keep": {base: [offsets]}}``."""
        args = await arguments(request, {"shard"}, body_only={"keep"})
        shard = args.optional_integer("shard")
        if shard is None:
            raise InvalidArgumentError("shard", "is required: the shard the plan compacts")
        plan = _plan(args.json("keep"))
        result = await run_in_threadpool(engine.compact_with_plan, request.path_params["ns"], shard, plan)
        return JSONResponse(result.to_dict())

    @route("/v1/namespaces/{ns}/verify", "POST", "verify")
    async def verify(request: Request) -> Response:
        await arguments(request)
        report = await run_in_threadpool(engine.verify, request.path_params["ns"])
        return JSONResponse(report.to_dict())

    @route("/v1/node/disk", "POST", "disk_check")
    async def disk_check(request: Request) -> Response:
        await arguments(request)
        status = await run_in_threadpool(engine.check_disk)
        return JSONResponse(status.to_dict())

    # Policy and version are read and changed under one lock, so an answer never pairs
    # a policy with another change's version, and If-Match is checked against the version
    # the change replaces.
    policy_lock = asyncio.Lock()

    @route("/v1/node/policy", "GET", "get_node_policy")
    async def get_node_policy(request: Request) -> Response:
        await arguments(request)
        async with policy_lock:
            return _policy_answer(engine)

    @route("/v1/node/policy", "PUT", "put_node_policy")
    async def put_node_policy(request: Request) -> Response:
        values = (await arguments(request, body_only={"policy"})).json("policy")
        if not isinstance(values, dict):
            raise InvalidArgumentError("policy", "must be a JSON object of node policy fields")
        policy = node_policy_from(values)  # a refused policy changes nothing, If-Match or not
        if_match = request.headers.get("if-match")
        async with policy_lock:
            current = engine.node_policy_version()
            if if_match is not None and not etag_matches(if_match, current):
                return problem_response(
                    412,
                    "precondition_failed",
                    f"If-Match {if_match} does not match the node policy's version {current}",
                    path=request.url.path,
                    headers={"ETag": policy_etag(current)},
                    field="If-Match",
                    version=current,
                )
            await run_in_threadpool(engine.set_node_policy, policy)
            return _policy_answer(engine)
