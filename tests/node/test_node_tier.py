"""Tiered storage over the node (issue 19): the offload step as a lifecycle operation (bounded,
resumable, with counts), the tier in the segment listing with the object key, the tier's
metrics on ``/metrics`` (with HELP, ``promtool`` quiet), cache figures, and the tier's errors as
problem details with their status."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from storage_engine.api import NewRecord, SegmentTier
from storage_engine.node_api.client import NodeClient
from tests.storage_engine.tier_engine import policy
from tests.support.processes import NodeProc, start_node
from tests.support.promtool import check_metrics, require_promtool

N = 120
TIERED = policy()


def value(text: str, sample: str) -> float:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == sample and not s.labels:
                return float(s.value)
    raise AssertionError(f"no sample {sample}")


@pytest.fixture
def tier_dir(tmp_path: Path) -> Path:
    return tmp_path / "tier"


@pytest.fixture
def tiered_node(tmp_path: Path, tier_dir: Path) -> Iterator[NodeProc]:
    proc = start_node(tmp_path / "node-data", extra=["--tier-uri", tier_dir.as_uri()])
    yield proc
    proc.stop()


def fill(client: NodeClient, name: str = "t") -> None:
    client.create_namespace(name, 1, TIERED)
    for i in range(N):
        client.append(name, 0, [NewRecord(value=b"%d:" % i + b"v" * 200, key=b"k%d" % (i % 7))])


def test_offload_steps_over_http_are_bounded_resumable_and_counted(tiered_node: NodeProc, tier_dir: Path) -> None:
    with NodeClient(tiered_node.url, tiered_node.token) as client:
        fill(client)
        sealed = len(client.list_segments("t", 0)) - 1
        assert sealed >= 4
        first = client.lifecycle_step("t", "offload", shard=0, limit=2)
        assert (first.operation, first.segments_offloaded, first.more) == ("offload", 2, True)
        assert first.bytes_offloaded > 0 and first.local_copies_dropped == 2
        total = first.segments_offloaded
        while True:
            step = client.lifecycle_step("t", "offload", limit=2)
            total += step.segments_offloaded
            if not step.more:
                break
        assert total == sealed
        assert client.lifecycle_step(None, "offload").segments_offloaded == 0  # nothing left: idempotent
        segments = client.list_segments("t", 0)
        assert [s.tier for s in segments[:-1]] == [SegmentTier.REMOTE] * sealed
        values = [r.value for r in client.read("t", 0, 0, max_records=1000).records]
        assert values == [b"%d:" % i + b"v" * 200 for i in range(N)]
        assert client.verify("t")["ok"] is True
        # the listing says where each segment is, and the object key names a real object
        files = client.segment_files("t", 0)
        assert [f.tier for f in files] == [SegmentTier.REMOTE] * sealed
        for f in files:
            assert f.object_key is not None and f.tier_uri == tier_dir.as_uri()
            assert (tier_dir / f.object_key).stat().st_size == f.size_bytes
            assert not (tiered_node.data_dir / f.file).exists()
        raw = httpx.get(
            f"{client.base_url}/v1/namespaces/t/shards/0/segment-files", headers=client._http.headers
        ).json()
        assert raw["segments"][0]["tier"] == "remote" and raw["segments"][0]["object_key"].endswith(".log")


def test_offload_of_a_namespace_without_remote_storage_is_skipped_and_bad_arguments_named(
    tiered_node: NodeProc,
) -> None:
    with NodeClient(tiered_node.url, tiered_node.token) as client:
        client.create_namespace("plain", 1)
        assert client.lifecycle_step("plain", "offload").skipped == "policy"
        assert client.lifecycle_step("plain", "offload", dry_run=True).skipped == "policy"  # offered (issue 26)
        for query, field in (("manual=true", "manual"), ("limit=0", "limit")):
            response = httpx.post(
                f"{client.base_url}/v1/namespaces/plain/lifecycle/offload?{query}", headers=client._http.headers
            )
            assert response.status_code == 400 and response.json()["field"] == field


def test_tier_metrics_have_help_and_promtool_is_quiet(tiered_node: NodeProc) -> None:
    require_promtool()
    with NodeClient(tiered_node.url, tiered_node.token) as client:
        fill(client)
        before = httpx.get(f"{client.base_url}/metrics", headers=client._http.headers).text
        assert value(before, "lcs_tier_offload_pending_segments") >= 4
        assert value(before, "lcs_tier_remote_bytes") == 0 and value(before, "lcs_tier_local_bytes") > 0
        while client.lifecycle_step(None, "offload").more:
            pass
        client.read("t", 0, 0, max_records=1000)  # cold: fetched from the store
        client.read("t", 0, 0, max_records=1000)  # cached
        text = httpx.get(f"{client.base_url}/metrics", headers=client._http.headers).text
        stats = client.stats()["counters"]
    complaints = check_metrics(text)
    assert complaints == "", complaints
    for line in ("# HELP lcs_tier_offload_lag_seconds ", "# HELP lcs_tier_cache_hits_total "):
        assert line in text
    assert value(text, "lcs_tier_offload_pending_segments") == 0 and value(text, "lcs_tier_offload_lag_seconds") == 0
    assert value(text, "lcs_tier_remote_only_bytes") == value(text, "lcs_tier_remote_bytes") > 0
    assert value(text, "lcs_tier_offloaded_bytes_total") == value(text, "lcs_tier_remote_bytes")
    assert value(text, "lcs_tier_segments_offloaded_total") >= 4
    assert value(text, "lcs_tier_cache_misses_total") > 0 and value(text, "lcs_tier_cache_hits_total") > 0
    assert value(text, "lcs_tier_fetched_bytes_total") > 0 and value(text, "lcs_tier_cache_bytes") > 0
    # the same cache figures in /v1/stats
    assert stats["tier_cache_hits_total"] > 0 and stats["tier_cache_bytes"] > 0


def test_an_unreachable_store_is_a_503_problem_and_nothing_local_is_lost(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the tier's directory should be")
    node = start_node(tmp_path / "node-data", extra=["--tier-uri", (blocker / "tier").as_uri()])
    try:
        with NodeClient(node.url, node.token, retries=0) as client:
            fill(client)
            response = httpx.post(f"{client.base_url}/v1/namespaces/t/lifecycle/offload", headers=client._http.headers)
            assert response.status_code == 503
            body = response.json()
            assert (body["code"], body["title"]) == ("tier_unavailable", "Object store unavailable")
            assert body["operation"] == "put" and body["key"].startswith("t/")
            # the offloader backs off: the next steps do nothing and say why
            assert client.lifecycle_step("t", "offload").skipped == "backoff"
            assert client.lifecycle_step(None, "offload").skipped == "backoff"
            assert all(s.tier is not SegmentTier.REMOTE for s in client.list_segments("t", 0))
            values = [r.value for r in client.read("t", 0, 0, max_records=1000).records]
            assert values == [b"%d:" % i + b"v" * 200 for i in range(N)]
            counters = client.stats()["counters"]
            assert counters["tier_offload_failures_total"] >= 1 and counters["tier_offload_deferred_total"] == 2
            report = client.verify("t")  # the data is intact; only the store cannot be listed
            assert [p.split(": ", 1)[1][:11] for p in report["problems"]] == ["cannot list"]
    finally:
        node.stop()


def test_recall_steps_over_http_bring_local_copies_back_with_counts(tiered_node: NodeProc) -> None:
    with NodeClient(tiered_node.url, tiered_node.token) as client:
        fill(client)
        while client.lifecycle_step("t", "offload").more:
            pass
        sealed = client.list_segments("t", 0)[:-1]
        assert [s.tier for s in sealed] == [SegmentTier.REMOTE] * len(sealed)
        kept_remote = client.lifecycle_step("t", "recall")  # local_retention_ms 0: the policy keeps them remote
        assert (kept_remote.skipped, kept_remote.segments_recalled) == ("policy", 0)
        client.update_namespace("t", policy(local_retention_ms=None))
        dry = client.lifecycle_step("t", "recall", dry_run=True)
        assert (dry.segments_recalled, dry.bytes_recalled) == (len(sealed), sum(s.size_bytes for s in sealed))
        first = client.lifecycle_step("t", "recall", shard=0, limit=2)
        assert (first.operation, first.segments_recalled, first.more) == ("recall", 2, True)
        assert first.bytes_recalled == sum(s.size_bytes for s in sealed[:2])
        response = httpx.post(
            f"{client.base_url}/v1/node/lifecycle/recall", params={"limit": 1000}, headers=client._http.headers
        )
        assert response.status_code == 200
        body = response.json()
        assert (body["segments_recalled"], body["more"], body["namespace"]) == (len(sealed) - 2, False, None)
        assert [s.tier for s in client.list_segments("t", 0)[:-1]] == [SegmentTier.BOTH] * len(sealed)
        files = client.segment_files("t", 0)
        assert all((tiered_node.data_dir / f.file).stat().st_size == f.size_bytes for f in files)
        before = client.stats()["counters"]
        values = [r.value for r in client.read("t", 0, 0, max_records=1000).records]
        assert values == [b"%d:" % i + b"v" * 200 for i in range(N)]
        for k in range(7):
            found = client.read_key("t", 0, f"k{k}")
            assert found is not None and found.offset == max(i for i in range(N) if i % 7 == k)
        after = client.stats()["counters"]
        assert after.get("tier_cache_misses_total", 0) == before.get("tier_cache_misses_total", 0)  # all local
        assert client.verify("t")["ok"] is True
        text = httpx.get(f"{client.base_url}/metrics", headers=client._http.headers).text
        assert value(text, "lcs_tier_segments_recalled_total") == len(sealed)
        assert value(text, "lcs_tier_recalled_bytes_total") == sum(s.size_bytes for s in sealed)


def test_a_recall_without_disk_room_is_a_507_problem_naming_the_watermark(tiered_node: NodeProc) -> None:
    with NodeClient(tiered_node.url, tiered_node.token) as client:
        fill(client)
        while client.lifecycle_step("t", "offload").more:
            pass
        client.update_namespace("t", policy(local_retention_ms=None))
        node = client.node_policy()
        client.set_node_policy(
            {**node, "disk_max_used_ratio": 0.0, "disk_clean_forcibly_ratio": 0.0, "disk_warning_ratio": 0.0}
        )
        response = httpx.post(f"{client.base_url}/v1/namespaces/t/lifecycle/recall", headers=client._http.headers)
        assert response.status_code == 507
        body = response.json()
        assert (body["code"], body["title"], body["field"]) == (
            "recall_disk_limit",
            "Not enough disk to recall",
            "disk_warning_ratio",
        )
        assert all(s.tier is SegmentTier.REMOTE for s in client.list_segments("t", 0)[:-1])
        for query, field in (("manual=true", "manual"), ("limit=0", "limit")):
            bad = httpx.post(
                f"{client.base_url}/v1/namespaces/t/lifecycle/recall?{query}", headers=client._http.headers
            )
            assert bad.status_code == 400 and bad.json()["field"] == field
