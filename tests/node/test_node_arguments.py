"""One way to pass arguments to the node (issue 26), against a real node process.

:data:`ROUTES` has an entry for every route of the node's app (a new route without one fails
:func:`test_the_table_covers_every_route`) with each argument docs/node-api.md lists for it. For each
argument a :class:`Case` sends it in the query and, unless the route is a ``GET``, in the JSON body,
on the same fresh state each time, and reads its observable effect: the two must be the same and the
expected one, and sending the request without the argument must observe something else (so the
argument is honoured, never ignored). Every route refuses an unknown argument by name from either
place, a ``GET`` refuses a body, and an argument given in both places with different values is a 400
naming it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.routing import Route as StarletteRoute

from storage_engine import open_engine
from storage_engine.api import NewRecord
from storage_engine.config import Durability, EngineConfig
from storage_engine.formats.framing import MEDIA_TYPE, encode_produce
from storage_engine.node.app import build_app
from storage_engine.node_api.client import NodeClient
from tests.node.node_argument_effects import (
    FILLED,
    MANUAL,
    OFF_PEAK,
    SEGMENTED,
    SUBSCRIBED,
    Ctx,
    Observe,
    Setup,
    answer,
    backlog_subscriptions,
    count_of,
    created_with_shards,
    dead_lists,
    expiring,
    filled,
    first_offset,
    key_offset,
    keyed,
    name_is_trials,
    nothing,
    offloaded,
    past_first,
    pending_expiry,
    placed_sst,
    plan_effect,
    remote_untouched,
    restore_node_policy,
    segment_states,
    shard_0_untouched,
    status_or,
)
from tests.support.processes import NodeProc, start_node

_names = itertools.count()


@dataclass(frozen=True)
class Case:
    """Argument ``arg`` sent as ``value`` (with ``others`` beside it, in the same place) after
    ``setup``: ``observe`` must read ``expected`` whichever place it came from, and something else
    without it. ``body`` holds the route's body-only fields (a plan's ``keep``), sent every time."""

    arg: str
    value: Any
    observe: Observe
    expected: Any
    setup: Setup = nothing
    others: Mapping[str, Any] = field(default_factory=dict)
    path: Mapping[str, str] = field(default_factory=dict)
    body: Mapping[str, Any] = field(default_factory=dict)
    teardown: Setup = nothing


@dataclass(frozen=True)
class Route:
    """``json``: a route whose arguments come from the query or its JSON body; ``query``: a ``GET``;
    ``data``: the body is data (an SST file), so arguments come from the query only."""

    body: str
    cases: tuple[Case, ...] = ()
    body_only: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()  # documented as refused on this route


SUB = "/v1/namespaces/{ns}/subscriptions/{name}/shards/{shard}"

# -- the table: every route, every argument it documents -------------------------------------------------------
ROUTES: dict[tuple[str, str], Route] = {
    ("GET", "/livez"): Route("query"),
    ("GET", "/readyz"): Route("query"),
    ("GET", "/health"): Route("query"),
    ("GET", "/metrics"): Route("query"),
    ("GET", "/v1/stats"): Route("query"),
    ("GET", "/v1/namespaces"): Route("query"),
    ("POST", "/v1/namespaces"): Route(
        "json",
        (
            Case("name", "{ns}", status_or(name_is_trials), True),
            Case("shards", 3, answer("shards"), 3, others={"name": "{ns}"}),
        ),
        body_only=("policy",),
    ),
    ("GET", "/v1/namespaces/{ns}"): Route("query"),
    ("PUT", "/v1/namespaces/{ns}"): Route(
        "json", (Case("shards", 2, status_or(created_with_shards), (201, 2), body={"policy": {}}),), ("policy",)
    ),
    ("DELETE", "/v1/namespaces/{ns}"): Route("json"),
    ("POST", "/v1/namespaces/{ns}/shards/{shard}/records"): Route("json", body_only=("records",)),
    ("POST", "/v1/namespaces/{ns}/records"): Route("json", body_only=("records",)),
    ("GET", "/v1/namespaces/{ns}/shards/{shard}/records"): Route(
        "query",
        (
            Case("offset", 5, status_or(first_offset), 5, FILLED),
            Case("max_records", 1, count_of("records"), 1, FILLED),
            Case("max_bytes", 1, count_of("records"), 1, FILLED),
        ),
    ),
    ("GET", "/v1/namespaces/{ns}/shards/{shard}/key"): Route(
        "query", (Case("key", "k1", status_or(key_offset), 7, FILLED),)
    ),
    ("GET", "/v1/namespaces/{ns}/shards/{shard}/tags/{tag}"): Route(
        "query",
        (
            Case("offset", 5, status_or(first_offset), 5, FILLED),
            Case("max_records", 1, count_of("records"), 1, FILLED),
        ),
    ),
    ("GET", "/v1/namespaces/{ns}/shards/{shard}/offset-for-time"): Route(
        "query", (Case("timestamp", 1050, answer("offset"), 5, FILLED),)
    ),
    ("GET", "/v1/namespaces/{ns}/shards/{shard}/segments"): Route(
        "query",
        (
            Case("limit", 1, count_of("segments"), 1, SEGMENTED),
            Case("after", 0, status_or(past_first), True, SEGMENTED),
        ),
    ),
    ("GET", "/v1/namespaces/{ns}/shards/{shard}/segment-files"): Route(
        "query",
        (
            Case("state", "all", status_or(segment_states), ["active", "sealed"], SEGMENTED),
            Case("dead", False, status_or(dead_lists), {"None"}, SEGMENTED),
            Case("after", 0, status_or(past_first), True, SEGMENTED),
            Case("limit", 1, count_of("segments"), 1, SEGMENTED),
        ),
    ),
    ("GET", "/v1/namespaces/{ns}/shards/{shard}/stats"): Route("query"),
    ("POST", "/v1/namespaces/{ns}/lifecycle/{operation}"): Route(
        "json",
        (
            # the cases: a compaction dry run in the body really compacted, a recall one recalled
            Case("dry_run", True, status_or(shard_0_untouched), True, keyed((0,)), MANUAL, {"operation": "compact"}),
            Case("dry_run", True, status_or(remote_untouched), True, offloaded, {"limit": 1}, {"operation": "recall"}),
            Case("limit", 10, answer("expired_records"), 10, expiring((30,)), MANUAL),
            Case("shard", 1, answer("expired_records"), 5, expiring((5, 5)), MANUAL),
            Case("manual", True, answer("expired_records"), 2, OFF_PEAK, teardown=restore_node_policy),
        ),
    ),
    ("POST", "/v1/node/lifecycle/{operation}"): Route(
        "json",
        (
            Case("limit", 1, answer("expired_records"), 1, expiring((30,)), MANUAL),
            Case("dry_run", True, status_or(pending_expiry), 5, expiring((5,)), MANUAL),
            Case("manual", True, status_or(pending_expiry), 0, OFF_PEAK, teardown=restore_node_policy),
        ),
        refused=("shard",),
    ),
    ("GET", "/v1/namespaces/{ns}/compaction-estimate"): Route(
        "query", (Case("shard", 1, answer("records_removable"), 0, keyed((0,))),)
    ),
    ("POST", "/v1/namespaces/{ns}/compaction-plan"): Route(
        "json",
        (Case("shard", 1, status_or(plan_effect), (True, True), keyed((0, 1)), body={"keep": {"0": [0]}}),),
        ("keep",),
    ),
    ("POST", "/v1/namespaces/{ns}/verify"): Route("json"),
    ("POST", "/v1/node/disk"): Route("json"),
    ("GET", "/v1/node/next-due"): Route("query"),
    ("POST", "/v1/node/due/{operation}"): Route(
        "json", (Case("limit", 1, answer("expired_records"), 1, expiring((30,))),)
    ),
    ("GET", "/v1/node/policy"): Route("query"),
    ("PUT", "/v1/node/policy"): Route("json", body_only=("policy",)),
    ("GET", "/v1/namespaces/{ns}/subscriptions"): Route("query"),
    ("POST", "/v1/namespaces/{ns}/subscriptions"): Route(
        "json",
        (
            Case("name", "s1", answer("name"), "s1", filled(5)),
            Case("initial", "latest", answer("cursors"), [4], filled(5), others={"name": "s1"}),
        ),
    ),
    ("DELETE", "/v1/namespaces/{ns}/subscriptions/{name}"): Route("json"),
    ("GET", SUB + "/records"): Route(
        "query",
        (
            Case("max_records", 1, count_of("records"), 1, SUBSCRIBED),
            Case("max_bytes", 1, count_of("records"), 1, SUBSCRIBED),
        ),
    ),
    ("POST", SUB + "/ack"): Route("json", (Case("offset", 2, answer("cursor"), 2, SUBSCRIBED),)),
    ("POST", SUB + "/seek"): Route(
        "json",
        (
            Case("position", 1, answer("cursor"), 1, SUBSCRIBED),
            Case("timestamp", 1030, answer("cursor"), 2, SUBSCRIBED),
        ),
    ),
    ("GET", "/v1/namespaces/{ns}/backlog"): Route(
        "query",
        (Case("subscription", "a", status_or(backlog_subscriptions), ["a"], filled(5, subscriptions=("a", "b"))),),
    ),
    ("GET", "/v1/namespaces/{ns}/ttl-index"): Route("query"),
    ("PUT", "/v1/namespaces/{ns}/ttl-index"): Route("data"),
    ("POST", "/v1/namespaces/{ns}/ttl-index/ingest"): Route(
        "json", (Case("file", "{ns}.sst", answer("ingested"), 2, placed_sst),)
    ),
}
PATH_DEFAULTS = {"shard": "0", "tag": "t", "name": "sub", "operation": "expire-scan"}


# -- sending -------------------------------------------------------------------------------------------------
def resolve(value: Any, ctx: Ctx) -> Any:
    return value.replace("{ns}", ctx.ns) if isinstance(value, str) else value


def query_text(value: Any) -> str:
    """How a query writes a JSON value: ``true``/``false``, digits, the text itself."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def url(template: str, ctx: Ctx, path: Mapping[str, str]) -> str:
    filled_in = {**PATH_DEFAULTS, **path, "ns": ctx.ns}
    for name, value in filled_in.items():
        template = template.replace("{" + name + "}", value)
    return template


def send(
    ctx: Ctx,
    method: str,
    template: str,
    place: str,
    args: Mapping[str, Any],
    case_body: Mapping[str, Any],
    path: Mapping[str, str],
) -> httpx.Response:
    """``args`` in the query (as text) or in the JSON body, beside the body-only fields."""
    args = {name: resolve(value, ctx) for name, value in args.items()}
    query = {name: query_text(value) for name, value in args.items()} if place == "query" else {}
    body = {**case_body, **(args if place == "body" else {})}
    return ctx.http.request(method, url(template, ctx, path), params=query, json=body if body else None)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProc]:
    proc = start_node(tmp_path_factory.mktemp("arguments") / "node-data")
    yield proc
    proc.stop()


@pytest.fixture
def trial(node: NodeProc) -> Iterator[Callable[[], Ctx]]:
    """Fresh trials on the module's node: each a namespace name no other trial uses."""
    headers = {"Authorization": f"Bearer {node.token}"}
    with (
        httpx.Client(base_url=node.url, headers=headers, timeout=30) as http,
        NodeClient(node.url, node.token) as client,
    ):
        yield lambda: Ctx(node, http, client, f"args-{next(_names)}")


def bad_request(response: httpx.Response, field_name: str, rule: str = "") -> None:
    assert response.status_code == 400, (response.status_code, response.text[:300])
    body = response.json()
    assert body["code"] == "invalid_argument" and body["field"] == field_name and rule in body["rule"], body


# -- the tests -------------------------------------------------------------------------------------------------
def app_routes(tmp_path: Path) -> set[tuple[str, str]]:
    """Every (method, path) the node's app serves (``HEAD`` goes with ``GET``)."""
    config = EngineConfig(
        data_dir=tmp_path / "data", adapter="memory", durability=Durability.NONE, lifecycle_worker=False
    )
    engine = open_engine(config)
    try:
        app = build_app(engine, token=None)
        return {
            (m, r.path) for r in app.routes if isinstance(r, StarletteRoute) for m in r.methods or () if m != "HEAD"
        }
    finally:
        engine.close()


def test_the_table_covers_every_route(tmp_path: Path) -> None:
    served = app_routes(tmp_path)
    assert len(served) > 30  # the app as it is built, not an empty list
    assert sorted(served - set(ROUTES)) == [], "a route without an entry in ROUTES: list its arguments"
    assert sorted(set(ROUTES) - served) == [], "an entry for a route the node does not serve"
    for (method, _), route in ROUTES.items():
        assert (route.body == "query") == (method == "GET")


CASES = [
    pytest.param(
        method,
        template,
        case,
        id=f"{method} {template} {case.arg}={case.value}{' ' + str(dict(case.path)) if case.path else ''}",
    )
    for (method, template), route in ROUTES.items()
    for case in route.cases
]


@pytest.mark.parametrize(("method", "template", "case"), CASES)
def test_each_argument_is_honoured_alike_from_the_query_and_the_body(
    trial: Callable[[], Ctx], method: str, template: str, case: Case
) -> None:
    places = ["query"] if ROUTES[(method, template)].body == "query" else ["query", "body"]
    seen: dict[str, Any] = {}
    for place in [*places, "without"]:
        ctx = trial()
        case.setup(ctx)
        try:
            args = dict(case.others) if place == "without" else {case.arg: case.value, **case.others}
            response = send(ctx, method, template, "body" if place == "without" else place, args, case.body, case.path)
            assert response.status_code < 500, response.text
            seen[place] = case.observe(ctx, response)
        finally:
            case.teardown(ctx)
    assert all(seen[place] == case.expected for place in places), seen
    assert seen["without"] != case.expected, seen  # without it the effect is another: the argument did something


ROUTE_PARAMS = [pytest.param(method, template, id=f"{method} {template}") for method, template in ROUTES]


@pytest.mark.parametrize(("method", "template"), ROUTE_PARAMS)
def test_an_unknown_argument_is_refused_by_name_from_either_place(
    trial: Callable[[], Ctx], method: str, template: str
) -> None:
    route, ctx = ROUTES[(method, template)], trial()
    bad_request(send(ctx, method, template, "query", {"bogus": 1}, {}, {}), "bogus", "unknown argument")
    if route.body == "json":
        bad_request(send(ctx, method, template, "body", {"bogus": 1}, {}, {}), "bogus", "unknown argument")
    elif route.body == "query":  # a GET takes no body: refused, not ignored
        response = ctx.http.request(method, url(template, ctx, {}), content=b'{"bogus": 1}')
        bad_request(response, "body", "must be empty")
    for name in route.body_only:
        bad_request(send(ctx, method, template, "query", {name: "x"}, {}, {}), name, "JSON body")
    for name in route.refused:
        for place in ("query", "body"):
            bad_request(send(ctx, method, template, place, {name: 1}, {}, {}), name)
    assert ctx.http.get(f"/v1/namespaces/{ctx.ns}").status_code == 404  # a refused request changed nothing


def test_a_binary_batch_takes_no_query_argument(trial: Callable[[], Ctx]) -> None:
    ctx = trial()
    ctx.client.create_namespace(ctx.ns, 1)
    batch = encode_produce([NewRecord(value=b"x")])
    for path in (f"/v1/namespaces/{ctx.ns}/shards/0/records", f"/v1/namespaces/{ctx.ns}/records"):
        refused = ctx.http.post(path, params={"bogus": "1"}, content=batch, headers={"Content-Type": MEDIA_TYPE})
        bad_request(refused, "bogus", "unknown argument")
        assert ctx.http.post(path, content=batch, headers={"Content-Type": MEDIA_TYPE}).status_code == 200
    assert ctx.client.shard_stats(ctx.ns, 0)["record_count"] == 2  # the refused ones wrote nothing


def test_an_sst_upload_takes_no_query_argument(trial: Callable[[], Ctx]) -> None:
    ctx = trial()
    ctx.client.create_namespace(ctx.ns, 1)
    refused = ctx.http.put(f"/v1/namespaces/{ctx.ns}/ttl-index", params={"file": "x.sst"}, content=b"not an sst")
    bad_request(refused, "file", "unknown argument")
    assert list((ctx.node.data_dir / "import").glob("upload-*")) == []


JSON_CASES = [
    pytest.param(method, template, route.cases[0], id=f"{method} {template} {route.cases[0].arg}")
    for (method, template), route in ROUTES.items()
    if route.body == "json" and route.cases
]


def other_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    return value + "x"


@pytest.mark.parametrize(("method", "template", "case"), JSON_CASES)
def test_one_argument_in_both_places_must_agree(
    trial: Callable[[], Ctx], method: str, template: str, case: Case
) -> None:
    ctx = trial()
    case.setup(ctx)
    try:
        value = resolve(case.value, ctx)
        target = url(template, ctx, case.path)
        others = {name: resolve(v, ctx) for name, v in case.others.items()}
        conflict = ctx.http.request(
            method,
            target,
            params={case.arg: query_text(value)},
            json={**case.body, **others, case.arg: other_value(value)},
        )
        bad_request(conflict, case.arg, "given in both the query and the body")
        repeated = ctx.http.request(
            method,
            target,
            params=[(case.arg, query_text(value)), (case.arg, query_text(value))],
            json={**case.body, **others},
        )
        bad_request(repeated, case.arg, "more than once")
        agreeing = ctx.http.request(
            method, target, params={case.arg: query_text(value)}, json={**case.body, **others, case.arg: value}
        )
        assert case.observe(ctx, agreeing) == case.expected  # the same value in both places is no conflict
    finally:
        case.teardown(ctx)


@pytest.mark.parametrize(("text", "value"), [("1", True), ("0", False), ("07", 7)])
def test_a_query_text_and_a_json_value_agree_when_they_mean_the_same(
    trial: Callable[[], Ctx], text: str, value: Any
) -> None:
    ctx = trial()
    expiring((30,))(ctx)
    name = "dry_run" if isinstance(value, bool) else "limit"
    path = f"/v1/namespaces/{ctx.ns}/lifecycle/expire-scan"
    result = ctx.http.post(path, params={name: text, "manual": "true"}, json={name: value})
    assert result.status_code == 200, result.text
    if name == "limit":
        assert result.json()["expired_records"] == 7
    else:  # dry_run=0 is a real run: nothing left to expire after it; dry_run=1 leaves all 30
        assert pending_expiry(ctx, result) == (30 if value else 0)
