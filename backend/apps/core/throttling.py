"""Login throttling: one budget per client address, shared by every worker and host through the cache.

The client address is ``REMOTE_ADDR`` unless ``TRUSTED_PROXY_COUNT`` reverse proxies are configured; then it is
the Nth address of ``X-Forwarded-For`` from the right (what the outermost trusted proxy saw). Anything left of it
is the client's to write and never counts. Attempts on ``/api/auth/login`` and ``/admin/login/`` share the budget.

Counting is a fixed window opened by the first attempt (``cache.add``) and an atomic ``incr``, so parallel
requests on several workers cannot both slip under the limit. When the shared cache fails, the count goes to a
per-process cache rather than letting every attempt through.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import time
from typing import Any

from django.conf import settings
from django.core.cache import BaseCache, caches
from django.core.cache.backends.redis import RedisCache
from rest_framework.throttling import BaseThrottle

log = logging.getLogger(__name__)

KEY = "throttle:login:"
PERIODS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}


def parse_rate(rate: str) -> tuple[int, int]:
    """``"10/min"`` → (10 attempts, 60 s); the period is s, m, h or d (DRF's notation)."""
    count, _, period = rate.partition("/")
    try:
        return int(count), PERIODS[period.strip()[:1].lower()]
    except (ValueError, KeyError):
        raise ValueError(f"LOGIN_THROTTLE_RATE {rate!r}: expected <count>/<s|min|hour|day>") from None


def _address(value: str) -> str | None:
    """An IP address as written in X-Forwarded-For (``[::1]:80`` and ``1.2.3.4:80`` lose their port)."""
    value = value.strip()
    if value.startswith("["):
        value = value[1:].partition("]")[0]
    elif value.count(":") == 1:
        value = value.partition(":")[0]
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None


def client_ip(request: Any) -> str:
    """The address of the client who sent ``request`` (a Django or DRF request), never a forged one."""
    meta = request.META
    remote = str(meta.get("REMOTE_ADDR") or "")
    trusted = int(getattr(settings, "TRUSTED_PROXY_COUNT", 0) or 0)
    if trusted <= 0:
        return remote
    hops = [h for h in str(meta.get("HTTP_X_FORWARDED_FOR", "")).split(",") if h.strip()]
    if len(hops) < trusted:  # not through every trusted proxy: nothing in the header can be trusted
        return remote
    return _address(hops[-trusted]) or remote


def _count(cache: BaseCache, key: str, period: int) -> tuple[int, float]:
    """Count one attempt in the window of ``key``: (attempts so far, when the window opened)."""
    now = time.time()
    for _ in range(2):
        cache.add(key, 0, timeout=period)
        cache.add(key + ":t", now, timeout=period)
        try:
            return cache.incr(key), float(cache.get(key + ":t") or now)
        except ValueError:  # the window closed between add and incr: open the next one
            continue
    return 1, now


def check_login_attempt(request: Any) -> float | None:
    """Count a login attempt from ``request``'s client: ``None`` if it may go on, else the seconds to wait."""
    limit, period = parse_rate(settings.LOGIN_THROTTLE_RATE)
    key = KEY + client_ip(request)
    try:
        attempts, opened = _count(caches["default"], key, period)
    except Exception as exc:  # the shared cache is down: hold the line per process
        log.warning("login throttle: shared cache failed (%s); counting in this process only", exc)
        attempts, opened = _count(caches["local"], key, period)
    if attempts <= limit:
        return None
    return max(1.0, math.ceil(opened + period - time.time()))


def reset_login_throttle() -> None:
    """Forget every counted login attempt (tests, or an operator who locked the admins out).

    Only the throttle's own keys go: on Redis the cache may share a database with the Celery broker.
    """
    for alias in ("default", "local"):
        cache = caches[alias]
        if isinstance(cache, RedisCache):
            client = cache._cache.get_client(write=True)
            keys = list(client.scan_iter(match=cache.make_key(KEY + "*"), count=1_000))
            if keys:
                client.delete(*keys)
        else:
            cache.clear()


class LoginRateThrottle(BaseThrottle):
    """DRF face of :func:`check_login_attempt` for ``POST /api/auth/login`` (429 with Retry-After)."""

    def __init__(self) -> None:
        self._wait: float | None = None

    def allow_request(self, request: Any, view: Any) -> bool:
        if request.method != "POST":
            return True
        self._wait = check_login_attempt(request)
        return self._wait is None

    def wait(self) -> float | None:
        return self._wait
