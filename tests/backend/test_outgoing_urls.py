"""Outgoing URLs (node URLs, webhook and Alertmanager channels) are judged by the address they reach, not by
how they are written: every spelling of an IPv4 address, every IPv6 form that embeds one, names with a
trailing dot; channels reach loopback and private addresses only when OUTGOING_URL_ALLOW names them; a
refused channel test makes no connection at all (backend/apps/core/outgoing.py)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator

import httpx
import pytest

from backend.apps.alerts.models import Channel
from backend.apps.core.outgoing import CHANNEL, NODE, OutgoingURLRefused, Purpose, check_outgoing_url, embedded
from tests.support.receiver import Receiver, receiving

PURPOSES: list[Purpose] = [NODE, CHANNEL]


def _fake_dns(monkeypatch: pytest.MonkeyPatch, table: dict[str, str]) -> None:
    """Names resolve to the addresses of ``table`` (other names as usual): DNS is outside our control."""
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host in table:
            address = table[host]
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (address, port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


# -- refused whatever the purpose and the list ------------------------------------------------------------

# 169.254.169.254, the cloud metadata address, however it is written.
METADATA_FORMS = [
    "http://169.254.169.254/latest/meta-data/",
    "http://169.254.170.2/v2/credentials",
    "http://2852039166/",  # one decimal number
    "http://0xa9fea9fe/",  # one hexadecimal number
    "http://0xa9.0xfe.0xa9.0xfe/",  # hexadecimal parts
    "http://0251.0376.0251.0376/",  # octal parts (httpx refuses the URL: nothing is called)
    "http://169.254.43518/",  # the last two parts as one
    "http://[::ffff:169.254.169.254]/",  # IPv4-mapped
    "http://[::169.254.169.254]/",  # IPv4-compatible
    "http://[::ffff:0:a9fe:a9fe]/",  # IPv4-translated
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64, the well-known prefix
    "http://[64:ff9b:1::a9fe:a9fe]/",  # NAT64, the local-use prefix as a /96
    "http://[64:ff9b:1:a9fe:a9:fe00::]/",  # … and as a /48 (RFC 6052 skips bits 64-71)
    "http://[2002:a9fe:a9fe::1]/",  # 6to4
    "http://[2001:0:4136:e378:8000:63bf:5601:5601]/",  # Teredo: the client is the last 32 bits inverted
    "http://[fe80::1]:7070",
    "http://[fe80::1%25eth0]:7070",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://METADATA.google.internal./",  # a trailing dot is the same name
    "http://100.100.100.200/",
    "http://[fd00:ec2::254]/",
    "http://0/",  # 0.0.0.0 reaches this host
    "http://[::]/",
    "http://evil.example/",  # resolves to the metadata address (fake DNS below)
    "http://evil6.example/",  # resolves to its NAT64 form
    "http://evil.example./",
    "file:///etc/passwd",
    "gopher://127.0.0.1:6379/",
]


@pytest.mark.parametrize("purpose", PURPOSES)
@pytest.mark.parametrize("url", METADATA_FORMS)
def test_the_metadata_address_is_refused_however_written(url, purpose, monkeypatch, settings):
    _fake_dns(
        monkeypatch,
        {"evil.example": "169.254.169.254", "evil.example.": "169.254.169.254", "evil6.example": "64:ff9b::a9fe:a9fe"},
    )
    for allow in ("*", "*, 169.254.0.0/16, 64:ff9b::/96, 2002::/16, fe80::/10, evil.example, evil6.example"):
        settings.OUTGOING_URL_ALLOW = allow  # listing a never-called range or name does not open it
        with pytest.raises(OutgoingURLRefused):
            check_outgoing_url(url, purpose=purpose)


def test_messages_name_what_is_reached_and_the_rule(monkeypatch):
    _fake_dns(monkeypatch, {"evil6.example": "64:ff9b::a9fe:a9fe"})
    expected = {
        "http://[64:ff9b::a9fe:a9fe]/": "64:ff9b::a9fe:a9fe embeds 169.254.169.254, a link-local address",
        "http://2852039166/": "2852039166 resolves to 169.254.169.254, a link-local address",
        "http://evil6.example/": "evil6.example resolves to 64:ff9b::a9fe:a9fe, which embeds 169.254.169.254, a link",
        "http://127.1:6379/": "127.1 resolves to 127.0.0.1, a loopback address: name it in OUTGOING_URL_ALLOW",
        "http://[::ffff:10.0.0.1]/": "::ffff:a00:1 embeds 10.0.0.1, a private address: name it in OUTGOING_URL_ALLOW",
    }
    for url, start in expected.items():
        with pytest.raises(OutgoingURLRefused) as refused:
            check_outgoing_url(url, purpose=CHANNEL)
        assert str(refused.value).startswith(start), str(refused.value)
        assert "127" not in refused.value.rule and "169.254" not in refused.value.rule  # viewers see the rule


@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b:1:c000:2:2100::",  # RFC 6052's 192.0.2.33 under a /48
        "64:ff9b:1:1c0:0:221::",  # a /56
        "64:ff9b:1:1:c0:2:2100::",  # a /64
        "64:ff9b:1::c000:221",  # a /96
        "64:ff9b::c000:221",  # the well-known prefix
        "2002:c000:221::1",  # 6to4
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # RFC 4380's Teredo example: client 192.0.2.45
        "::ffff:192.0.2.33",
        "::192.0.2.33",
    ],
)
def test_the_ipv4_address_embedded_in_each_ipv6_form(address):
    found = embedded(ipaddress.IPv6Address(address))
    assert {"192.0.2.33", "192.0.2.45"} & {str(a) for a in found}, found
    assert embedded(ipaddress.IPv6Address("2001:db8::1")) == () == embedded(ipaddress.IPv6Address("::1"))


# -- loopback, private and the rest: nodes by default, channels when named ---------------------------------

LOCAL_URLS = [
    "http://127.0.0.1:6379/",
    "http://127.1:6379/",
    "http://2130706433:6379/",  # 127.0.0.1 as one number
    "http://localhost:7070",
    "http://[::1]:7070",
    "http://[::ffff:127.0.0.1]:6379/",
    "http://[64:ff9b::7f00:1]/",
    "http://10.1.2.3:7070",
    "http://[::ffff:10.1.2.3]/",
    "http://[2002:a01:203::1]/",  # 6to4 of 10.1.2.3
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://[fd12::1]/",
    "http://100.64.0.1/",  # shared (CGNAT)
    "http://[64:ff9b:1::a01:203]/",  # local-use NAT64
]
ODD_URLS = ["http://224.0.0.1/", "http://[ff02::1]/", "http://240.0.0.1/", "http://192.0.2.1/", "http://[2001:db8::1]/"]


@pytest.mark.parametrize("url", LOCAL_URLS)
def test_local_addresses_are_for_nodes_and_for_channels_only_when_named(url, settings):
    settings.OUTGOING_URL_ALLOW = "*"
    check_outgoing_url(url, purpose=NODE)
    with pytest.raises(OutgoingURLRefused, match="name it in OUTGOING_URL_ALLOW to allow it"):
        check_outgoing_url(url, purpose=CHANNEL)
    # Named by what it reaches (the embedded IPv4 address for an embedding form; the local-use NAT64 prefix,
    # which embeds where only its network knows, by itself).
    settings.OUTGOING_URL_ALLOW = "*, 127.0.0.0/8, ::1, 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fd00::/8, "
    settings.OUTGOING_URL_ALLOW += "100.64.0.0/10, 64:ff9b:1::/48"
    check_outgoing_url(url, purpose=CHANNEL)
    settings.OUTGOING_URL_ALLOW = "hooks.example.com"  # without "*", nodes too reach only what is named
    with pytest.raises(OutgoingURLRefused):
        check_outgoing_url(url, purpose=NODE)


@pytest.mark.parametrize("purpose", PURPOSES)
@pytest.mark.parametrize("url", ODD_URLS)
def test_multicast_reserved_and_documentation_addresses_only_when_named(url, purpose, settings):
    with pytest.raises(OutgoingURLRefused, match="name it in OUTGOING_URL_ALLOW"):
        check_outgoing_url(url, purpose=purpose)
    settings.OUTGOING_URL_ALLOW = "224.0.0.0/4, ff00::/8, 240.0.0.0/4, 192.0.2.0/24, 2001:db8::/32"
    check_outgoing_url(url, purpose=purpose)


@pytest.mark.parametrize("purpose", PURPOSES)
@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/x",  # does not resolve here: allowed under "*", checked again at each call
        "http://8.8.8.8/",
        "http://[64:ff9b::808:808]/",  # NAT64 of a public address
        "http://[2002:808:808::1]/",  # 6to4 of a public address
        "http://[2606:4700::1111]/",
    ],
)
def test_public_addresses_are_allowed_by_default(url, purpose):
    check_outgoing_url(url, purpose=purpose)


def test_an_allow_list_names_hosts_and_networks(settings, monkeypatch):
    settings.OUTGOING_URL_ALLOW = "10.0.0.0/8, hooks.example.com, *.corp.example, 127.0.0.1"
    _fake_dns(
        monkeypatch,
        {"node.corp.example": "192.168.5.5", "bad.corp.example": "169.254.169.254", "other.example": "8.8.8.8"},
    )
    for purpose in PURPOSES:
        for url in [
            "http://10.1.2.3/",
            "http://[64:ff9b::a01:203]/",  # judged by 10.1.2.3
            "https://hooks.example.com/",
            "http://node.corp.example:7070",  # a named host may resolve to any address but a never-called one
            "http://127.0.0.1:1/",
            "http://[::ffff:127.0.0.1]:1/",
        ]:
            check_outgoing_url(url, purpose=purpose)
        for url in [
            "http://192.168.1.1/",
            "http://other.example/",
            "http://bad.corp.example/",
            "http://127.0.0.2/",
            "http://[::ffff:127.0.0.2]/",
            "http://8.8.8.8/",
        ]:
            with pytest.raises(OutgoingURLRefused):
                check_outgoing_url(url, purpose=purpose)
    settings.OUTGOING_URL_ALLOW = "not a host!"
    from backend.apps.core.checks import check_security_settings

    assert [e.id for e in check_security_settings()] == ["core.E001"]


# -- on save: 400 naming the field and the rule -------------------------------------------------------------


def test_node_and_channel_urls_are_checked_when_saved(api_as, monkeypatch):
    _fake_dns(monkeypatch, {"evil.example": "169.254.169.254", "redis.internal": "127.0.0.1"})
    admin = api_as("admin")
    for url in [
        "http://169.254.169.254/",
        "http://metadata.google.internal./",
        "http://evil.example:7070",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[::169.254.169.254]/",
        "http://[2002:a9fe:a9fe::1]/",
    ]:
        response = admin.post("/api/nodes/", {"name": "n9", "url": url, "token": "t"}, format="json")
        assert response.status_code == 400 and "never called" in response.json()["errors"]["url"][0], response.json()
        for kind in ("webhook", "alertmanager"):
            body = {"name": "hook", "kind": kind, "target": url + "/hook", "secret": "k"}
            response = admin.post("/api/alert-channels/", body, format="json")
            errors = response.json()["errors"]
            assert response.status_code == 400 and "never called" in errors["target"][0], errors
    node = {"name": "n9", "url": "http://10.0.0.9:7070", "token": "t"}
    assert admin.post("/api/nodes/", node, format="json").status_code == 201  # nodes may be private
    response = admin.patch("/api/nodes/n9/", {"url": "http://[64:ff9b::a9fe:a9fe]/", "token": "t"}, format="json")
    assert response.status_code == 400 and "url" in response.json()["errors"]
    response = admin.post("/api/nodes/", {"name": "n8", "url": "http://10.0.0.8:7070", "token": "tökén"}, format="json")
    assert response.status_code == 400 and "token" in response.json()["errors"]
    for kind in ("webhook", "alertmanager"):
        body = {"name": "local", "kind": kind, "target": "http://redis.internal:6379/", "secret": "k"}
        response = admin.post("/api/alert-channels/", body, format="json")
        assert response.status_code == 400
        assert response.json()["errors"]["target"] == [
            "refused: redis.internal resolves to 127.0.0.1, a loopback address: name it in OUTGOING_URL_ALLOW to "
            "allow it"
        ]
        body["target"] = "http://[::ffff:10.0.0.1]:9093/"
        response = admin.post("/api/alert-channels/", body, format="json")
        assert response.json()["errors"]["target"] == [
            "refused: ::ffff:a00:1 embeds 10.0.0.1, a private address: name it in OUTGOING_URL_ALLOW to allow it"
        ]


# -- a refused channel test connects to nothing -------------------------------------------------------------


@pytest.fixture
def loopback() -> Iterator[Receiver]:
    """Stands for the services next to the console (Redis, the database, the node): it answers on 127.0.0.1."""
    with receiving() as server:
        yield server


def _reaching(receiver: Receiver) -> list[str]:
    """Spellings of the receiver's address that a plain call really reaches (checked here, so the test shows
    that each one is a way to the loopback service, not a URL that fails on its own)."""
    port = receiver.url.rsplit(":", 1)[1]
    reached = []
    for host in ("127.0.0.1", "127.1", "2130706433", "0x7f000001", "0x7f.0.0.1", "[::ffff:127.0.0.1]", "localhost"):
        url = f"http://{host}:{port}/probe"
        before = len(receiver.received)
        try:
            httpx.post(url, timeout=2.0)
        except httpx.HTTPError:
            continue  # no route here (IPv6 off, localhost unnamed): not a way to the service on this machine
        if len(receiver.received) == before + 1:
            reached.append(url)
    return reached


@pytest.mark.parametrize("kind", ["webhook", "alertmanager"])
def test_a_refused_channel_test_makes_no_connection(kind, loopback, api_as, settings):
    ways = _reaching(loopback)
    assert {f"{loopback.url}/probe", loopback.url.replace("127.0.0.1", "2130706433") + "/probe"} <= set(ways)
    loopback.received.clear()
    loopback.connections = 0
    operator = api_as("operator")
    channels = [Channel.objects.create(name=f"c{i}", kind=kind, target=url, secret="k") for i, url in enumerate(ways)]
    for i, form in enumerate(METADATA_FORMS[:16]):  # the metadata address, however written (past the save checks)
        channels.append(Channel.objects.create(name=f"m{i}", kind=kind, target=form, secret="k"))
    settings.OUTGOING_URL_ALLOW = "*"  # the default: anything public, loopback only when named
    for channel in channels:
        answer = operator.post(f"/api/alert-channels/{channel.pk}/test").json()
        assert answer["delivered"] is False and answer["error"].startswith("refused by OUTGOING_URL_ALLOW: "), answer
        assert "127.0.0.1" not in answer["error"] and "169.254" not in answer["error"]  # the rule, not the target
    assert loopback.received == [] and loopback.connections == 0
    # Named, the same channels reach it: the refusal above was the rule, not a broken URL.
    settings.OUTGOING_URL_ALLOW = "*, 127.0.0.1, ::1"
    for channel in channels[: len(ways)]:
        assert operator.post(f"/api/alert-channels/{channel.pk}/test").json() == {"delivered": True, "error": ""}
    assert len(loopback.received) == len(ways)
