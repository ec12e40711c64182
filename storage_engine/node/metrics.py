"""The node's ``/metrics``: one ``prometheus_client`` registry per app.

Per app, not the library's global registry, because a process may serve several apps
(the tests start several nodes in one interpreter) and each must publish its own figures.
The registry holds:

- the engine's figures, read at every scrape (:class:`~storage_engine.node.engine_metrics.EngineCollector`);
- HTTP request counts and durations by route template (``/v1/namespaces/{ns}``, never the
  raw path, so a scraper sees a bounded set of series), method and status, recorded by
  :class:`RequestMetrics` around every request — refused (401/403) and unrouted (404) ones too;
- append and read latency histograms, timed around the engine call itself (queueing for
  the I/O worker and the fsync included, HTTP parsing and encoding excluded);
- the process (CPU, memory, file descriptors) and the Python runtime (GC, version).

Names follow Prometheus conventions (base units, ``_total`` counters, ratios 0–1), all
prefixed ``lcs_``; ``docs/metrics.md`` lists them.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import choose_encoder
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from starlette.datastructures import Headers, MutableHeaders
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from storage_engine.node_api import logs

P = ParamSpec("P")
T = TypeVar("T")
# Seconds: from a page-cache read (0.5 ms) to an append stuck behind a slow fsync (10 s).
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
READ_OPERATIONS = ("fetch", "key", "tag", "offset_for_time", "subscription")
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})  # any other: "other"
UNMATCHED = "unmatched"  # the route label of a request no route serves (404): one series, whatever the path
REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


class NodeMetrics:
    """The app's registry and the metrics the node records itself; thread-safe."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        labels = ("route", "method", "status")
        self.http_requests = Counter(
            "lcs_node_http_requests_total",
            "HTTP requests answered, by route template, method and status.",
            labels,
            registry=registry,
        )
        self.http_seconds = Histogram(
            "lcs_node_http_request_duration_seconds",
            "Time from a request's arrival to its last answer byte, by route template, method and status.",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.append_seconds = Histogram(
            "lcs_append_duration_seconds",
            "Time the engine took to append one produce batch (to one shard), its fsync included; "
            "successful appends only.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.read_seconds = Histogram(
            "lcs_read_duration_seconds",
            "Time the engine took to serve one read, by operation (fetch, key, tag, offset_for_time, "
            "subscription); successful reads only.",
            ["operation"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        for operation in READ_OPERATIONS:  # every operation's series from the start, at 0
            self.read_seconds.labels(operation)
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        self._lock = threading.Lock()
        self._seconds: dict[str, float] = defaultdict(float)
        self._calls: dict[str, int] = defaultdict(int)

    def register(self, collector: Collector) -> None:
        self.registry.register(collector)

    def observe_request(self, route: str, name: str | None, method: str, status: int, seconds: float) -> None:
        """One answered request: ``route`` is its template, ``name`` the route's name (``None`` unrouted)."""
        status_label = str(status)
        self.http_requests.labels(route, method, status_label).inc()
        self.http_seconds.labels(route, method, status_label).observe(seconds)
        if name is not None:
            with self._lock:
                self._seconds[name] += seconds
                self._calls[name] += 1

    def snapshot(self) -> dict[str, dict[str, float]]:
        """Requests and seconds per route name, for ``GET /v1/stats`` ``http`` (the control plane reads it)."""
        with self._lock:
            return {
                name: {"requests": self._calls[name], "seconds_sum": round(self._seconds[name], 6)}
                for name in sorted(self._calls)
            }

    def timed_append(self, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``call(*args)``, its duration observed as an append when it succeeds."""
        started = time.perf_counter()
        result = call(*args, **kwargs)
        self.append_seconds.observe(time.perf_counter() - started)
        return result

    def timed_read(self, operation: str, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``call(*args)``, its duration observed as a read of ``operation`` when it succeeds."""
        started = time.perf_counter()
        result = call(*args, **kwargs)
        self.read_seconds.labels(operation).observe(time.perf_counter() - started)
        return result

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """The registry in the format the scraper asked for (OpenMetrics or the text format 0.0.4)."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


def route_of(routes: list[Route], scope: Scope) -> Route | None:
    """The route serving this request: the router's choice, else (a request refused before routing)
    the first full match, else the first route matching the path only (its answer is a 405)."""
    found = scope.get("route")
    if isinstance(found, Route):
        return found
    partial = None
    for route in routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return route
        if match is Match.PARTIAL and partial is None:
            partial = route
    return partial


class RequestMetrics:
    """Outermost middleware: times every HTTP request and counts its answer by route template, and gives
    it a request id (the ``X-Request-ID`` sent, when a short token, else a new one) that every log line
    written while serving it carries (:data:`storage_engine.node_api.logs.request_id`) and the answer repeats."""

    def __init__(self, app: ASGIApp, metrics: NodeMetrics, routes: list[Route]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        sent = Headers(scope=scope).get(REQUEST_ID_HEADER, "")
        request_id = sent if _REQUEST_ID.fullmatch(sent) else uuid.uuid4().hex
        token = logs.request_id.set(request_id)
        status = 500  # what the client gets when the app fails before answering

        async def answer(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message).append(REQUEST_ID_HEADER, request_id)
            await send(message)

        try:
            await self.app(scope, receive, answer)
        finally:
            routed = scope.get("route")  # set by the router: the request got past authentication
            route = route_of(self.routes, scope)
            self.metrics.observe_request(
                route.path if route else UNMATCHED,
                route.name if route and routed is not None else None,
                scope["method"] if scope["method"] in METHODS else "other",
                status,
                time.perf_counter() - started,
            )
            logs.request_id.reset(token)
