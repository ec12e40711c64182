"""One log format for every process: web, Celery worker and beat, storage node.

``LOG_FORMAT=plain`` (default) writes ``time level logger message``; ``LOG_FORMAT=json``
writes one JSON object a line (python-json-logger) with the same fields —
``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message`` — plus ``request_id``
or ``task_id`` when the line was written while serving a request or running a task
(set by the web's request middleware, the Celery task signals and the node's request
handler through :data:`request_id` / :data:`task_id`), and ``exc_info`` for errors.

Routine HTTP client lines (httpx's "HTTP Request: GET …" for every node call) are
DEBUG, not INFO: a worker calling nodes all day would otherwise log them by the
thousand.
"""

from __future__ import annotations

import contextvars
import logging
import logging.config
import time
from typing import Any

from pythonjsonlogger.json import JsonFormatter

LOG_FORMATS = ("plain", "json")
request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
task_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("task_id", default=None)
# Libraries whose INFO lines are routine: shown only at DEBUG.
QUIET_LOGGERS = ("httpx", "httpcore", "urllib3", "kombu", "amqp")


def _utc(seconds: float | None) -> time.struct_time:
    return time.gmtime(seconds)


class ContextFilter(logging.Filter):
    """Adds the current request or task id to every record (``None`` outside one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        record.task_id = task_id.get()
        return True


class RoutineFilter(logging.Filter):
    """Drops INFO lines of ``loggers`` that mention one of ``words`` (e.g. Celery's "received" and "succeeded"
    lines of a task beat starts every second): routine work would otherwise bury what matters. Warnings and
    errors always pass; with ``LOG_LEVEL=DEBUG`` the filter is not installed."""

    def __init__(self, loggers: tuple[str, ...] = (), words: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.loggers, self.words = tuple(loggers), tuple(words)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO or not record.name.startswith(self.loggers):
            return True
        message = record.getMessage()
        return not any(word in message for word in self.words)


class PlainFormatter(logging.Formatter):
    """``time level logger [request_id=… task_id=…] message``."""

    converter = staticmethod(_utc)

    def __init__(self) -> None:
        super().__init__("%(asctime)sZ %(levelname)s %(name)s%(ids)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        ids = [f"{k}={v}" for k in ("request_id", "task_id") if (v := getattr(record, k, None))]
        record.ids = f" [{' '.join(ids)}]" if ids else ""
        return super().format(record)


class JsonLineFormatter(JsonFormatter):
    """One JSON object a line: time, level, logger, message, and request_id/task_id when set."""

    converter = staticmethod(_utc)

    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s %(task_id)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            datefmt="%Y-%m-%dT%H:%M:%SZ",
        )

    def process_log_record(self, log_record: dict[str, Any]) -> dict[str, Any]:
        for key in ("request_id", "task_id"):
            if log_record.get(key) is None:
                log_record.pop(key, None)
        return log_record


def formatter(fmt: str) -> logging.Formatter:
    """The formatter of ``LOG_FORMAT`` (``plain`` or ``json``); anything else is refused."""
    if fmt == "plain":
        return PlainFormatter()
    if fmt == "json":
        return JsonLineFormatter()
    raise ValueError(f"LOG_FORMAT must be one of {', '.join(LOG_FORMATS)}, got {fmt!r}")


def logging_config(
    fmt: str, level: str, *, routine_loggers: tuple[str, ...] = (), routine_words: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for ``LOG_FORMAT``/``LOG_LEVEL`` (Django's ``LOGGING`` uses it too).
    INFO lines of ``routine_loggers`` naming one of ``routine_words`` are dropped unless the level is DEBUG
    (:class:`RoutineFilter`)."""
    formatter(fmt)  # refuse a bad format before anything is configured
    filters: dict[str, Any] = {"context": {"()": ContextFilter}}
    if routine_words and level != "DEBUG":
        filters["routine"] = {"()": RoutineFilter, "loggers": routine_loggers, "words": routine_words}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": filters,
        "formatters": {"default": {"()": formatter, "fmt": fmt}},
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": "default", "filters": list(filters)},
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {name: {"level": "DEBUG" if level == "DEBUG" else "WARNING"} for name in QUIET_LOGGERS},
    }


def configure(fmt: str, level: str) -> None:
    """Configure this process's logging (the node and the CLIs; Django applies ``LOGGING`` itself)."""
    logging.config.dictConfig(logging_config(fmt, level))
