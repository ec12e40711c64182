"""Binary framing round trips, and fuzzing of produce bodies: bad input is a 4xx
naming the field, never a 500, and changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from storage_engine import open_engine
from storage_engine.api import NewRecord
from storage_engine.clock import ManualClock
from storage_engine.config import Durability, EngineConfig
from storage_engine.formats.framing import MEDIA_TYPE, decode_fetch, encode_produce
from storage_engine.node.app import build_app

RECORDS = [
    NewRecord(value=b"v1", key=b"k", tags=("t",), headers=(("h", b"\x00"),), timestamp=5, expire_at=10**13),
    NewRecord(value=None, key=b"k"),
    NewRecord(value=b"x" * 300),
]


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    data_dir: Path = tmp_path_factory.mktemp("fuzz-node")
    engine = open_engine(EngineConfig(data_dir=data_dir, durability=Durability.NONE), clock=ManualClock())
    engine.create_namespace("fz", 1)
    with TestClient(build_app(engine, token=None), raise_server_exceptions=False) as client:
        yield client


def end_offset(http: TestClient) -> int:
    return int(http.get("/v1/namespaces/fz/shards/0/stats").json()["end_offset"])


def test_binary_produce_and_fetch_round_trip(http):
    before = end_offset(http)
    answer = http.post(
        "/v1/namespaces/fz/shards/0/records", content=encode_produce(RECORDS), headers={"Content-Type": MEDIA_TYPE}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["base_offset"] == before and answer.json()["count"] == 3
    fetched = http.get(f"/v1/namespaces/fz/shards/0/records?offset={before}", headers={"Accept": MEDIA_TYPE})
    assert fetched.headers["content-type"] == MEDIA_TYPE
    result = decode_fetch(fetched.content, fetched.headers)
    assert [r.value for r in result.records] == [b"v1", None, b"x" * 300]
    assert result.records[0].headers == (("h", b"\x00"),) and result.records[0].timestamp == 5
    assert result.records[1].timestamp == 1_700_000_000_000  # -1 on the wire: stamped with node (broker) time
    assert result.next_offset == result.end_offset == before + 3


VALID = encode_produce(RECORDS)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(position=st.integers(0, len(VALID) - 1), byte=st.integers(0, 255), cut=st.booleans())
def test_damaged_binary_batches_are_400_and_write_nothing(http, position, byte, cut):
    body = VALID[:position] if cut else VALID[:position] + bytes([byte]) + VALID[position + 1 :]
    if body == VALID:
        return
    before = end_offset(http)
    answer = http.post("/v1/namespaces/fz/shards/0/records", content=body, headers={"Content-Type": MEDIA_TYPE})
    assert answer.status_code == 400, (position, byte, cut, answer.text)
    assert answer.json()["field"] == "body"
    assert end_offset(http) == before


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=200))
def test_random_binary_bodies_are_400(http, body):
    before = end_offset(http)
    answer = http.post("/v1/namespaces/fz/shards/0/records", content=body, headers={"Content-Type": MEDIA_TYPE})
    assert answer.status_code == 400
    assert end_offset(http) == before


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
RECORD_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "value": st.one_of(st.none(), st.text(max_size=12), JSON_VALUES),
        "value_text": JSON_VALUES,
        "key": JSON_VALUES,
        "timestamp": JSON_VALUES,
        "tags": JSON_VALUES,
        "headers": JSON_VALUES,
        "expire_at": JSON_VALUES,
        "ttl_ms": JSON_VALUES,
    },
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(JSON_VALUES, st.fixed_dictionaries({"records": st.lists(RECORD_LIKE, max_size=3)})))
def test_json_produce_bodies_never_500(http, body):
    before = end_offset(http)
    answer = http.post(
        "/v1/namespaces/fz/shards/0/records", content=json.dumps(body), headers={"Content-Type": "application/json"}
    )
    assert answer.status_code in (200, 400, 413), answer.text
    if answer.status_code == 200:
        assert end_offset(http) == before + len(body["records"])
    else:
        assert "code" in answer.json()
        assert end_offset(http) == before


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    query=st.dictionaries(
        st.sampled_from(["offset", "max_records", "max_bytes"]),
        st.text(max_size=8) | st.integers(-5, 10**20).map(str),
        max_size=3,
    )
)
def test_fetch_query_strings_never_500(http, query):
    answer = http.get("/v1/namespaces/fz/shards/0/records", params=query)
    assert answer.status_code in (200, 400, 416), answer.text
