"""Safety of the control plane: login throttling, a refused node URL never called (the rules for outgoing
URLs: test_outgoing_urls.py), node tokens, denied writes, strict input, the offline API docs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest
from django.test import Client
from rest_framework.test import APIClient

from backend.apps.audit.models import AuditEntry
from backend.apps.core.throttling import reset_login_throttle
from backend.apps.metrics.models import series_key
from backend.apps.nodes import services as node_services
from backend.apps.nodes.gateway import client_for
from backend.apps.nodes.models import StorageNode
from storage_engine.errors import InvalidArgumentError, NodeUnavailableError
from tests.backend.conftest import make_user
from tests.support.receiver import Receiver, receiving


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


# -- a stand-in for whatever answers at a URL ---------------------------------------------------------------

SECRET_TEXT = "INTERNAL-ONLY-3f9a"


@pytest.fixture
def answering() -> Iterator[Receiver]:
    """A stand-in node: records what it gets; answers 404 until a test sets answers by path."""
    with receiving() as server:
        server.answer_by_path({})
        yield server


# -- a refused node URL ---------------------------------------------------------------------------------------


def test_a_refused_node_url_is_never_called(db, answering, settings):
    node = StorageNode.objects.create(name="n1", url=answering.url, token="t0ken")
    settings.OUTGOING_URL_ALLOW = "10.0.0.0/8"  # the stand-in on 127.0.0.1 is now out of bounds
    with client_for(node) as client, pytest.raises(NodeUnavailableError, match="refused"):
        client.health()
    StorageNode.objects.filter(pk=node.pk).update(url="http://169.254.169.254")
    node.refresh_from_db()
    settings.OUTGOING_URL_ALLOW = "*"
    with client_for(node) as client, pytest.raises(NodeUnavailableError, match="refused"):
        client.health()
    port = answering.url.rsplit(":", 1)[1]
    for url in (f"http://[::ffff:127.0.0.1]:{port}", "http://[64:ff9b::a9fe:a9fe]", "http://[2002:a9fe:a9fe::1]"):
        StorageNode.objects.filter(pk=node.pk).update(url=url)
        node.refresh_from_db()
        settings.OUTGOING_URL_ALLOW = "10.0.0.0/8" if "ffff" in url else "*"  # judged by the embedded address
        with client_for(node) as client, pytest.raises(NodeUnavailableError, match="refused"):
            client.health()
    assert answering.received == [] and answering.connections == 0


# -- node URL and token ---------------------------------------------------------------------------------------


def test_changing_a_node_url_needs_its_token_again(api_as, answering):
    admin = api_as("admin")
    assert (
        admin.post(
            "/api/nodes/", {"name": "n2", "url": "http://127.0.0.1:9", "token": "s3cret"}, format="json"
        ).status_code
        == 201
    )
    for method in (admin.patch, admin.put):
        response = method("/api/nodes/n2/", {"name": "n2", "url": answering.url}, format="json")
        if response.status_code == 405:  # no PUT on this route
            continue
        assert response.status_code == 400 and "token" in response.json()["errors"], response.json()
    node = StorageNode.objects.get(name="n2")
    assert node.url == "http://127.0.0.1:9" and node.token == "s3cret"
    assert admin.patch("/api/nodes/n2/", {"url": "http://127.0.0.1:9"}, format="json").status_code == 200  # same URL
    response = admin.patch("/api/nodes/n2/", {"url": answering.url, "token": "new-token"}, format="json")
    assert response.status_code == 200 and response.json()["url"] == answering.url
    node.refresh_from_db()
    assert node.token == "new-token"
    entry = AuditEntry.objects.filter(action="node.update").latest("id")
    assert entry.after["token_replaced"] is True and "new-token" not in str(entry.__dict__)
    with pytest.raises(InvalidArgumentError, match="token"):
        node_services.update_node(actor=None, node=node, url="http://127.0.0.1:10")


def test_the_admin_form_asks_for_the_token_with_a_new_url(db):
    from django.forms.models import model_to_dict

    from backend.apps.nodes.admin import StorageNodeForm

    node = StorageNode.objects.create(name="n3", url="http://127.0.0.1:9", token="s3cret")
    data = {k: ("" if v is None else v) for k, v in model_to_dict(node, exclude=["token"]).items()}
    data["policy_overrides"] = "{}"
    form = StorageNodeForm(instance=node, data={**data, "url": "http://127.0.0.1:10"})
    assert not form.is_valid() and "new_token" in form.errors
    form = StorageNodeForm(instance=node, data={**data, "url": "http://169.254.169.254/", "new_token": "x"})
    assert not form.is_valid() and "url" in form.errors
    form = StorageNodeForm(instance=node, data={**data, "url": "http://127.0.0.1:10", "new_token": "fresh"})
    assert form.is_valid(), form.errors
    saved = form.save()
    assert (saved.url, saved.token) == ("http://127.0.0.1:10", "fresh")


@pytest.mark.parametrize("blank", ["", "   "])
def test_an_empty_token_is_a_missing_token(api_as, answering, blank):
    admin = api_as("admin")
    created = admin.post("/api/nodes/", {"name": "n4", "url": "http://127.0.0.1:9", "token": blank}, format="json")
    assert created.status_code == 201 and created.json()["has_token"] is False, created.json()
    assert StorageNode.objects.get(name="n4").token == ""
    node = StorageNode.objects.create(name="n5", url="http://127.0.0.1:9", token="s3cret")
    # With a new URL it is no token: refused, naming `token`, and nothing changes.
    response = admin.patch("/api/nodes/n5/", {"url": answering.url, "token": blank}, format="json")
    assert response.status_code == 400 and list(response.json()["errors"]) == ["token"], response.json()
    node.refresh_from_db()
    assert (node.url, node.token) == ("http://127.0.0.1:9", "s3cret")
    # Without one it changes nothing: the stored token stays.
    response = admin.patch("/api/nodes/n5/", {"token": blank}, format="json")
    assert response.status_code == 200 and response.json()["has_token"] is True
    node.refresh_from_db()
    assert node.token == "s3cret"
    assert "token_replaced" not in AuditEntry.objects.filter(action="node.update").latest("id").after
    # The service holds the rule for every caller.
    with pytest.raises(InvalidArgumentError, match="token"):
        node_services.update_node(actor=None, node=node, url=answering.url, token=blank)
    node_services.update_node(actor=None, node=node, token=blank)
    node.refresh_from_db()
    assert (node.url, node.token) == ("http://127.0.0.1:9", "s3cret")
    assert answering.received == []


@pytest.mark.parametrize("blank", ["", "   "])
def test_the_admin_form_takes_an_empty_token_as_none(db, blank):
    from django.forms.models import model_to_dict

    from backend.apps.nodes.admin import StorageNodeForm

    node = StorageNode.objects.create(name="n6", url="http://127.0.0.1:9", token="s3cret")
    data = {k: ("" if v is None else v) for k, v in model_to_dict(node, exclude=["token"]).items()}
    data["policy_overrides"] = "{}"
    form = StorageNodeForm(instance=node, data={**data, "url": "http://127.0.0.1:10", "new_token": blank})
    assert not form.is_valid() and form.errors["new_token"] == [node_services.TOKEN_REQUIRED], form.errors
    node = StorageNode.objects.get(pk=node.pk)  # the refused form wrote its URL onto the instance it had
    form = StorageNodeForm(instance=node, data={**data, "new_token": blank})
    assert form.is_valid(), form.errors
    saved = form.save()
    assert (saved.url, saved.token) == ("http://127.0.0.1:9", "s3cret")
    added = StorageNodeForm(data={**data, "name": "n7", "new_token": blank})
    assert added.is_valid(), added.errors
    assert added.save().token == ""


# -- one bad node breaks nothing else -------------------------------------------------------------------------


@pytest.fixture
def bad_nodes(db, answering):
    """Four nodes that each fail differently; the stand-in answers text and nonsense."""
    answering.answer_by_path(
        {
            "/health": (200, "text/html", f"<html>{SECRET_TEXT}</html>".encode()),
            # Shard figures first, then a part that is not what a node sends: none of it may be kept.
            "/v1/stats": (
                200,
                "application/json",
                b'{"shards": [{"namespace": "ghost", "shard": 0, "record_count": 5}], "counters": ["?"]}',
            ),
            "/err/health": (500, "text/plain", SECRET_TEXT.encode()),
            "/err/v1/stats": (502, "text/plain", SECRET_TEXT.encode()),
        }
    )
    StorageNode.objects.create(name="bad-url", url="http://[::1", token="t")
    StorageNode.objects.create(name="bad-token", url="http://127.0.0.1:9", token="tökén")
    StorageNode.objects.create(name="nonsense", url=answering.url, token="t")
    StorageNode.objects.create(name="erroring", url=answering.url + "/err", token="t")
    return answering.url


def test_health_survives_bad_nodes_and_shows_none_of_their_text(api_as, bad_nodes, registered_node):
    response = api_as(None).get("/api/health")
    assert response.status_code == 200
    node = response.json()["components"]["node"]
    assert node["ok"] is False
    detail = node["detail"]
    for name in ("bad-url", "bad-token", "nonsense", "erroring"):
        assert name in detail
    assert registered_node.name not in detail  # it answered
    assert "answered HTTP 500" in detail and "not JSON" in detail
    assert SECRET_TEXT not in response.content.decode()
    assert bad_nodes not in detail  # nor the internal addresses


def test_health_shows_no_text_from_a_node_answer(api_as, answering, db):
    StorageNode.objects.create(name="odd", url=answering.url, token="t")
    answering.answer_by_path(
        {"/health": (200, "application/json", b'{"status": "ok", "adapter": "INTERNAL-ONLY-3f9a"}')}
    )
    node = api_as(None).get("/api/health").json()["components"]["node"]
    assert node["ok"] is True and node["detail"] == "reachable: odd (?)"


def test_metrics_collection_goes_on_past_bad_nodes(bad_nodes, registered_node):
    from backend.apps.metrics.models import MetricSeries
    from backend.apps.metrics.services import collect

    result = collect()
    assert result.nodes_up == 1
    assert sorted(result.nodes_down) == ["bad-token", "bad-url", "erroring", "nonsense"]
    assert MetricSeries.objects.get(key=series_key("up", node=registered_node.name)).last_value == 1.0
    assert not MetricSeries.objects.filter(node="nonsense").exclude(name="up").exists()
    assert not MetricSeries.objects.filter(namespace="ghost").exists()
    nodes = {n.name: n for n in StorageNode.objects.all()}
    assert nodes[registered_node.name].healthy and nodes[registered_node.name].last_seen_at is not None
    assert nodes["erroring"].last_error == "answered HTTP 502" and not nodes["erroring"].healthy
    assert "cannot be used" in nodes["bad-token"].last_error and "cannot be used" in nodes["bad-url"].last_error
    assert nodes["nonsense"].last_error.startswith("answered something unexpected")
    assert all(SECRET_TEXT not in n.last_error for n in nodes.values())


# -- the default node ------------------------------------------------------------------------------------------


def test_admin_edits_to_the_default_node_are_kept(api_as, settings):
    settings.NODE_URL, settings.NODE_TOKEN = "http://127.0.0.1:9", "from-settings"
    node = node_services.ensure_default_node()
    assert (node.url, node.token) == ("http://127.0.0.1:9", "from-settings")
    admin = api_as("admin")
    response = admin.patch(f"/api/nodes/{node.name}/", {"url": "http://127.0.0.1:10", "token": "edited"}, format="json")
    assert response.status_code == 200
    assert admin.post("/api/namespaces/", {"name": "later", "shards": 1}, format="json").status_code == 201
    node.refresh_from_db()
    assert (node.url, node.token) == ("http://127.0.0.1:10", "edited")
    assert node_services.ensure_default_node().url == "http://127.0.0.1:10"


# -- refused writes are audited --------------------------------------------------------------------------------


def test_refused_writes_are_audited_as_denied(api_as):
    viewer, operator = api_as("viewer"), api_as("operator")
    assert viewer.post("/api/namespaces/", {"name": "nope", "shards": 1}, format="json").status_code == 403
    assert operator.delete("/api/nodes/node-1/").status_code == 403
    assert operator.patch("/api/policies/cluster", {"set": {"ttl_ms": 1}}, format="json").status_code in (403, 404)
    assert viewer.get("/api/nodes/").status_code == 200  # reads are not audited
    denied = list(AuditEntry.objects.filter(result="denied").order_by("id"))
    assert [(e.actor_name, e.action, e.target) for e in denied[:2]] == [
        ("user-viewer", "api.denied", "POST /api/namespaces/"),
        ("user-operator", "api.denied", "DELETE /api/nodes/node-1/"),
    ]
    first = denied[0]
    assert first.actor is not None and first.at is not None and first.after["role"] == "viewer"
    assert first.detail and first.remote_addr == "127.0.0.1"
    listed = viewer.get("/api/audit/?result=denied").json()["results"]
    assert {e["target"] for e in listed} >= {"POST /api/namespaces/", "DELETE /api/nodes/node-1/"}
    assert all(e["result"] == "denied" for e in listed)


def test_a_csrf_refusal_is_audited_too(db):
    make_user("carol", "admin")
    client = APIClient(enforce_csrf_checks=True)
    client.login(username="carol", password="pw-for-tests-123")
    assert client.post("/api/namespaces/", {"name": "x", "shards": 1}, format="json").status_code == 403
    entry = AuditEntry.objects.get(result="denied")
    assert entry.actor_name == "carol" and "CSRF" in entry.detail


# -- unknown fields are refused, never dropped ------------------------------------------------------------------


def test_namespace_create_refuses_policy_overrides_and_unknown_fields(api_as):
    admin = api_as("admin")
    body = {"name": "orders", "shards": 1, "policy_overrides": {"ttl_ms": 60_000}}
    response = admin.post("/api/namespaces/", body, format="json")
    assert response.status_code == 400
    assert "`policy`" in response.json()["errors"]["policy_overrides"][0]
    response = admin.post("/api/namespaces/", {"name": "orders", "shard_count": 2, "colour": "red"}, format="json")
    assert response.status_code == 400 and set(response.json()["errors"]) == {"shard_count", "colour"}
    assert "takes: name, node, placement, policy, shards" in response.json()["errors"]["colour"][0]
    assert admin.get("/api/namespaces/").json()["results"] == []


@pytest.mark.parametrize(
    ("method", "path", "body", "unknown"),
    [
        ("post", "/api/nodes/", {"name": "n5", "url": "http://127.0.0.1:9", "has_token": True}, "has_token"),
        ("post", "/api/alert-channels/", {"name": "c", "kind": "email", "target": "a@b.example", "id": 3}, "id"),
        (
            "post",
            "/api/alert-rules/",
            {"name": "r", "metric": "stored_bytes", "comparator": ">", "threshold": 1, "builtin": True},
            "builtin",
        ),
        ("patch", "/api/policies/cluster", {"sett": {"ttl_ms": 1}}, "sett"),
        ("post", "/api/spark-jobs", {"job": "lake-export", "priority": 1}, "priority"),
        ("post", "/api/auth/login", {"username": "a", "password": "b", "remember": True}, "remember"),
    ],
)
def test_write_serializers_refuse_unknown_fields(api_as, method, path, body, unknown):
    response = getattr(api_as("admin"), method)(path, body, format="json")
    assert response.status_code == 400 and unknown in response.json()["errors"], response.json()


def test_the_schema_says_unknown_fields_are_refused(db):
    schema = APIClient().get("/api/schema/?format=json").json()
    assert schema["components"]["schemas"]["NamespaceInputRequest"]["additionalProperties"] is False
    assert schema["components"]["schemas"]["NodeInputRequest"]["additionalProperties"] is False


@pytest.mark.parametrize(
    ("app_env", "hasher"), [("development", "PBKDF2PasswordHasher"), ("test", "MD5PasswordHasher")]
)
def test_passwords_are_hashed_with_pbkdf2_outside_the_tests(app_env: str, hasher: str):
    """Only the test settings trade PBKDF2's million rounds for speed (settings.py says why)."""
    code = "import django; django.setup(); from django.conf import settings; print(settings.PASSWORD_HASHERS[0])"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "backend.config.settings", "APP_ENV": app_env}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"django.contrib.auth.hashers.{hasher}"
