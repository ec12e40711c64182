"""The id a log line carries (``storage_engine.node_api.logs``): a request's, or a Celery task's.

A request keeps the ``X-Request-ID`` a proxy or client sent when it is a short token, or
gets a new one; the response says which, so a user's report can be matched with the logs.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse

from storage_engine.node_api import logs

HEADER = "X-Request-ID"
_ACCEPTED = re.compile(r"[A-Za-z0-9._-]{1,64}")


def request_started(environ: dict[str, Any] | None = None, **_: Any) -> None:
    """Django ``request_started``: before any middleware, so every line of the request carries the id,
    down to the one Django writes after the response (``django.request``'s "Not Found" and errors)."""
    sent = (environ or {}).get("HTTP_X_REQUEST_ID", "")
    logs.request_id.set(sent if _ACCEPTED.fullmatch(sent) else uuid.uuid4().hex)


def request_finished(**_: Any) -> None:
    """Django ``request_finished``: the response was sent; later lines belong to no request."""
    logs.request_id.set(None)


class RequestIdMiddleware:
    """Tells the client the request's id (``X-Request-ID``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if logs.request_id.get() is None:  # a request not started by a handler (RequestFactory)
            request_started(request.META)
        response = self.get_response(request)
        response[HEADER] = logs.request_id.get() or ""
        return response


def task_started(task_id: str | None = None, **_: Any) -> None:
    """Celery ``task_prerun``: lines logged by the task carry its id."""
    logs.task_id.set(task_id)


def task_finished(**_: Any) -> None:
    """Celery ``task_postrun``."""
    logs.task_id.set(None)
