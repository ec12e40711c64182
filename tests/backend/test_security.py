"""Safety of the control plane: login throttling, outgoing URLs, node tokens, denied writes, strict input,
the offline API docs."""

from __future__ import annotations

import os
import subprocess
import sys
from html.parser import HTMLParser
from urllib.parse import urlsplit

from django.test import Client
from rest_framework.test import APIClient

from backend.apps.core.throttling import reset_login_throttle
from tests.backend.conftest import make_user


class _Assets(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href") and value:
                self.urls.append(value)


def test_swagger_ui_is_served_offline_from_the_app(db):
    client = APIClient()
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    parser = _Assets()
    parser.feed(html)
    assert len(parser.urls) >= 3, parser.urls  # stylesheet, bundle, preset (and the favicon)
    for url in parser.urls:
        parts = urlsplit(url)
        assert not parts.scheme and not parts.netloc, f"{url} is not same-origin"
        answer = client.get(url)
        assert answer.status_code == 200, url
        if answer.streaming:
            assert b"".join(answer.streaming_content)
    assert "cdn" not in html.lower()
    assert client.get("/api/schema/").status_code == 200


# -- login throttling ---------------------------------------------------------------------------------------


def _api_login(client: APIClient, **extra: str) -> int:
    body = {"username": "alice", "password": "wrong-password"}
    return client.post("/api/auth/login", body, format="json", **extra).status_code


def _admin_login(client: Client, **extra: str) -> int:
    body = {"username": "alice", "password": "wrong-password", "next": "/admin/"}
    return client.post("/admin/login/", body, **extra).status_code


def test_login_throttle_holds_for_one_client(db):
    make_user("alice", "admin")
    codes = [_api_login(APIClient()) for _ in range(30)]  # a new client (session) each time: same address
    assert codes.count(400) == 10 and codes[10:] == [429] * 20, codes
    response = APIClient().post("/api/auth/login", {"username": "alice", "password": "x"}, format="json")
    assert response.status_code == 429 and int(response["Retry-After"]) >= 1
    # The right password does not get through either while the client is throttled.
    assert _api_login(APIClient()) == 429


def test_a_forged_forwarded_for_does_not_reset_the_budget(db):
    codes = [_api_login(APIClient(), HTTP_X_FORWARDED_FOR=f"203.0.113.{i}") for i in range(30)]
    assert codes.count(400) == 10 and codes.count(429) == 20, codes


def test_behind_trusted_proxies_the_client_is_the_nth_address_from_the_right(db, settings):
    settings.TRUSTED_PROXY_COUNT = 1
    # The proxy appends the address it saw; what the client wrote to the left of it does not count.
    codes = [_api_login(APIClient(), HTTP_X_FORWARDED_FOR=f"10.9.9.{i}, 198.51.100.7") for i in range(30)]
    assert codes.count(400) == 10 and codes.count(429) == 20, codes
    assert _api_login(APIClient(), HTTP_X_FORWARDED_FOR="198.51.100.8") == 400  # another client
    assert _api_login(APIClient()) == 400  # the proxy's own address (no header) is yet another
    settings.TRUSTED_PROXY_COUNT = 2
    assert _api_login(APIClient(), HTTP_X_FORWARDED_FOR="198.51.100.8") == 400  # too short: REMOTE_ADDR
    codes = [_api_login(APIClient(), HTTP_X_FORWARDED_FOR=f"10.9.9.{i}, 198.51.100.9, 10.0.0.2") for i in range(12)]
    assert codes.count(400) == 10, codes


def test_admin_login_is_throttled_and_shares_the_budget(db):
    make_user("alice", "admin")
    client = Client()
    assert client.get("/admin/login/").status_code == 200
    codes = [_admin_login(client) for _ in range(30)]
    assert codes.count(200) == 10 and codes.count(429) == 20, codes  # the form shown again, then refused
    assert _api_login(APIClient()) == 429  # one budget per client, whichever door
    codes = [_admin_login(Client(), HTTP_X_FORWARDED_FOR=f"203.0.113.{i}") for i in range(5)]
    assert codes == [429] * 5


def test_login_counts_are_shared_between_processes(db, settings):
    """Another process (another gunicorn worker or host) spends the budget; this one sees it spent."""
    assert settings.CACHES["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    code = (
        "import django; django.setup()\n"
        "from django.test import RequestFactory\n"
        "from backend.apps.core.throttling import check_login_attempt\n"
        "request = RequestFactory().post('/api/auth/login', REMOTE_ADDR='192.0.2.77')\n"
        "print([check_login_attempt(request) is None for _ in range(10)])\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "backend.config.settings",
        "APP_ENV": "test",
        "CACHE_KEY_PREFIX": settings.CACHES["default"]["KEY_PREFIX"],
        "REDIS_URL": settings.CACHES["default"]["LOCATION"],
    }
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str([True] * 10)
    assert _api_login(APIClient(REMOTE_ADDR="192.0.2.77")) == 429
    assert _api_login(APIClient(REMOTE_ADDR="192.0.2.78")) == 400
    reset_login_throttle()
    assert _api_login(APIClient(REMOTE_ADDR="192.0.2.77")) == 400


def test_login_throttle_falls_back_to_the_process_when_the_cache_fails(db, monkeypatch):
    from django.core.cache import caches

    def broken(*args, **kwargs):
        raise ConnectionError("redis is down")

    monkeypatch.setattr(caches["default"], "add", broken)
    codes = [_api_login(APIClient()) for _ in range(12)]
    assert codes.count(400) == 10 and codes[-1] == 429
