"""Operations (issue 18): probes, one log format with request and task ids, settings that name the
variable they cannot read, Celery options a Redis deployment needs."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from celery.signals import task_postrun, task_prerun
from django.test import Client

from backend.apps.core.request_ids import HEADER
from storage_engine.node_api import logs

ROOT = Path(__file__).resolve().parents[2]


def settings_error(**env: str) -> str:
    """What importing the settings says with these variables (empty: it imports)."""
    child_env = {**os.environ, "APP_ENV": "test", **env}
    child = subprocess.run(
        [sys.executable, "-c", "import backend.config.settings"],
        cwd=ROOT,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return child.stderr.strip().splitlines()[-1] if child.returncode else ""


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("METRICS_INTERVAL_S", "15s", "METRICS_INTERVAL_S must be an integer, got '15s'"),
        ("NODE_TIMEOUT_S", "fast", "NODE_TIMEOUT_S must be a number, got 'fast'"),
        ("SPARK_JOB_TIME_LIMIT_S", "5", "SPARK_JOB_TIME_LIMIT_S must be ≥ 60, got 5"),
        ("SECURE_COOKIES", "maybe", "SECURE_COOKIES must be true or false"),
        ("LOG_FORMAT", "xml", "LOG_FORMAT must be one of plain, json, got 'xml'"),
        ("LOG_LEVEL", "loud", "LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got 'LOUD'"),
        ("SPARK_LAKE_EXPORT_CRON", "30 2 * *", "SPARK_LAKE_EXPORT_CRON must have five crontab fields"),
        ("SPARK_LIFECYCLE_REPORT_CRON", "30 25 * * *", "SPARK_LIFECYCLE_REPORT_CRON is not a valid crontab"),
    ],
)
def test_a_bad_setting_names_its_variable(variable: str, value: str, says: str) -> None:
    error = settings_error(**{variable: value})
    assert "ImproperlyConfigured" in error
    assert says in error


def test_good_settings_import() -> None:
    assert settings_error(METRICS_INTERVAL_S="20", LOG_FORMAT="json", SECURE_COOKIES="off") == ""
    assert settings_error(SPARK_LAKE_EXPORT_CRON="0  4 * * 1-5") == ""


def json_lines(fmt: str, emit: Any) -> list[dict[str, Any]]:
    """Lines logged by ``emit()`` through the configured formatter and filter of ``fmt``."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.formatter(fmt))
    handler.addFilter(logs.ContextFilter())
    logger = logging.getLogger("tests.operations")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        emit(logger)
    finally:
        logger.removeHandler(handler)
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_carry_time_level_logger_message() -> None:
    (line,) = json_lines("json", lambda log: log.warning("disk %s", "full"))
    assert set(line) == {"time", "level", "logger", "message"}
    assert (line["level"], line["logger"], line["message"]) == ("WARNING", "tests.operations", "disk full")
    assert line["time"].endswith("Z")


def test_a_task_s_lines_carry_its_id_and_only_while_it_runs() -> None:
    def emit(log: logging.Logger) -> None:
        task_prerun.send(sender=None, task_id="t-42", task=None)
        log.info("inside")
        task_postrun.send(sender=None, task_id="t-42", task=None)
        log.info("after")

    inside, after = json_lines("json", emit)
    assert inside["task_id"] == "t-42"
    assert "task_id" not in after


@pytest.mark.django_db
def test_a_request_gets_an_id_its_log_lines_and_response_carry(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str | None] = []

    class Probe(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(logs.request_id.get())

    probe = Probe()
    logging.getLogger("django.request").addHandler(probe)
    try:
        kept = Client().get("/api/no-such-route", HTTP_X_REQUEST_ID="abc-123")
        fresh = Client().get("/livez", HTTP_X_REQUEST_ID="not ok; a header injection")
    finally:
        logging.getLogger("django.request").removeHandler(probe)
    assert kept[HEADER] == "abc-123"
    assert "abc-123" in seen  # the 404 warning django.request logs carries it
    assert fresh[HEADER] != "not ok; a header injection" and len(fresh[HEADER]) == 32
    assert logs.request_id.get() is None  # nothing leaks past the request


def test_routine_http_client_lines_are_debug_only() -> None:
    config = logs.logging_config("plain", "INFO")
    assert config["loggers"]["httpx"]["level"] == "WARNING"
    assert logs.logging_config("plain", "DEBUG")["loggers"]["httpx"]["level"] == "DEBUG"


def test_celery_lines_of_tasks_beat_starts_every_second_are_debug_only(settings: Any) -> None:
    """The lifecycle tick runs every second: its "received"/"succeeded" lines would be 2 a second."""
    spec = settings.LOGGING["filters"]["routine"]
    assert "routine" in settings.LOGGING["handlers"]["console"]["filters"]
    routine = logs.RoutineFilter(spec["loggers"], spec["words"])

    def passes(logger: str, level: int, message: str) -> bool:
        return routine.filter(logging.LogRecord(logger, level, __file__, 1, message, None, None))

    tick = "Task backend.apps.lifecycle.tasks.tick_schedules[1437e428] succeeded in 0.003s: 0"
    assert not passes("celery.app.trace", logging.INFO, tick)
    assert not passes("celery.beat", logging.INFO, "Scheduler: Sending due task platform: tick lifecycle schedules")
    assert passes("celery.app.trace", logging.ERROR, tick.replace("succeeded", "raised"))  # failures always show
    assert passes("celery.app.trace", logging.INFO, "Task backend.apps.lifecycle.tasks.lifecycle_step[6c] succeeded")
    assert passes("backend.apps.lifecycle", logging.INFO, "tick_schedules started 3 schedules")  # not Celery's
    assert "routine" not in logs.logging_config("plain", "DEBUG", routine_words=("x",))["filters"]


def test_liveness_answers_without_checking_anything() -> None:
    response = Client().get("/livez")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readiness_is_200_with_database_and_broker_up() -> None:
    response = Client().get("/readyz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ready"
    assert body["checks"]["database"]["ok"] and body["checks"]["broker"]["ok"]


@pytest.mark.django_db
def test_readiness_is_503_naming_an_unreachable_broker(settings: Any) -> None:
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "not ready"
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["broker"]["ok"] is False
    assert "redis broker" in body["checks"]["broker"]["detail"]


def test_redis_redelivers_no_task_while_the_longest_one_may_still_run(settings: Any) -> None:
    assert settings.CELERY_BROKER_URL.startswith("redis://")  # the test environment runs real Redis
    timeout = settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    assert timeout > settings.SPARK_JOB_TIME_LIMIT_S
    assert timeout > settings.CELERY_TASK_TIME_LIMIT
    assert settings.CELERY_WORKER_SEND_TASK_EVENTS is True
