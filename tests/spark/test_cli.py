"""``python -m spark_jobs``: help, dispatch, usage errors and exit codes."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import spark_jobs.jobs.demo_parquet as demo_parquet
from spark_jobs.__main__ import main as cli_main
from spark_jobs.config import JobConfig

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), full_env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "spark_jobs", *args],
        cwd=REPO_ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class TestSubprocess:
    def test_help_lists_jobs(self) -> None:
        result = run_cli("--help")
        assert result.returncode == 0, result.stderr
        assert "usage: python -m spark_jobs <job>" in result.stdout
        assert "demo-parquet" in result.stdout
        assert "SPARK_MASTER" in result.stdout and "LAKE_PATH" in result.stdout

    def test_unknown_job_exits_2_with_a_clear_error(self) -> None:
        result = run_cli("no-such-job")
        assert result.returncode == 2
        assert "unknown job 'no-such-job'" in result.stderr
        assert "demo-parquet" in result.stderr  # the known jobs are listed
        assert result.stdout == ""

    def test_job_help(self) -> None:
        result = run_cli("demo-parquet", "--help")
        assert result.returncode == 0, result.stderr
        for option in ("--output", "--rows", "--seed", "--master", "--lake-path", "--conf"):
            assert option in result.stdout


class TestInProcess:
    def test_no_job_is_a_usage_error(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert cli_main([]) == 2
        assert "no job given" in capsys.readouterr().err

    def test_bad_job_option_is_a_usage_error(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as exit_info:
            cli_main(["demo-parquet", "--rows", "-5"])
        assert exit_info.value.code == 2
        assert "--rows" in capsys.readouterr().err

    def test_bad_namespace_name_is_a_usage_error(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as exit_info:
            cli_main(["demo-parquet", "--namespaces", "ok,not/ok"])
        assert exit_info.value.code == 2
        assert "not/ok" in capsys.readouterr().err

    def test_bad_environment_setting_is_a_usage_error(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("SPARK_SHUFFLE_PARTITIONS", "lots")
        assert cli_main(["demo-parquet"]) == 2
        assert "SPARK_SHUFFLE_PARTITIONS" in capsys.readouterr().err

    @pytest.mark.parametrize("job", ["lake-export", "compaction-plan", "ttl-backfill", "lifecycle-report"])
    def test_segment_jobs_need_the_node_or_offline(
        self, job: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Which segments are sealed is the node's to say: no silent guess from file names."""
        (tmp_path / "data" / "segments").mkdir(parents=True)
        monkeypatch.setenv("LAKE_PATH", str(tmp_path / "lake"))
        extra = {
            "compaction-plan": ["--namespace", "ns"],
            "ttl-backfill": ["--namespace", "ns", "--tag", "t", "--ttl", "1h", "--ns-id", "1"],
            "lifecycle-report": ["--source", "segments"],
        }.get(job, [])
        assert cli_main([job, "--data-dir", str(tmp_path / "data"), *extra]) == 2
        err = capsys.readouterr().err
        assert "give --node-url" in err and "--offline" in err

    def test_refuses_to_overwrite_the_lake_root(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("LAKE_PATH", str(tmp_path / "lake"))
        for output in (tmp_path / "lake", tmp_path):
            assert cli_main(["demo-parquet", "--output", str(output)]) == 2
            assert "refusing to overwrite" in capsys.readouterr().err

    @pytest.mark.spark
    def test_dispatches_to_the_job(
        self,
        spark: SparkSession,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        seen: list[JobConfig] = []

        @contextlib.contextmanager
        def shared_session(config: JobConfig, session: SparkSession | None = None) -> Iterator[SparkSession]:
            seen.append(config)
            yield spark  # the suite's session instead of a second JVM

        monkeypatch.setattr(demo_parquet, "session_for", shared_session)
        monkeypatch.setenv("SPARK_MASTER", "local[1]")
        out = tmp_path / "demo"
        code = cli_main(["demo-parquet", "--rows", "10", "--output", str(out), "--conf", "spark.x.y=1"])

        assert code == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["rows_written"] == 10 and summary["output"] == str(out)
        (config,) = seen
        assert config.spark_master == "local[1]"  # from the environment
        assert config.app_name == "lifecycle-store-demo-parquet"
        assert dict(config.extra_conf) == {"spark.x.y": "1"}


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("SPARK_JOBS_SLOW_TESTS") != "1",
    reason="starts a second JVM (~20 s); set SPARK_JOBS_SLOW_TESTS=1 to run it",
)
def test_real_run_in_a_fresh_process(tmp_path: Path) -> None:
    """The job as an operator runs it: its own JVM from spark_jobs.session, settings from the environment."""
    out = tmp_path / "lake" / "demo"
    result = run_cli(
        "demo-parquet",
        "--rows",
        "40",
        env={"LAKE_PATH": str(tmp_path / "lake"), "SPARK_MASTER": "local[1]", "SPARK_DRIVER_MEMORY": "512m"},
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["rows_written"] == 40 and summary["output"] == str(out)
    assert sorted(p.name for p in out.glob("namespace=*")) == [
        "namespace=audit-log",
        "namespace=orders",
        "namespace=payments",
    ]
