"""One regression test per root cause of the 5xx answers a fuzz of the node found: each is now a
400 whose JSON body names the field and the rule (or a 404/405 in the same error shape).

In process (Starlette's TestClient) on the segment adapter, whose codec and index keys are
where numbers beyond 64 bits used to fail.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from storage_engine import open_engine
from storage_engine.api import NewRecord, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.config import Durability, EngineConfig
from storage_engine.node.app import build_app
from storage_engine.policies.policy import NamespacePolicy

NS = "orders"
BIG = "9" * 5000  # past int()'s 4,300-digit limit


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[StorageAdapter]:
    config = EngineConfig(data_dir=tmp_path / "data", durability=Durability.NONE, lifecycle_worker=False)
    eng = open_engine(config, clock=ManualClock())
    eng.create_namespace(NS, 2, NamespacePolicy(segment_bytes=1024))
    eng.append(NS, 0, [NewRecord(value=b"v" * 200, key=b"k%d" % i, tags=("t",)) for i in range(12)])
    eng.create_subscription(NS, "sub")
    yield eng
    eng.close()


@pytest.fixture
def http(engine: StorageAdapter) -> Iterator[TestClient]:
    with TestClient(build_app(engine, token=None, clock=ManualClock()), raise_server_exceptions=False) as client:
        yield client


def bad_request(response: Any, field: str, rule: str = "") -> dict[str, Any]:
    """A 400 in the node's error shape (problem details) naming ``field`` (and ``rule`` in its rule)."""
    assert response.status_code == 400, (response.status_code, response.text[:300])
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["code"] in ("invalid_argument", "invalid_record", "invalid_policy"), body
    assert body["type"].endswith("/" + body["code"]) and body["status"] == 400 and body["title"], body
    assert body["detail"], body
    if body["code"] == "invalid_policy":
        assert field in body["errors"] and rule in body["errors"][field], body
    else:
        assert body["field"] == field and rule in body["rule"], body
    return dict(body)


# -- path and query parameters: non-ASCII digits, thousands of digits, "--5" ------------------------
@pytest.mark.parametrize("shard", ["²", "٣", "１", BIG, "-1", "1_0", " 1"])
def test_a_shard_in_the_path_takes_ascii_digits_only(http: TestClient, shard: str) -> None:
    for path in (
        f"/v1/namespaces/{NS}/shards/{shard}/stats",
        f"/v1/namespaces/{NS}/subscriptions/sub/shards/{shard}/records",
    ):
        bad_request(http.get(path), "shard", "from 0 to 9223372036854775807")
    assert http.get(f"/v1/namespaces/{NS}/shards/1/stats").status_code == 200
    assert http.get(f"/v1/namespaces/{NS}/shards/7/stats").json()["code"] == "unknown_shard"  # a number: 404


@pytest.mark.parametrize("value", ["²", "٣", BIG, "--5", "-5", "5.0", "", str(1 << 63)])
@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/shards/0/records", "offset"),
        ("/shards/0/records", "max_records"),
        ("/shards/0/records", "max_bytes"),
        ("/shards/0/tags/t", "offset"),
        ("/shards/0/offset-for-time", "timestamp"),
        ("/shards/0/segments", "limit"),
        ("/compaction-estimate", "shard"),
    ],
)
def test_integer_query_parameters_are_refused_by_name(http: TestClient, path: str, name: str, value: str) -> None:
    bad_request(http.get(f"/v1/namespaces/{NS}{path}", params={name: value}), name)


def test_a_lifecycle_limit_of_double_minus_five_is_refused(http: TestClient) -> None:
    for path in (f"/v1/namespaces/{NS}/lifecycle/reclaim", "/v1/node/lifecycle/compact-dirtiest"):
        bad_request(http.post(path, params={"limit": "--5"}), "limit", "ASCII digits")
        bad_request(http.post(path, params={"limit": "٣"}), "limit")
    assert http.post("/v1/node/lifecycle/compact-dirtiest", params={"limit": "3"}).status_code == 200


# -- JSON bodies: huge integers, deep nesting, NaN/Infinity --------------------------------------------
@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/namespaces", '{"name": "n", "shards": BIG}'.replace("BIG", BIG), "shards"),
        (f"/v1/namespaces/{NS}/subscriptions/sub/shards/0/ack", '{"offset": BIG}'.replace("BIG", BIG), "offset"),
        (f"/v1/namespaces/{NS}/subscriptions/sub/shards/0/ack", f'{{"offset": {1 << 64}}}', "offset"),
        (
            f"/v1/namespaces/{NS}/shards/0/records",
            '{"records": [{"timestamp": -BIG}]}'.replace("BIG", BIG),
            "records[0].timestamp",
        ),
    ],
)
def test_json_integers_beyond_64_bits_are_refused_by_field(http: TestClient, path: str, body: str, field: str) -> None:
    bad_request(http.post(path, content=body.encode()), field, "from -9223372036854775808 to 9223372036854775807")


def test_json_integer_beyond_64_bits_is_refused_in_the_fields_unit(http: TestClient) -> None:
    """The 64-bit rule is worded once the field is known, so it carries the field's unit."""
    body = f'{{"records": [{{"value_text": "x", "ttl_ms": {1 << 64}}}]}}'
    response = http.post(f"/v1/namespaces/{NS}/shards/0/records", content=body.encode())
    bad_request(response, "records[0].ttl_ms", "from -9223372036854775808 to 9223372036854775807 ms")
    missing = http.get(f"/v1/namespaces/{NS}/shards/0/offset-for-time")
    bad_request(
        missing, "timestamp", "is required; it must be an integer from 0 to 9223372036854775807 ms since the epoch"
    )


@pytest.mark.parametrize("opening", [b"[", b'{"a":'])
def test_deeply_nested_json_is_refused(http: TestClient, opening: bytes) -> None:
    closing = b"]" if opening == b"[" else b"}"
    body = opening * 100_000 + b"1" + closing * 100_000
    bad_request(http.post("/v1/namespaces", content=body), "body", "nests too deeply")
    assert http.get("/v1/namespaces").status_code == 200


def test_json_with_an_unpaired_surrogate_is_refused(http: TestClient) -> None:
    bad_request(http.post("/v1/namespaces", content=b'{"name": "\\ud800x"}'), "name", "Unicode")
    bad_request(
        http.post(f"/v1/namespaces/{NS}/shards/0/records", content=b'{"records": [{"tags": ["\\udfff"]}]}'),
        "records[0].tags[0]",
    )
    ok = http.post(f"/v1/namespaces/{NS}/shards/1/records", content=b'{"records": [{"value_text": "\\ud83d\\ude00"}]}')
    assert ok.status_code == 200, ok.text  # a surrogate pair is an emoji, and fine


NUMERIC_POLICY_FIELDS = [f.name for f in fields(NamespacePolicy) if f.type in ("int", "float", "int | None")]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
@pytest.mark.parametrize("field", NUMERIC_POLICY_FIELDS)
def test_nan_and_infinity_in_any_policy_field_are_refused(
    http: TestClient, engine: StorageAdapter, field: str, constant: str
) -> None:
    """They used to be stored, and every later listing of the namespace answered 500, even after a restart."""
    policy = f'{{"{field}": {constant}}}'  # raw text: json.dumps would not write 1e999
    body = '{"name": "n2", "shards": 1, "policy": POLICY}'.replace("POLICY", policy)
    bad_request(http.post("/v1/namespaces", content=body.encode()), f"policy.{field}", "finite number")
    bad_request(
        http.put(f"/v1/namespaces/{NS}", content=('{"policy": POLICY}'.replace("POLICY", policy)).encode()),
        f"policy.{field}",
    )
    listing = http.get("/v1/namespaces")
    assert listing.status_code == 200 and [n["name"] for n in listing.json()["namespaces"]] == [NS]
    json.dumps(engine.get_namespace(NS).policy.to_dict(), allow_nan=False)


def test_a_policy_over_64_bits_is_refused_by_the_policy_rules(http: TestClient) -> None:
    body = {"name": "n2", "shards": 1, "policy": {"retention_ms": (1 << 63) - 1, "segment_ms": True}}
    bad_request(http.post("/v1/namespaces", json=body), "segment_ms", "integer")


@pytest.mark.parametrize("value", [4, 4.5, ["04"], {"h": "04"}, True, "²", "٠٤"])
def test_a_delete_when_that_is_not_a_string_of_hours_is_refused(http: TestClient, value: Any) -> None:
    bad_request(http.put("/v1/node/policy", json={"policy": {"delete_when": value}}), "delete_when")
    assert http.get("/v1/node/policy").status_code == 200


# -- offsets and timestamps beyond 64 bits (struct.error deep in the codec) -----------------------------
@pytest.mark.parametrize("field", ["timestamp", "expire_at"])
def test_append_timestamps_beyond_64_bits_are_refused(http: TestClient, field: str) -> None:
    for value in ((1 << 63), (1 << 64) + 5):
        body = {"records": [{"value_text": "ok"}, {"value_text": "x", field: value}]}
        bad_request(http.post(f"/v1/namespaces/{NS}/shards/0/records", json=body), f"records[1].{field}")
    big_ttl = {"records": [{"value_text": "x", "ttl_ms": (1 << 63) - 1}]}  # now + ttl_ms would pass 2^63-1
    rule = "must be an integer from 1 to 4611686018427387 ms"  # MAX_TTL_MS: now + ttl stays within 64 bits
    bad_request(http.post(f"/v1/namespaces/{NS}/shards/0/records", json=big_ttl), "records[0].ttl_ms", rule)
    assert http.get(f"/v1/namespaces/{NS}/shards/0/stats").json()["end_offset"] == 12  # nothing written


def test_read_offsets_and_times_beyond_64_bits_are_refused(http: TestClient) -> None:
    beyond = str(1 << 64)
    records = f"/v1/namespaces/{NS}/shards/0/records"
    bad_request(http.get(records, params={"offset": beyond}), "offset", "9223372036854775807")
    bad_request(http.get(f"/v1/namespaces/{NS}/shards/0/offset-for-time", params={"timestamp": beyond}), "timestamp")
    past_end = http.get(f"/v1/namespaces/{NS}/shards/0/records", params={"offset": str((1 << 63) - 1)})
    assert past_end.status_code == 416 and past_end.json()["code"] == "offset_out_of_range"
    answer = http.get(f"/v1/namespaces/{NS}/shards/0/offset-for-time", params={"timestamp": str((1 << 63) - 1)})
    assert answer.status_code == 200 and answer.json() == {"offset": None}


# -- a compaction plan with 1e999 --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("keep", "field"),
    [
        ('{"0": [1e999]}', "keep.0[0]"),
        ('{"0": [1, 2.5]}', "keep.0[1]"),
        ('{"0": [true]}', "keep.0[0]"),
        ('{"0": ["1"]}', "keep.0[0]"),
        ('{"0": [-1]}', "keep.0[0]"),
        ('{"²": [1]}', "keep"),
        ('{"BIG": [1]}'.replace("BIG", BIG), "keep"),
        ('{"0": 5}', "keep.0"),
        ("[]", "keep"),
    ],
)
def test_a_bad_compaction_plan_is_refused_by_field(http: TestClient, keep: str, field: str) -> None:
    body = '{"shard": 0, "keep": KEEP}'.replace("KEEP", keep)
    bad_request(http.post(f"/v1/namespaces/{NS}/compaction-plan", content=body.encode()), field)


# -- path components too long for a file system ----------------------------------------------------------
def test_names_too_long_for_a_file_system_never_reach_it(http: TestClient) -> None:
    long = "n" * 5000
    assert http.get(f"/v1/namespaces/{long}").json()["code"] == "unknown_namespace"
    bad_request(http.post("/v1/namespaces", json={"name": long, "shards": 1}), "name")
    bad_request(http.post(f"/v1/namespaces/{NS}/subscriptions", json={"name": long}), "name")
    assert http.delete(f"/v1/namespaces/{NS}/subscriptions/{long}").json()["code"] == "unknown_subscription"
    bad_request(http.post(f"/v1/namespaces/{NS}/ttl-index/ingest", json={"file": long}), "file", "bare name")
    bad_request(http.post(f"/v1/namespaces/{NS}/ttl-index/ingest", json={"path": "/" + long}), "path")


# -- unknown routes and wrong methods: the node's error shape --------------------------------------------
@pytest.mark.parametrize("path", ["/nope", "/v1/namespaces/orders/nope", "/v1/namespaces/orders/shards/0"])
def test_an_unknown_route_is_a_json_404(http: TestClient, path: str) -> None:
    response = http.get(path)
    assert response.status_code == 404 and response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["code"] == "not_found" and path in body["detail"] and body["instance"] == path
    assert (body["status"], body["title"]) == (404, "Not found")


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("DELETE", "/v1/namespaces", ["GET", "HEAD", "POST"]),
        ("PATCH", f"/v1/namespaces/{NS}", ["DELETE", "GET", "HEAD", "PUT"]),
        ("POST", f"/v1/namespaces/{NS}/ttl-index", ["GET", "HEAD", "PUT"]),
        ("GET", f"/v1/namespaces/{NS}/compaction-plan", ["POST"]),
    ],
)
def test_a_wrong_method_is_a_json_405_naming_every_allowed_method(
    http: TestClient, method: str, path: str, allowed: list[str]
) -> None:
    response = http.request(method, path)
    assert response.status_code == 405 and response.headers["content-type"] == "application/problem+json"
    assert response.headers["allow"] == ", ".join(allowed)
    body = response.json()
    assert body["code"] == "method_not_allowed" and body["allowed"] == allowed and body["status"] == 405


def test_an_unexpected_failure_is_a_json_500_without_details(http: TestClient, engine: StorageAdapter) -> None:
    """Not bad input: a bug. Still the error shape, and the details only in the node's log."""
    original = engine.list_namespaces
    engine.list_namespaces = lambda: 1 / 0  # type: ignore[assignment, method-assign, return-value]
    try:
        response = http.get("/v1/namespaces")
    finally:
        engine.list_namespaces = original  # type: ignore[method-assign]
    assert response.status_code == 500 and response.json()["code"] == "internal_error"
    assert response.headers["content-type"] == "application/problem+json"
    assert "ZeroDivision" not in response.text


# -- retention_ms = 0 is valid -----------------------------------------------------------------------------
def test_retention_ms_zero_is_accepted(http: TestClient) -> None:
    created = http.post("/v1/namespaces", json={"name": "z", "shards": 1, "policy": {"retention_ms": 0}})
    assert created.status_code == 201 and created.json()["policy"]["retention_ms"] == 0
    bad_request(
        http.post("/v1/namespaces", json={"name": "z2", "shards": 1, "policy": {"retention_ms": -1}}),
        "retention_ms",
        "must be at least 0 ms",
    )


def test_every_parse_failure_of_a_produce_body_names_a_field(http: TestClient) -> None:
    path = f"/v1/namespaces/{NS}/records"
    bad_request(http.post(path, content=b'{"records": [{"timestamp": 1e999}]}'), "records[0].timestamp", "finite")
    bad_request(http.post(path, content=b'{"records": [{"ttl_ms": NaN}]}'), "records[0].ttl_ms", "finite")
    bad_request(http.post(path, content=b"\xff\xfe\x00{"), "body", "UTF-8")
