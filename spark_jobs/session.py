"""Build a SparkSession from a :class:`~spark_jobs.config.JobConfig`: the one place for Spark settings.

Local masters (the embedded default, ``local[*]``) get settings for a small machine (2 cores, 24 GiB,
shared with the rest of the stack): few shuffle partitions, no UI, everything bound to loopback, and
Python workers running the interpreter that runs the job. Every session computes in UTC.

Fresh-machine pitfalls handled here, before the JVM starts:

- Java: Spark 4 needs Java 17 or newer. ``JAVA_HOME`` wins when set; otherwise ``java`` on ``PATH``
  is used and ``JAVA_HOME`` is derived from it. A missing or too old Java is a :class:`JavaNotFoundError`
  with the fix in its message rather than a gateway crash.
- Networking: on a local master the driver binds to and advertises 127.0.0.1 (``SPARK_LOCAL_IP`` and
  ``SPARK_LOCAL_HOSTNAME`` default to loopback), so a host name that does not resolve, or a sandbox with
  loopback only, does not matter.
- Python: ``PYSPARK_PYTHON`` defaults to this interpreter so workers see the same virtualenv.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from spark_jobs.config import JobConfig

log = logging.getLogger(__name__)

MIN_JAVA_MAJOR = 17
LOOPBACK = "127.0.0.1"

# Settings for every master.
BASE_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
}

# Settings for local masters only; a cluster keeps its own networking, UI and parallelism.
LOCAL_CONF: dict[str, str] = {
    "spark.driver.host": LOOPBACK,
    "spark.driver.bindAddress": LOOPBACK,
    "spark.ui.enabled": "false",
}

# Environment defaults for a local master; set only when absent, so a caller can still override.
LOCAL_ENV: dict[str, str] = {
    "SPARK_LOCAL_IP": LOOPBACK,
    "SPARK_LOCAL_HOSTNAME": "localhost",
}


class JavaNotFoundError(RuntimeError):
    """No usable Java for Spark; the message says how to fix it."""


def spark_conf(config: JobConfig) -> dict[str, str]:
    """Every Spark setting a session built from ``config`` gets (pure; no JVM)."""
    conf = dict(BASE_CONF)
    conf["spark.master"] = config.spark_master
    conf["spark.app.name"] = config.app_name
    conf["spark.driver.memory"] = config.driver_memory
    if config.is_local:
        conf.update(LOCAL_CONF)
    partitions = config.effective_shuffle_partitions
    if partitions is not None:
        conf["spark.sql.shuffle.partitions"] = str(partitions)
    conf.update(config.extra_conf)
    return conf


def parse_java_major(version_output: str) -> int | None:
    """The major version from ``java -version`` output: ``"17.0.15"`` → 17, ``"1.8.0_392"`` → 8."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if not match:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2):
        major = int(match.group(2))
    return major


@functools.cache
def _java_major(java: str) -> int | None:
    try:
        result = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaNotFoundError(f"cannot run {java} -version: {exc}") from exc
    return parse_java_major(result.stderr + result.stdout)


def ensure_java(env: MutableMapping[str, str] | None = None) -> Path:
    """Find Java ≥ 17 for Spark, set ``JAVA_HOME`` in ``env`` if it was unset, and return the binary."""
    env = os.environ if env is None else env
    hint = (
        f"Spark needs Java {MIN_JAVA_MAJOR}+: install it (Debian: apt-get install -y openjdk-17-jre-headless) "
        "or point JAVA_HOME at one"
    )
    java_home = env.get("JAVA_HOME", "").strip()
    if java_home:
        java = Path(java_home) / "bin" / "java"
        if not java.is_file():
            raise JavaNotFoundError(f"JAVA_HOME={java_home} has no bin/java. {hint}")
    else:
        found = shutil.which("java", path=env.get("PATH"))
        if found is None:
            raise JavaNotFoundError(f"no java on PATH and JAVA_HOME is unset. {hint}")
        java = Path(found).resolve()
        env["JAVA_HOME"] = str(java.parent.parent)
    major = _java_major(str(java))
    if major is None:
        log.warning("could not tell the version of %s; assuming it is recent enough", java)
    elif major < MIN_JAVA_MAJOR:
        raise JavaNotFoundError(f"{java} is Java {major}. {hint}")
    return java


def prepare_environment(config: JobConfig, env: MutableMapping[str, str] | None = None) -> None:
    """Set what the JVM launcher and Python workers read from the environment, before the JVM starts."""
    env = os.environ if env is None else env
    ensure_java(env)
    if config.is_local:
        for name, value in LOCAL_ENV.items():
            env.setdefault(name, value)
        env.setdefault("PYSPARK_PYTHON", sys.executable)


def build_session(config: JobConfig) -> SparkSession:
    """A SparkSession configured from ``config``; the caller stops it (or use :func:`spark_session`).

    Static settings (master, driver memory, networking) take effect only when this starts the JVM; if a
    session is already running in this process, Spark returns it with only the runtime SQL settings
    applied.
    """
    prepare_environment(config)
    builder = SparkSession.builder
    for key, value in spark_conf(config).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(config.log_level)
    return spark


@contextmanager
def spark_session(config: JobConfig) -> Iterator[SparkSession]:
    """Build a session for the duration of a ``with`` block and stop it afterwards."""
    spark = build_session(config)
    try:
        yield spark
    finally:
        spark.stop()


@contextmanager
def session_for(config: JobConfig, spark: SparkSession | None = None) -> Iterator[SparkSession]:
    """The session a job's ``main`` runs in: ``spark`` when given (left running, the caller owns it),
    otherwise one built from ``config`` and stopped at the end."""
    if spark is not None:
        yield spark
        return
    with spark_session(config) as built:
        yield built
