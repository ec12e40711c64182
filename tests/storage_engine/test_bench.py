"""Smoke test of the benchmark CLI: it runs and prints the promised fields (never timings)."""

from __future__ import annotations

import json

import pytest

from storage_engine.bench.__main__ import main

REQUIRED = {"bench", "system", "records", "seconds", "msgs_per_s", "mb_per_s", "p50_ms", "p99_ms"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, object]]:
    assert main([*argv, "--adapter", "memory", "--json"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_append_bench_prints_each_system_and_the_ratios(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    lines = run(
        capsys, "append", "--records", "300", "--producers", "3", "--keyed", "--tags", "2", "--naive-records", "30"
    )
    assert [line["system"] for line in lines] == ["engine-memory", "naive-fsync", "rocksdict", "ratio"]
    for line in lines[:-1]:
        assert line.keys() >= REQUIRED
    assert [line["records"] for line in lines[:-1]] == [300, 30, 300]
    assert {"engine_vs_naive", "engine_vs_rocksdict"} <= lines[-1].keys()


def test_read_bench_prints_latencies(capsys: pytest.CaptureFixture[str]) -> None:
    [line] = run(capsys, "read", "--records", "500", "--reads", "50")
    assert line.keys() >= REQUIRED
    assert (line["bench"], line["system"], line["records"], line["reads"]) == ("read", "engine-memory", 500, 50)


def test_expire_bench_prints_each_system(capsys: pytest.CaptureFixture[str]) -> None:
    lines = run(
        capsys, "expire", "--records", "400", "--expired-fraction", "0.05", "--appends", "5",
        "--scan-entries", "300", "--segment-mib", "1",
    )  # fmt: skip
    systems = [line["system"] for line in lines]
    scans = ["ttl-index", "full-scan"] * 2
    assert systems == [*scans, "ratio", "append-idle", "append-during-scan", "ratio", "segment-drop"]
    assert lines[7]["append_p99_during_scan_vs_idle"] > 0  # issue 15's figure, in the same run
    for line in lines[:4]:
        assert {"bench", "system", "stored", "expired", "seconds"} <= line.keys()
    assert [(line["stored"], line["expired"]) for line in lines[:4]] == [(400, 20), (400, 20), (800, 20), (800, 20)]


def test_compare_runs_both_checkouts_and_pairs_their_lines(tmp_path, monkeypatch, capsys):
    """bench.compare pairs the same result line of two checkouts and divides their headline figures."""
    import json

    from storage_engine.bench import compare

    def fake_run(tree, bench):
        speed = 100.0 if tree.name == "old" else 150.0
        return [
            {"bench": "read", "system": "engine-segment", "records": 10, "msgs_per_s": speed, "p99_ms": 1.0},
            {"bench": "expire", "system": "ttl-index", "adapter": "segment", "seconds": speed / 1000},
            {"bench": "read", "system": "ratio"},  # no headline figure: left out
        ]

    monkeypatch.setattr(compare, "run_once", fake_run)
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    assert (
        compare.main(
            ["--before", str(tmp_path / "old"), "--after", str(tmp_path / "new"), "--rounds", "2", "--", "read"]
        )
        == 0
    )
    rows = {r["result"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert set(rows) == {"read/engine-segment/10", "expire/ttl-index/segment"}
    read = rows["read/engine-segment/10"]
    assert (read["metric"], read["before"], read["after"], read["after_vs_before"]) == (
        "msgs_per_s",
        [100.0, 100.0],
        [150.0, 150.0],
        1.5,
    )
    assert rows["expire/ttl-index/segment"]["higher_is_better"] is False


def test_tier_bench_compares_offload_with_a_direct_copy_and_remote_reads_with_local_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["tier", "--records", "3000", "--segment-mb", "1", "--reads", "50", "--cold-reads", "5"]
    argv += ["--append-batches", "20", "--append-fill-records", "3000", "--json"]
    assert main(argv) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    systems = [line["system"] for line in lines]
    assert systems == [
        "local-read",
        "direct-copy",
        "offload",
        "drop-local-copies",
        "remote-read-cold",
        "remote-read-cached",
        "append-alone",
        "append-during-offload-no-give-way",
        "append-during-offload",
        "ratio",
    ]
    for line in (lines[0], lines[4], lines[5], lines[6], lines[7], lines[8]):
        assert line.keys() >= REQUIRED
    assert lines[1]["bytes"] == lines[2]["bytes"] == lines[3]["bytes"] > 0  # the same bytes each way
    assert lines[3]["segments"] == lines[1]["segments"]  # every offloaded segment's copy, dropped on its own
    assert lines[4]["cache_misses"] > 0 and lines[5]["cache_misses"] == 0
    assert lines[6]["records"] == 20 * 100  # --append-batches of the default --batch-size
    # the background offloads (the baseline's, then the engine's) did upload their namespaces, the same bytes
    assert lines[7]["offloaded_bytes"] == lines[8]["offloaded_bytes"] > 0
    assert {
        "offload_vs_direct",
        "cached_remote_vs_local_read",
        "append_p99_during_offload_vs_alone",
        "append_p99_no_give_way_vs_alone",
    } <= lines[-1].keys()
