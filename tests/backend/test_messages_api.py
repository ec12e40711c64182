from __future__ import annotations

import pytest

from storage_engine.api import NewRecord
from storage_engine.client import NodeClient


@pytest.fixture
def events(api_as, registered_node, node):
    api_as("admin").post("/api/namespaces/", {"name": "events", "shards": 2}, format="json")
    with NodeClient(node.url, node.token) as client:
        client.append(
            "events",
            0,
            [
                NewRecord(value=b"hello", key=b"k1", tags=("red",), timestamp=1_000, headers=(("trace", b"abc"),)),
                NewRecord(value=b"\xff\x00\x01", key=b"k2", tags=("blue",), timestamp=2_000),
                NewRecord(value=None, key=b"k1", tags=("red",), timestamp=3_000),
                NewRecord(value=b"z" * 5000, timestamp=4_000),
            ],
        )
    return "events"


def get(client, query: str):
    return client.get(f"/api/namespaces/events/messages?{query}")


def test_browse_from_an_offset_with_text_and_hex(api_as, events):
    body = get(api_as("viewer"), "shard=0&offset=0").json()
    values = [r["value"] for r in body["records"]]
    assert values[0] == {"text": "hello", "hex": None, "size": 5, "truncated": False, "tombstone": False}
    assert values[1]["text"] is None and values[1]["hex"] == "ff0001"  # not UTF-8: shown as hex
    assert values[2]["tombstone"] is True
    assert values[3]["size"] == 5000 and values[3]["truncated"] and len(values[3]["text"]) == 4096
    assert body["records"][0]["headers"]["trace"]["text"] == "abc"
    assert body["next_offset"] == 4
    hexed = get(api_as("viewer"), "shard=0&offset=0&limit=1&display=hex").json()["records"]
    assert len(hexed) == 1 and hexed[0]["value"]["hex"] == b"hello".hex()


def test_browse_by_time_key_and_tag(api_as, events):
    viewer = api_as("viewer")
    assert [r["offset"] for r in get(viewer, "shard=0&time=1500").json()["records"]] == [1, 2, 3]
    latest = get(viewer, "shard=0&key=k1").json()["records"]
    assert [r["offset"] for r in latest] == [2] and latest[0]["value"]["tombstone"]
    assert [r["offset"] for r in get(viewer, "shard=0&tag=red").json()["records"]] == [0, 2]
    assert [r["offset"] for r in get(viewer, "shard=0&tag=red&offset=1").json()["records"]] == [2]
    assert get(viewer, "shard=0&time=99999").json() == {"records": [], "next_offset": None}


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("offset=0", "shard"),
        ("shard=9", "shard"),
        ("shard=0&key=a&offset=1", "key"),
        ("shard=0&time=1&tag=x", "time"),
        ("shard=0&limit=500", "limit"),
        ("shard=0&display=xml", "display"),
    ],
)
def test_bad_browse_queries_name_the_field(api_as, events, query, field):
    response = get(api_as("viewer"), query)
    assert response.status_code == 400
    assert field in response.json()


def test_browsing_needs_a_login(api_as, events):
    assert get(api_as(None), "shard=0").status_code == 401
