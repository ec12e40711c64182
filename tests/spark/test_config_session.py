"""Config precedence, the Spark settings a session gets, the Java check, and the job registry."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_jobs import registry
from spark_jobs.config import (
    DEFAULT_DRIVER_MEMORY,
    DEFAULT_LOCAL_SHUFFLE_PARTITIONS,
    ConfigError,
    JobConfig,
    add_common_arguments,
    parse_conf_pairs,
)
from spark_jobs.session import JavaNotFoundError, ensure_java, parse_java_major, prepare_environment, spark_conf


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_common_arguments(parser)
    return parser.parse_args(argv)


class TestJobConfig:
    def test_defaults(self) -> None:
        config = JobConfig.from_env(env={})
        assert config.spark_master == "local[*]"
        assert config.lake_path == Path("./var/lake")
        assert config.driver_memory == DEFAULT_DRIVER_MEMORY
        assert config.is_local
        assert config.effective_shuffle_partitions == DEFAULT_LOCAL_SHUFFLE_PARTITIONS

    def test_environment(self) -> None:
        env = {
            "SPARK_MASTER": "spark://head:7077",
            "LAKE_PATH": "/data/lake",
            "SPARK_SHUFFLE_PARTITIONS": "64",
            "SPARK_DRIVER_MEMORY": "4g",
            "SPARK_LOG_LEVEL": "info",
        }
        config = JobConfig.from_env(env=env)
        assert config.spark_master == "spark://head:7077" and not config.is_local
        assert config.lake_path == Path("/data/lake")
        assert config.effective_shuffle_partitions == 64
        assert (config.driver_memory, config.log_level) == ("4g", "INFO")

    def test_blank_environment_values_mean_default(self) -> None:
        assert JobConfig.from_env(env={"SPARK_MASTER": " ", "LAKE_PATH": ""}) == JobConfig.from_env(env={})

    def test_cluster_master_leaves_shuffle_partitions_to_spark(self) -> None:
        assert JobConfig(spark_master="yarn").effective_shuffle_partitions is None

    @pytest.mark.parametrize(
        ("env", "message"),
        [
            ({"SPARK_SHUFFLE_PARTITIONS": "0"}, "SPARK_SHUFFLE_PARTITIONS"),
            ({"SPARK_SHUFFLE_PARTITIONS": "x"}, "SPARK_SHUFFLE_PARTITIONS"),
            ({"SPARK_LOG_LEVEL": "LOUD"}, "SPARK_LOG_LEVEL"),
        ],
    )
    def test_bad_environment(self, env: dict[str, str], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            JobConfig.from_env(env=env)

    def test_options_beat_environment(self) -> None:
        env = {"SPARK_MASTER": "local[1]", "LAKE_PATH": "/env/lake"}
        args = _parse(
            ["--master", "local[2]", "--shuffle-partitions", "3", "--conf", "a.b=c=d", "--log-level", "error"]
        )
        config = JobConfig.from_args(args, app_name="x", env=env)
        assert config.spark_master == "local[2]"
        assert config.lake_path == Path("/env/lake")  # no option: the environment's
        assert config.shuffle_partitions == 3
        assert config.log_level == "ERROR"
        assert dict(config.extra_conf) == {"a.b": "c=d"}
        assert config.app_name == "x"

    def test_conf_pairs(self) -> None:
        assert parse_conf_pairs(["k=v", "k2="]) == {"k": "v", "k2": ""}
        with pytest.raises(ConfigError):
            parse_conf_pairs(["novalue"])


class TestSparkConf:
    def test_local_master(self) -> None:
        conf = spark_conf(JobConfig(spark_master="local[*]", app_name="a"))
        assert conf["spark.master"] == "local[*]" and conf["spark.app.name"] == "a"
        assert conf["spark.sql.session.timeZone"] == "UTC"
        assert conf["spark.ui.enabled"] == "false"
        assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
        assert conf["spark.sql.shuffle.partitions"] == str(DEFAULT_LOCAL_SHUFFLE_PARTITIONS)
        assert conf["spark.driver.memory"] == DEFAULT_DRIVER_MEMORY

    def test_cluster_master_keeps_cluster_networking(self) -> None:
        conf = spark_conf(JobConfig(spark_master="spark://head:7077"))
        assert "spark.driver.host" not in conf and "spark.ui.enabled" not in conf
        assert "spark.sql.shuffle.partitions" not in conf
        assert conf["spark.sql.session.timeZone"] == "UTC"

    def test_extra_conf_wins(self) -> None:
        conf = spark_conf(JobConfig(extra_conf={"spark.ui.enabled": "true", "spark.sql.shuffle.partitions": "9"}))
        assert conf["spark.ui.enabled"] == "true" and conf["spark.sql.shuffle.partitions"] == "9"

    @pytest.mark.spark
    def test_the_running_session_has_them(self, spark: SparkSession) -> None:
        assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
        assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
        context_conf = spark.sparkContext.getConf()
        assert context_conf.get("spark.master") == "local[2]"
        assert context_conf.get("spark.ui.enabled") == "false"
        assert context_conf.get("spark.driver.host") == "127.0.0.1"
        assert spark.sparkContext.uiWebUrl is None


class TestJava:
    @pytest.mark.parametrize(
        ("output", "major"),
        [
            ('openjdk version "17.0.15" 2025-04-15', 17),
            ('openjdk version "21" 2023-09-19', 21),
            ('java version "1.8.0_392"', 8),
            ("no version here", None),
        ],
    )
    def test_parse_version(self, output: str, major: int | None) -> None:
        assert parse_java_major(output) == major

    def test_java_home_without_java(self, tmp_path: Path) -> None:
        with pytest.raises(JavaNotFoundError, match="has no bin/java"):
            ensure_java({"JAVA_HOME": str(tmp_path), "PATH": ""})

    def test_no_java_anywhere(self, tmp_path: Path) -> None:
        with pytest.raises(JavaNotFoundError, match="openjdk-17"):
            ensure_java({"PATH": str(tmp_path)})

    def test_too_old_java(self, tmp_path: Path) -> None:
        fake = tmp_path / "jdk8" / "bin" / "java"
        fake.parent.mkdir(parents=True)
        fake.write_text("#!/bin/sh\necho 'java version \"1.8.0_392\"' >&2\n")
        fake.chmod(0o755)
        with pytest.raises(JavaNotFoundError, match="is Java 8"):
            ensure_java({"JAVA_HOME": str(tmp_path / "jdk8"), "PATH": ""})

    def test_java_home_is_derived_from_path(self, tmp_path: Path) -> None:
        fake = tmp_path / "jdk" / "bin" / "java"
        fake.parent.mkdir(parents=True)
        fake.write_text("#!/bin/sh\necho 'openjdk version \"17.0.1\"' >&2\n")
        fake.chmod(0o755)
        env = {"PATH": str(fake.parent)}
        assert ensure_java(env) == fake.resolve()
        assert env["JAVA_HOME"] == str((tmp_path / "jdk").resolve())

    def test_local_environment_defaults_do_not_override(self, tmp_path: Path) -> None:
        fake = tmp_path / "jdk" / "bin" / "java"
        fake.parent.mkdir(parents=True)
        fake.write_text("#!/bin/sh\necho 'openjdk version \"17.0.1\"' >&2\n")
        fake.chmod(0o755)
        env = {"JAVA_HOME": str(tmp_path / "jdk"), "SPARK_LOCAL_IP": "10.0.0.5"}
        prepare_environment(JobConfig(spark_master="local[2]"), env)
        assert env["SPARK_LOCAL_IP"] == "10.0.0.5"
        assert env["SPARK_LOCAL_HOSTNAME"] == "localhost"
        assert "PYSPARK_PYTHON" in env


class TestRegistry:
    def test_load_jobs_registers_demo_parquet(self) -> None:
        registry.load_jobs()
        job = registry.get_job("demo-parquet")
        assert job.prog == "python -m spark_jobs demo-parquet"
        assert "demo-parquet" in [j.name for j in registry.jobs()]

    def test_register_and_duplicates(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(registry, "_REGISTRY", {})

        @registry.register("b-job", "second")
        def b_main(argv: object = None, *, spark: object = None) -> int:
            return 0

        @registry.register("a-job", "first")
        def a_main(argv: object = None, *, spark: object = None) -> int:
            return 3

        assert [job.name for job in registry.jobs()] == ["a-job", "b-job"]
        assert registry.get_job("a-job").main() == 3
        with pytest.raises(ValueError, match="already registered"):
            registry.register("a-job", "again")(b_main)
        with pytest.raises(registry.UnknownJobError, match="known jobs: a-job, b-job"):
            registry.get_job("c-job")
