from __future__ import annotations

import pytest

from backend.apps.audit.models import AuditEntry
from backend.apps.nodes.models import StorageNode
from backend.apps.nodes.services import DEFAULT_NODE_NAME
from storage_engine.api import NewRecord
from storage_engine.clock import ManualClock
from storage_engine.node_api.client import NodeClient
from storage_engine.node_api.placement import shard_for_key
from tests.support.clocked_node import clocked_node


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
    nothing = get(viewer, "shard=0&time=99999").json()
    assert (nothing["records"], nothing["next_offset"]) == ([], None)
    assert all(r["shard"] == 0 for r in get(viewer, "shard=0&offset=0").json()["records"])


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("offset=0", "shard"),
        ("shard=9", "shard"),
        ("shard=0&key=a&offset=1", "key"),
        ("shard=0&time=1&tag=x", "time"),
        ("shard=0&limit=500", "limit"),
        ("shard=0&display=xml", "display"),
        ("tag=red", "shard"),
        ("shard=0&positions=0:1", "positions"),
        ("positions=0:1;1:2", "positions"),
        ("positions=5:1", "positions"),
        ("shard=0&key=k1&all_shards=true", "all_shards"),
    ],
)
def test_bad_browse_queries_name_the_field(api_as, events, query, field):
    response = get(api_as("viewer"), query)
    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_browsing_needs_a_login(api_as, events):
    assert get(api_as(None), "shard=0").status_code == 401


def test_a_read_below_the_log_start_is_a_416_with_both_bounds(api_as, events, node):
    admin = api_as("admin")
    policy = {"set": {"retention_ms": 0, "segment_bytes": 1024}}
    assert admin.patch("/api/namespaces/events/policy", policy, format="json").status_code == 200
    with NodeClient(node.url, node.token) as client:
        for i in range(4):  # about one segment each
            client.append("events", 1, [NewRecord(value=b"v" * 900, timestamp=1_000 + i)])
        assert client.lifecycle_step("events", "retention", shard=1).segments_deleted >= 1
        start = client.shard_stats("events", 1)["log_start_offset"]
        client.append("events", 1, [NewRecord(value=b"after", timestamp=9_000)])
    assert start > 0
    response = get(api_as("viewer"), "shard=1&offset=0")
    assert response.status_code == 416
    body = response.json()
    assert body["code"] == "offset_out_of_range" and response["Content-Type"] == "application/problem+json"
    assert (body["offset"], body["log_start_offset"], body["end_offset"], body["shard"]) == (0, start, 5, 1)
    assert body["below_log_start"] is True
    assert body["detail"] == f"offset 0 is below the log start {start} of shard 1 (deleted by retention/expiry)"
    # Reading at the log start answers what is left.
    assert get(api_as("viewer"), f"shard=1&offset={start}").json()["records"][0]["offset"] == start
    past = get(api_as("viewer"), "shard=1&offset=99").json()
    assert past["below_log_start"] is False and "past the end" in past["detail"]


def test_a_key_without_a_shard_is_looked_up_in_its_own_shard_first(api_as, events, node):
    home = shard_for_key(b"k1", 2)
    elsewhere = 1 - home
    with NodeClient(node.url, node.token) as client:
        client.append("events", home, [NewRecord(value=b"at home", key=b"k1", timestamp=5_000)])
        client.append("events", elsewhere, [NewRecord(value=b"stray", key=b"k1", timestamp=6_000)])
        client.append("events", elsewhere, [NewRecord(value=b"only here", key=b"solo", timestamp=7_000)])
    viewer = api_as("viewer")
    body = get(viewer, "key=k1").json()
    assert body["key_shard"] == home and body["shards"] == [home]  # found at home: nobody else asked
    assert [(r["shard"], r["value"]["text"]) for r in body["records"]] == [(home, "at home")]
    everywhere = get(viewer, "key=k1&all_shards=true").json()
    assert [(r["shard"], r["value"]["text"]) for r in everywhere["records"]] == [
        (elsewhere, "stray"),
        (home, "at home"),
    ]
    solo = get(viewer, "key=solo").json()
    solo_home = shard_for_key(b"solo", 2)
    assert solo["shards"] == ([solo_home] if solo_home == elsewhere else [solo_home, elsewhere])
    assert [(r["shard"], r["value"]["text"]) for r in solo["records"]] == [(elsewhere, "only here")]
    assert get(viewer, "key=nobody").json()["records"] == []


def test_a_time_without_a_shard_merges_every_shard_by_timestamp(api_as, events, node):
    with NodeClient(node.url, node.token) as client:
        client.append("events", 1, [NewRecord(value=b"s1-%d" % t, timestamp=t) for t in (1_500, 2_500, 3_500)])
    viewer = api_as("viewer")
    body = get(viewer, "time=1500&limit=3").json()
    assert [(r["shard"], r["timestamp"]) for r in body["records"]] == [(1, 1_500), (0, 2_000), (1, 2_500)]
    assert body["shards"] == [0, 1] and body["next_offset"] is None
    assert body["next_positions"] == "0:2,1:2"
    rest = get(viewer, f"positions={body['next_positions']}&limit=3").json()
    assert [(r["shard"], r["timestamp"]) for r in rest["records"]] == [(0, 3_000), (1, 3_500), (0, 4_000)]
    assert get(viewer, f"positions={rest['next_positions']}").json()["records"] == []
    late = get(viewer, "time=3600").json()
    assert [(r["shard"], r["offset"]) for r in late["records"]] == [(0, 3)] and late["shards"] == [0]


def test_produce_places_by_key_or_on_a_chosen_shard_and_is_audited(api_as, events, node):
    operator = api_as("operator")
    url = "/api/namespaces/events/messages"
    message = {"key": "order-7", "value": "hello", "tags": ["red"], "headers": {"trace": "t-1"}, "ttl_ms": 3_600_000}
    response = operator.post(url, message, format="json")
    assert response.status_code == 201, response.content
    placed = response.json()
    assert placed["shard"] == shard_for_key(b"order-7", 2) and placed["node"] == "node-1"
    with NodeClient(node.url, node.token) as client:
        record = client.read("events", placed["shard"], placed["offset"], max_records=1).records[0]
    assert (record.key, record.value, record.tags, record.headers) == (
        b"order-7",
        b"hello",
        ("red",),
        (("trace", b"t-1"),),
    )
    assert record.expire_at is not None and record.expire_at - record.timestamp > 3_500_000
    chosen = operator.post(url, {"value": "pinned", "shard": 1}, format="json").json()
    assert chosen["shard"] == 1
    tombstone = operator.post(url, {"key": "order-7", "value": None, "shard": 0}, format="json")
    assert tombstone.status_code == 201
    entry = AuditEntry.objects.filter(action="message.produce").order_by("id").first()
    assert entry.target == "events" and entry.after["offset"] == placed["offset"] and entry.after["value_bytes"] == 5
    assert entry.actor.username == "user-operator"
    assert AuditEntry.objects.filter(action="message.produce").count() == 3


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"value": "v", "colour": "red"}, "colour"),
        ({"value": "v", "shard": 2}, "shard"),
        ({"value": "v", "ttl_ms": 0}, "ttl_ms"),
        ({"value": "v", "tags": "red"}, "tags"),
        ({"value": "v", "headers": ["a"]}, "headers"),
        ({"key": "k"}, "value"),
    ],
)
def test_produce_refusals_name_the_field(api_as, events, message, field):
    response = api_as("operator").post("/api/namespaces/events/messages", message, format="json")
    assert response.status_code == 400 and field in response.json()["errors"], response.content


@pytest.mark.parametrize(
    ("ttl_ms", "rule"),
    [
        (0, "must be at least 1 ms"),
        (1 << 62, "must be at most 4611686018427387 ms"),
        ("soon", "must be an integer from 1 to 4611686018427387 ms"),
    ],
)
def test_a_bad_ttl_is_refused_with_its_unit(api_as, events, ttl_ms, rule):
    response = api_as("operator").post(
        "/api/namespaces/events/messages", {"value": "v", "ttl_ms": ttl_ms}, format="json"
    )
    assert response.status_code == 400 and response.json()["errors"]["ttl_ms"] == [rule]


def test_produce_needs_an_operator_and_a_key_where_compaction_does(api_as, events):
    url = "/api/namespaces/events/messages"
    assert api_as("viewer").post(url, {"value": "v"}, format="json").status_code == 403
    admin = api_as("admin")
    admin.patch("/api/namespaces/events/policy", {"set": {"cleanup_policy": "compact"}}, format="json")
    response = admin.post(url, {"value": "keyless"}, format="json")
    assert response.status_code == 400 and "compact" in response.json()["errors"]["key"][0]
    assert not AuditEntry.objects.filter(action="message.produce").exists()


NODE_NOW = 1_600_000_000_000  # the node's clock: years away from this process's wall clock


@pytest.fixture
def node_on_its_own_clock(db, settings, tmp_path):
    """A node whose injected clock stands at NODE_NOW, registered as the default node: the control plane's
    clock and the node's differ by years."""
    with clocked_node(tmp_path / "data", ManualClock(NODE_NOW)) as url:
        settings.NODE_URL, settings.NODE_TOKEN = url, "t"
        StorageNode.objects.create(name=DEFAULT_NODE_NAME, url=url, token="t")
        yield url


def test_a_ttl_becomes_expire_at_on_the_nodes_clock(api_as, node_on_its_own_clock):
    admin = api_as("admin")
    assert admin.post("/api/namespaces/", {"name": "clocked", "shards": 2}, format="json").status_code == 201
    url = "/api/namespaces/clocked/messages"
    # The node places it (one node hosts every shard) and a chosen shard: both produce paths.
    placed = admin.post(url, {"value": "placed", "ttl_ms": 60_000}, format="json").json()
    chosen = admin.post(url, {"value": "chosen", "ttl_ms": 5_000, "shard": 1}, format="json").json()
    with NodeClient(node_on_its_own_clock, "t") as client:
        first = client.read("clocked", placed["shard"], placed["offset"], max_records=1).records[0]
        second = client.read("clocked", 1, chosen["offset"], max_records=1).records[0]
    assert (first.timestamp, first.expire_at) == (NODE_NOW, NODE_NOW + 60_000)
    assert (second.timestamp, second.expire_at) == (NODE_NOW, NODE_NOW + 5_000)
    assert AuditEntry.objects.filter(action="message.produce").latest("id").after["ttl_ms"] == 5_000


@pytest.mark.parametrize("offset", ["99999999999999999999", "9223372036854775808", "-1", "1.0", "1e3", " 7", "٣"])
def test_an_offset_out_of_64_bits_or_not_in_digits_is_refused_with_its_range(api_as, events, offset):
    response = api_as("viewer").get("/api/namespaces/events/messages", {"shard": 0, "offset": offset})
    assert response.status_code == 400, response.content
    [rule] = response.json()["errors"]["offset"]
    assert "an integer from 0 to 9223372036854775807" in rule


def test_a_64_bit_offset_reaches_the_node_digit_for_digit(api_as, events):
    # Past 2^53 a float (a JS number) would turn it into 9007199254740992.
    response = api_as("viewer").get("/api/namespaces/events/messages", {"shard": 0, "offset": "9007199254740993"})
    assert response.status_code == 416 and response.json()["offset"] == 9_007_199_254_740_993
    late = api_as("viewer").get("/api/namespaces/events/messages", {"shard": 0, "time": "99999999999999999999"})
    assert late.status_code == 400 and "ms since the epoch" in late.json()["errors"]["time"][0]
