"""lifecycle-report end to end (lake and segments as input) against a hand computation, its outputs, and the
POST to the control plane against a tiny loopback HTTP server. Segments as input are listed by a real node:
records its TTL scan marked dead count as expired."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from spark_jobs.config import ConfigError
from spark_jobs.jobs.lake_export import run_export
from spark_jobs.jobs.lifecycle_report import (
    PostError,
    load_policies_file,
    main,
    parse_ttl_pairs,
    post_report,
)
from spark_jobs.segments import decode_segment_table
from spark_jobs.source import offline_segment_files
from storage_engine.node_api.client import NodeClient
from tests.spark.engine_data import HOUR_MS, START_MS, Appended, node_on, write_segments
from tests.spark.lifecycle_expect import Rec, expected_report, report_rows_to_dict
from tests.support.receiver import Receiver, receiving

NOW = START_MS + 9 * HOUR_MS  # part of the data expired, part not, part in the future
TTLS = {"audit": 2 * HOUR_MS}


@pytest.fixture
def server() -> Iterator[tuple[str, Receiver]]:
    """The control plane's report endpoint: its URL and a receiver answering 201 (a test may change that)."""
    with receiving() as receiver:
        receiver.answer = lambda request: (201, "application/json", b'{"ok": true}')
        yield f"{receiver.url}/api/reports/lifecycle", receiver


def _recs(appended: list[Appended], only: set[tuple[str, int, int]] | None = None) -> list[Rec]:
    return [
        Rec(a.namespace, a.shard, a.offset, a.timestamp, a.key, a.tags, a.headers, a.value, a.expire_at)
        for a in appended
        if only is None or (a.namespace, a.shard, a.offset) in only
    ]


def _rows_from_json(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    import datetime as dt

    return report_rows_to_dict([{**r, "date": dt.date.fromisoformat(r["date"])} for r in rows])


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Appended]]:
    data_dir = tmp_path_factory.mktemp("report") / "data"
    return data_dir, write_segments(data_dir, seed=11)


@pytest.mark.spark
def test_report_from_the_lake_matches_a_hand_computation(
    spark: SparkSession,
    source: tuple[Path, list[Appended]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data_dir, appended = source
    lake = tmp_path / "lake"
    segments = offline_segment_files(data_dir)  # no node runs on it: the engine lists it here
    run_export(spark, segments, str(lake / "records"))
    sealed = {(s.namespace, s.shard, o) for s in segments for o in decode_segment_table(s).column("offset").to_pylist()}
    policies = tmp_path / "policies.json"
    policies.write_text(json.dumps({"audit": {"ttl_ms": 999, "retention_ms": None}, "orders": {"ttl_ms": None}}))
    out = tmp_path / "lake" / "reports" / "lifecycle"
    json_out = tmp_path / "report.json"
    argv = ["--lake-path", str(lake), "--now-ms", str(NOW), "--policies", str(policies)]
    argv += ["--ttl", f"audit={TTLS['audit']}", "--json-output", str(json_out)]  # --ttl wins over the file
    assert main(argv, spark=spark) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["source"] == "lake" and summary["output"] == str(out) and summary["posted"] is None

    expected = expected_report(_recs(appended, sealed), NOW, TTLS)
    body = json.loads(json_out.read_text())
    assert body["now_ms"] == NOW and body["ttl_ms"] == TTLS and body["generated_at"].endswith("Z")
    assert _rows_from_json(body["rows"]) == expected
    assert summary["rows"] == len(expected) == 4  # 2 namespaces × 2 UTC days
    assert json.loads((out / "_report.json").read_text())["rows"] == body["rows"]
    totals = {r["namespace"]: r for r in body["namespaces"]}
    by_ns = expected_report(_recs(appended, sealed), NOW, TTLS, by_day=False)
    assert totals["orders"]["superseded_bytes"] == by_ns[("orders",)]["superseded_bytes"]
    assert totals["audit"]["lifetime_p90_ms"] == by_ns[("audit",)]["lifetime_p90_ms"]
    # Some of everything, or the comparison above proves little.
    figures = list(expected.values())
    assert all(
        sum(f[name] for f in figures) > 0 for name in ("expired_records", "superseded_records", "unbounded_records")
    )
    assert any(f["expired_records"] < f["records"] for f in figures)

    # The Parquet report: one file, readable by pyarrow, the same figures.
    table = pq.read_table(out)
    assert table.num_rows == 4
    assert report_rows_to_dict(table.to_pylist()) == expected


@pytest.mark.spark
def test_report_from_segments_posted_to_the_control_plane(
    spark: SparkSession,
    source: tuple[Path, list[Appended]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    server: tuple[str, Receiver],
) -> None:
    appended = source[1]
    data_dir = tmp_path / "data"
    shutil.copytree(source[0], data_dir)
    url, handler = server
    monkeypatch.setenv("CONTROL_PLANE_TOKEN", "s3cret")
    with node_on(data_dir) as node:
        monkeypatch.setenv("NODE_TOKEN", node.token)
        argv = ["--source", "segments", "--data-dir", str(data_dir), "--output", str(tmp_path / "report")]
        argv += ["--node-url", node.url, "--now-ms", str(NOW), "--ttl", f"audit={TTLS['audit']}", "--post-url", url]
        _report_from_segments(spark, argv, appended, handler, capsys, node.url, node.token)


def _report_from_segments(
    spark: SparkSession,
    argv: list[str],
    appended: list[Appended],
    handler: Receiver,
    capsys: pytest.CaptureFixture[str],
    node_url: str,
    token: str,
) -> None:
    assert main(argv, spark=spark) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["posted"] == 201

    (request,) = handler.received
    body = request.json()
    assert request.path == "/api/reports/lifecycle"
    assert request.headers["Authorization"] == "Token s3cret"
    assert request.headers["Content-Type"] == "application/json"
    assert set(body) == {"generated_at", "rows"}
    assert body["generated_at"] == summary["generated_at"]
    # Segments as input: every stored record, the active segments' included.
    assert _rows_from_json(body["rows"]) == expected_report(_recs(appended), NOW, TTLS)
    assert all(r["now_ms"] == NOW for r in body["rows"])

    # Started for one namespace, the report covers that namespace only.
    handler.received.clear()
    assert main([*argv, "--namespace", "audit"], spark=spark) == 0
    capsys.readouterr()
    (request,) = handler.received
    everything = expected_report(_recs(appended), NOW, TTLS)
    assert _rows_from_json(request.json()["rows"]) == {k: v for k, v in everything.items() if k[0] == "audit"}
    assert {r["namespace"] for r in request.json()["rows"]} == {"audit"}

    # The node's TTL scan (its clock is past every expire_at of the data) marks records dead that the
    # report's "now" does not expire yet: still in the files, not reclaimed, so expired in the report.
    with NodeClient(node_url, token) as client:
        for ns in ("orders", "audit"):
            while client.lifecycle_step(ns, "expire-scan", manual=True).more:
                pass
    dead = frozenset((a.namespace, a.shard, a.offset) for a in appended if a.expire_at is not None)
    handler.received.clear()
    assert main(argv, spark=spark) == 0
    capsys.readouterr()
    (request,) = handler.received
    with_dead = expected_report(_recs(appended), NOW, TTLS, dead=dead)
    assert _rows_from_json(request.json()["rows"]) == with_dead
    assert sum(r["expired_records"] for r in with_dead.values()) > sum(
        r["expired_records"] for r in everything.values()
    )


class TestPost:
    def test_client_error_is_not_retried(self, server: tuple[str, Receiver]) -> None:
        url, handler = server
        handler.answer = lambda request: (400, "application/json", b"{}")
        with pytest.raises(PostError, match="HTTP 400"):
            post_report(url, {"generated_at": "x", "rows": []}, "t")
        assert len(handler.received) == 1

    def test_server_errors_are_retried(self, server: tuple[str, Receiver], monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr("spark_jobs.jobs.lifecycle_report.time.sleep", lambda s: None)
        url, handler = server
        handler.answer = lambda request: (503, "application/json", b"{}")
        with pytest.raises(PostError, match="HTTP 503"):
            post_report(url, {"generated_at": "x", "rows": []}, "t")
        assert len(handler.received) == 3

    def test_unreachable(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr("spark_jobs.jobs.lifecycle_report.time.sleep", lambda s: None)
        with pytest.raises(PostError, match="ConnectError"):
            post_report("http://127.0.0.1:9/none", {"rows": []}, "t")

    def test_post_url_needs_a_token(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("CONTROL_PLANE_TOKEN", raising=False)
        with pytest.raises(ConfigError, match="CONTROL_PLANE_TOKEN"):
            main(["--post-url", "http://127.0.0.1:1/x"])


class TestTtlOptions:
    def test_pairs(self) -> None:
        assert parse_ttl_pairs(["a=5", " b =7"]) == {"a": 5, "b": 7}
        for bad in ("a", "=5", "a=0", "a=x", "a=-1"):
            with pytest.raises(ConfigError):
                parse_ttl_pairs([bad])

    def test_policies_file(self, tmp_path: Path) -> None:
        path = tmp_path / "p.json"
        path.write_text(json.dumps({"a": 5, "b": {"ttl_ms": 7, "segment_bytes": 1}, "c": {"ttl_ms": None}, "d": None}))
        assert load_policies_file(path) == {"a": 5, "b": 7}
        for bad in ("[]", '{"a": "5"}', '{"a": 0}', "{", '{"a": true}'):
            path.write_text(bad)
            with pytest.raises(ConfigError):
                load_policies_file(path)
        with pytest.raises(ConfigError):
            load_policies_file(tmp_path / "missing.json")
