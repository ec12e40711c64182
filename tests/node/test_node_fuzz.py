"""A fuzzer over every node route, in process: hostile path and query parameters and JSON
bodies must be answered with a 4xx in the node's error shape, never a 5xx.

Routes, methods and path templates come from the app itself, so a new route is fuzzed
without touching this file. Derandomized and bounded, so it is a regular, repeatable test.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from starlette.routing import Route
from starlette.testclient import TestClient

from storage_engine import open_engine
from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.config import Durability, EngineConfig
from storage_engine.node.app import build_app
from storage_engine.policies.policy import NodePolicy

NS = "fz"
SUB = "sub"
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH"]
# Per adapter; both together take seconds. NODE_FUZZ_EXAMPLES=20000 (and NODE_FUZZ_SEED) for a long hunt.
EXAMPLES = int(os.environ.get("NODE_FUZZ_EXAMPLES", "400"))
SEED = os.environ.get("NODE_FUZZ_SEED")

# Text that Python's int() misreads or chokes on, and names too long for a file system.
HOSTILE_TEXT = [
    "²",
    "٣",
    "１",
    "9" * 5000,
    "-" + "9" * 30,
    "--5",
    "-1",
    " 5",
    "1_000",
    "0x10",
    "1e3",
    "NaN",
    "",
    "x" * 300,
    "é" * 200,
    "..",
    ".",
    "%00",
    str(1 << 63),
    str(1 << 64),
]
GOOD_TEXT = {"ns": NS, "shard": "0", "name": SUB, "tag": "t", "operation": "expire-scan", "id": "nope"}
OPERATIONS = ["expire-scan", "retention", "reclaim", "compact", "subscription-ttl", "backlog-quota", "clean-files"]
QUERY_NAMES = ["offset", "max_records", "max_bytes", "limit", "after", "timestamp", "key", "shard", "manual"]
FIELD_NAMES = [
    "name",
    "shards",
    "policy",
    "records",
    "offset",
    "shard",
    "keep",
    "file",
    "path",
    "operation",
    "namespace",
    "limit",
    "manual",
    "initial",
    "timestamp",
    "expire_at",
    "ttl_ms",
    "tags",
    "value_text",
    "key_text",
    "headers",
    "retention_ms",
    "reclaim_dead_ratio",
    "delete_when",
    "disk_warning_ratio",
    "0",
]
HOSTILE_NUMBERS: list[Any] = [1 << 63, -(1 << 63) - 1, 1 << 64, 10**30, math.nan, math.inf, -math.inf, 1e308, True]
# Bodies no JSON encoder writes: raw text.
RAW_BODIES = [
    b'{"name": "n", "shards": ' + b"9" * 5000 + b"}",
    b"[" * 50_000 + b"]" * 50_000,
    b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    b'{"policy": {"reclaim_dead_ratio": NaN}}',
    b'{"policy": {"retention_ms": Infinity}}',
    b'{"policy": {"delete_when": -Infinity}}',
    b'{"shard": 0, "keep": {"0": [1e999]}}',
    b'{"offset": 1e999}',
    b'{"name": "\\ud800"}',
    b'{"\\udfff": 1}',
    b"\xff\xfe{}",
    b"\xed\xa0\x80",
    b"",
    b"null",
    b"NaN",
]

values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 70), max_value=1 << 70)
    | st.floats()
    | st.sampled_from(HOSTILE_NUMBERS)
    | st.text(max_size=20)
    | st.sampled_from(HOSTILE_TEXT),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.sampled_from(FIELD_NAMES), children, max_size=4)
    ),
    max_leaves=12,
)
# JSON objects shaped like the node's bodies: real field names, hostile values (json.dumps writes NaN/Infinity).
bodies = st.one_of(
    st.dictionaries(st.sampled_from(FIELD_NAMES), values, max_size=5).map(lambda d: json.dumps(d).encode()),
    st.sampled_from(RAW_BODIES),
    values.map(lambda v: json.dumps(v).encode()),
)
param_text = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=10), st.integers().map(str))


def route_templates(app: Any) -> list[tuple[str, list[str]]]:
    return [(r.path, sorted(r.methods or ())) for r in app.routes if isinstance(r, Route)]


@st.composite
def requests(draw: st.DrawFn, templates: list[tuple[str, list[str]]]) -> tuple[str, str, dict[str, str], bytes | None]:
    template, methods = draw(st.sampled_from(templates))
    method = draw(st.sampled_from(methods) if draw(st.integers(0, 9)) else st.sampled_from(METHODS))

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "operation" and draw(st.booleans()):
            return draw(st.sampled_from(OPERATIONS))
        return quote(draw(st.just(GOOD_TEXT.get(name, "x")) | param_text), safe="")  # the node gets it decoded

    path = re.sub(r"\{(\w+)\}", fill, template)
    if draw(st.integers(0, 19)) == 0:
        path = draw(st.sampled_from(["/nope", "/v1", "/v1/namespaces/fz/nope", "/v1/namespaces/fz/shards"]))
    query = draw(st.dictionaries(st.sampled_from(QUERY_NAMES), param_text, max_size=3))
    body = draw(st.none() | bodies) if method in ("POST", "PUT") else None
    return method, path, query, body


def assert_answer_is_sound(response: Any, request: tuple[Any, ...]) -> None:
    assert response.status_code < 500, (request, response.status_code, response.text[:500])
    if response.status_code >= 400 and request[0] != "HEAD":  # a HEAD answer has no body
        body = response.json()  # JSON, whatever went wrong
        assert isinstance(body, dict) and isinstance(body.get("code"), str), body
        assert body.get("status") == response.status_code and isinstance(body.get("type"), str), body
        assert isinstance(body.get("detail"), str) and body["detail"], body


@pytest.fixture(scope="module", params=["memory", "segment"])
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, Any]]:
    data_dir: Path = tmp_path_factory.mktemp(f"fuzz-{request.param}")
    config = EngineConfig(data_dir=data_dir, adapter=request.param, durability=Durability.NONE, lifecycle_worker=False)
    engine = open_engine(config, clock=ManualClock())
    app = build_app(engine, token=None, clock=ManualClock())
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, (engine, app)


def reset(engine: StorageAdapter) -> None:
    """Each example starts from one namespace with a record, a subscription and the default node policy."""
    if NS not in {n.name for n in engine.list_namespaces()}:
        engine.create_namespace(NS, 2)
        engine.append(NS, 0, [NewRecord(value=b"v", key=b"k", tags=("t",))])
    if SUB not in {s.name for s in engine.list_subscriptions(NS)}:
        engine.create_subscription(NS, SUB)
    if engine.node_policy() != NodePolicy():
        engine.set_node_policy(NodePolicy())


def test_no_route_answers_bad_input_with_a_5xx(node: tuple[TestClient, Any]) -> None:
    client, (engine, app) = node
    templates = route_templates(app)
    assert len(templates) > 30  # every route of the app takes part
    statuses: dict[int, int] = {}

    @settings(
        max_examples=EXAMPLES,
        derandomize=SEED is None,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(request=requests(templates))
    def fuzz(request: tuple[str, str, dict[str, str], bytes | None]) -> None:
        reset(engine)
        method, path, query, body = request
        response = client.request(method, path, params=query, content=body)
        assert_answer_is_sound(response, request)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

    (fuzz if SEED is None else seed(int(SEED))(fuzz))()
    print(sorted(statuses.items()))
    assert sum(statuses.values()) >= EXAMPLES
    assert {200, 400, 404, 405} <= set(statuses)  # it reached handlers, not only the router
