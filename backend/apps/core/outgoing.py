"""Which URLs the control plane may call: storage nodes (``NODE``) and alert channels (``CHANNEL``: webhooks
and Alertmanagers). A URL is judged by the addresses it reaches, never by how it is written.

``OUTGOING_URL_ALLOW`` is a comma-separated list of host names (``hooks.example.com``), name suffixes
(``*.corp.example``), addresses and networks (``10.0.0.0/8``, ``fd00::/8``), and ``*``. What it names is
allowed (a listed name whatever it resolves to, a listed network for every address in it). ``*`` (the
default) allows every public address, and for node URLs also loopback, private (RFC 1918, ``fc00::/7``) and
shared (CGNAT) addresses, since nodes live on the operator's network; a channel reaches those only when the
list names them, so that a webhook cannot be aimed at the services next to the console.

Never called, whatever the list says: link-local addresses (169.254.0.0/16, fe80::/10, where clouds serve
their metadata), other cloud metadata addresses, the metadata host names and the unspecified addresses
(0.0.0.0/8, ``::``, which reach this host).

How it is judged: the host is parsed as httpx (the client that makes every outgoing call) parses it, and
resolved as the call resolves it (``getaddrinfo``, so ``2852039166``, ``0xa9.0xfe.0xa9.0xfe`` and ``127.1``
are the IPv4 addresses they reach). An IPv6 address that embeds an IPv4 address — IPv4-mapped
(``::ffff:0:0/96``), IPv4-compatible (``::/96``), IPv4-translated (``::ffff:0:0:0/96``), NAT64
(``64:ff9b::/96``), 6to4 (``2002::/16``), Teredo (``2001::/32``: the server's and the client's) — is judged by
the embedded address, allow list included. The local-use NAT64 prefix (``64:ff9b:1::/48``) may embed at any
RFC 6052 position: it is refused when any of them holds a never-called address, and is otherwise judged as a
local address of its own. Names are resolved when a URL is checked (on save and again before every call);
one refused address refuses the URL.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal

import httpx
from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Purpose = Literal["node", "channel"]
NODE: Final = "node"
CHANNEL: Final = "channel"
SCHEMES = ("http", "https")
ALLOW_HINT = "name it in OUTGOING_URL_ALLOW to allow it"
NEVER_HINT = "which is never called, whatever OUTGOING_URL_ALLOW says"


@dataclass(frozen=True)
class Range:
    network: IPNetwork
    what: str  # "a loopback address": completes "… is …" in messages
    never: bool = False  # refused whatever the allow list says
    node: bool = False  # a node may be here under "*" (a channel only when the list names it)


def _ranges(never: bool, node: bool, what: str, *networks: str) -> list[Range]:
    return [Range(ipaddress.ip_network(n), what, never, node) for n in networks]


# Every address that is not public. The first range holding an address describes it, so the never-called
# metadata addresses come before the private ranges that contain them.
RANGES: tuple[Range, ...] = (
    *_ranges(True, False, "an unspecified address (it reaches this host)", "0.0.0.0/8", "::/128"),
    *_ranges(True, False, "a link-local address (where clouds serve their metadata)", "169.254.0.0/16", "fe80::/10"),
    *_ranges(
        True,
        False,
        "a cloud metadata address",
        "fd00:ec2::254/128",  # AWS over IPv6
        "100.100.100.200/32",  # Alibaba Cloud
        "168.63.129.16/32",  # Azure's host services (WireServer)
    ),
    *_ranges(False, True, "a loopback address", "127.0.0.0/8", "::1/128"),
    *_ranges(
        False, True, "a private address", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7", "fec0::/10"
    ),
    *_ranges(False, True, "a shared (CGNAT) address", "100.64.0.0/10"),
    *_ranges(False, True, "a local-use NAT64 address", "64:ff9b:1::/48"),
    *_ranges(False, False, "a multicast address", "224.0.0.0/4", "ff00::/8"),
    *_ranges(
        False,
        False,
        "a reserved address",
        "240.0.0.0/4",  # and the broadcast address
        "192.0.0.0/24",
        "192.0.2.0/24",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "100::/64",
        "2001:db8::/32",
    ),
)
REFUSED_HOSTS = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
    }
)

_V4_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_V4_COMPATIBLE = ipaddress.ip_network("::/96")
_V4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_6TO4 = ipaddress.ip_network("2002::/16")
_TEREDO = ipaddress.ip_network("2001::/32")
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")


class OutgoingURLRefused(ValueError):
    """The URL may not be called. ``str()`` says why, naming the host and the address it reaches (for the
    admin who typed it); ``rule`` says why without them (for anyone who may see a failed delivery)."""

    def __init__(self, message: str, rule: str | None = None) -> None:
        super().__init__(message)
        self.rule = rule or message


@dataclass(frozen=True)
class AllowList:
    anything: bool
    names: frozenset[str]
    suffixes: tuple[str, ...]
    networks: tuple[IPNetwork, ...]

    def names_host(self, host: str) -> bool:
        """The list names this host (``*`` names nothing)."""
        return host in self.names or host.endswith(self.suffixes)

    def covers(self, address: IPAddress) -> bool:
        """A listed address or network holds this address (``*`` holds nothing)."""
        return any(address in n for n in self.networks if n.version == address.version)


@lru_cache(maxsize=8)
def parse_allow_list(value: str) -> AllowList:
    """``OUTGOING_URL_ALLOW`` as written; an entry that is no name, address or network is an error."""
    names: set[str] = set()
    suffixes: list[str] = []
    networks: list[IPNetwork] = []
    anything = False
    for raw in value.split(","):
        entry = raw.strip().lower().rstrip(".")
        if not entry:
            continue
        if entry == "*":
            anything = True
            continue
        if entry.startswith(("*.", ".")):
            suffixes.append("." + entry.lstrip("*."))
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
            continue
        except ValueError:
            pass
        if not all(part and part.replace("-", "").replace("_", "").isalnum() for part in entry.split(".")):
            raise ValueError(f"OUTGOING_URL_ALLOW: {raw.strip()!r} is no host name, address or network")
        names.add(entry)
    return AllowList(anything, frozenset(names), tuple(suffixes), tuple(networks))


def allow_list() -> AllowList:
    return parse_allow_list(getattr(settings, "OUTGOING_URL_ALLOW", "") or "*")


def range_of(address: IPAddress) -> Range | None:
    """The special range holding ``address`` as written (None: a public address)."""
    return next((r for r in RANGES if r.network.version == address.version and address in r.network), None)


def _v4(bits: int) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(bits & 0xFFFFFFFF)


def _rfc6052(value: int, prefix: int) -> ipaddress.IPv4Address:
    """The IPv4 address at RFC 6052's position for a NAT64 prefix of ``prefix`` bits (bits 64-71 are skipped)."""
    if prefix == 96:
        return _v4(value)
    head = 64 - prefix  # bits of the address before the skipped octet
    first = (value >> 64) & ((1 << head) - 1)
    rest = (value >> (56 - (32 - head))) & ((1 << (32 - head)) - 1)
    return _v4((first << (32 - head)) | rest)


def embedded(address: IPAddress) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address carries, the ones traffic to it may reach (empty: none)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return ()
    value = int(address)
    if address in _V4_MAPPED or address in _V4_TRANSLATED or address in _NAT64:
        return (_v4(value),)
    if address in _V4_COMPATIBLE:
        return () if value <= 1 else (_v4(value),)  # "::" and "::1" are IPv6's own
    if address in _6TO4:
        return (_v4(value >> 80),)
    if address in _TEREDO:
        return (_v4(value >> 64), _v4(~value))  # the server's, and the client's (stored inverted)
    if address in _NAT64_LOCAL:
        # Every position a prefix of /48 to /96 may use; a candidate in 0.0.0.0/8 is the zero padding of the
        # other positions (a translator forwards nothing there), not an address.
        candidates = (_rfc6052(value, prefix) for prefix in (48, 56, 64, 96))
        return tuple(c for c in candidates if c not in _THIS_NETWORK)
    return ()


def judged_by(address: IPAddress) -> tuple[IPAddress, ...]:
    """The addresses ``address`` is judged by: the IPv4 addresses it embeds, else itself. A local-use NAT64
    address is judged as itself (where it embeds depends on a prefix length only its network knows); what
    it may embed is still checked for never-called addresses."""
    inner = embedded(address)
    return inner if inner and address not in _NAT64_LOCAL else (address,)


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to now, as a call resolves it (empty when it does not resolve)."""
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return []
    found: list[IPAddress] = []
    for info in infos:
        try:
            found.append(ipaddress.ip_address(str(info[4][0]).partition("%")[0]))
        except ValueError:
            continue
    return found


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return None


def _subject(address: IPAddress, reached: IPAddress, host: str | None) -> str:
    """How a message names what is reached: "127.0.0.1 is", "x.example resolves to 10.0.0.1,", …"""
    if host is None:
        return f"{address} is" if reached == address else f"{address} embeds {reached},"
    return f"{host} resolves to {address}," + (f" which embeds {reached}," if reached != address else "")


def _check_address(
    address: IPAddress, host: str | None, allowed: AllowList, name_listed: bool, purpose: Purpose
) -> None:
    """Raise unless ``address`` (written in the URL, or what ``host`` resolves to) may be called."""
    for reached in dict.fromkeys((address, *embedded(address))):
        found = range_of(reached)
        if found is not None and found.never:
            rule = f"{found.what}, {NEVER_HINT}"
            raise OutgoingURLRefused(f"{_subject(address, reached, host)} {rule}", rule)
    if name_listed:
        return
    for reached in judged_by(address):
        if allowed.covers(reached):
            continue
        found = range_of(reached)
        if found is None:
            if allowed.anything:
                continue
            rule = f"a public address OUTGOING_URL_ALLOW does not list: {ALLOW_HINT}"
        elif allowed.anything and purpose == NODE and found.node:
            continue
        else:
            rule = f"{found.what}: {ALLOW_HINT}"
        raise OutgoingURLRefused(f"{_subject(address, reached, host)} {rule}", rule)


def check_outgoing_url(url: str, *, purpose: Purpose) -> None:
    """Raise :class:`OutgoingURLRefused` unless the control plane may call ``url`` now, as a node URL
    (``NODE``) or a webhook or Alertmanager channel's (``CHANNEL``)."""
    try:
        parts = httpx.URL(url)  # the host httpx will connect to, whatever urlsplit would make of the URL
    except (httpx.InvalidURL, TypeError, ValueError):
        raise OutgoingURLRefused("not a valid URL") from None
    if parts.scheme not in SCHEMES:
        raise OutgoingURLRefused("only http and https URLs are called")
    raw = parts.raw_host.decode("ascii")
    host = raw.rstrip(".").lower()
    if not host:
        raise OutgoingURLRefused("the URL names no host")
    if host in REFUSED_HOSTS:
        raise OutgoingURLRefused(
            f"{host} is a cloud metadata host, {NEVER_HINT}", f"a cloud metadata host, {NEVER_HINT}"
        )
    allowed = allow_list()
    literal = _literal(host)
    if literal is not None:
        _check_address(literal, None, allowed, name_listed=False, purpose=purpose)
        return
    name_listed = allowed.names_host(host)
    addresses = resolve(raw, parts.port or (443 if parts.scheme == "https" else 80))
    if not addresses and not (name_listed or allowed.anything):
        raise OutgoingURLRefused(
            f"{host} does not resolve, and OUTGOING_URL_ALLOW does not list it",
            "the host does not resolve, and OUTGOING_URL_ALLOW does not list it",
        )
    for address in dict.fromkeys(addresses):
        _check_address(address, host, allowed, name_listed, purpose)
