"""Which URLs the control plane may call: storage nodes and webhook channels.

``OUTGOING_URL_ALLOW`` is a comma-separated list of host names (``hooks.example.com``), name suffixes
(``*.corp.example``), addresses and networks (``10.0.0.0/8``, ``fd00::/8``), or ``*`` (anything not refused
below). Unset, it is ``*``: loopback, private and public addresses are allowed. A host name that is not
listed is allowed when every address it resolves to is.

Always refused, whatever the list says: link-local addresses (169.254.0.0/16, fe80::/10, where clouds put
their metadata service), other cloud metadata addresses (``fd00:ec2::254``, ``100.100.100.200``), the
metadata host names (``metadata.google.internal``, …) and the unspecified addresses. Host names are resolved
when a URL is checked (on save and again before every call), and one refused address refuses the URL, so a
name cannot point somewhere refused.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

REFUSED_NETWORKS: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "169.254.0.0/16",  # IPv4 link-local: 169.254.169.254 (AWS, GCP, Azure, OpenStack), 169.254.170.2 (ECS)
        "fe80::/10",  # IPv6 link-local
        "fd00:ec2::254/128",  # AWS metadata over IPv6
        "100.100.100.200/32",  # Alibaba Cloud metadata
        "0.0.0.0/32",
        "::/128",
    )
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
SCHEMES = ("http", "https")


class OutgoingURLRefused(ValueError):
    """The URL may not be called; the message says why without repeating the URL."""


@dataclass(frozen=True)
class AllowList:
    anything: bool
    names: frozenset[str]
    suffixes: tuple[str, ...]
    networks: tuple[IPNetwork, ...]

    def allows_name(self, host: str) -> bool:
        return self.anything or host in self.names or host.endswith(self.suffixes)

    def allows_address(self, address: IPAddress) -> bool:
        return self.anything or any(address in n for n in self.networks if n.version == address.version)


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


def _plain(address: IPAddress) -> IPAddress:
    """An IPv4 address written as IPv6 (``::ffff:169.254.169.254``) is checked as the IPv4 address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def refused_address(address: IPAddress) -> bool:
    address = _plain(address)
    return any(address in n for n in REFUSED_NETWORKS if n.version == address.version)


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to now (empty when it does not resolve)."""
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


def _check_addresses(addresses: Iterable[IPAddress], allowed: AllowList, name_allowed: bool) -> None:
    for address in addresses:
        if refused_address(address):
            raise OutgoingURLRefused(
                "the host is (or resolves to) a link-local or cloud metadata address, which is never called"
            )
        if not name_allowed and not allowed.allows_address(_plain(address)):
            raise OutgoingURLRefused("the host is (or resolves to) an address OUTGOING_URL_ALLOW does not list")


def check_outgoing_url(url: str) -> None:
    """Raise :class:`OutgoingURLRefused` unless the control plane may call ``url`` now."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise OutgoingURLRefused("not a valid URL") from None
    if parts.scheme.lower() not in SCHEMES:
        raise OutgoingURLRefused("only http and https URLs are called")
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise OutgoingURLRefused("the URL names no host")
    if host in REFUSED_HOSTS:
        raise OutgoingURLRefused("cloud metadata hosts are never called")
    allowed = allow_list()
    literal = _literal(host)
    if literal is not None:
        _check_addresses([literal], allowed, name_allowed=False)
        return
    name_allowed = allowed.allows_name(host)
    addresses = resolve(host, port or (443 if parts.scheme.lower() == "https" else 80))
    if not addresses and not name_allowed:
        raise OutgoingURLRefused("the host does not resolve, and OUTGOING_URL_ALLOW does not list its name")
    _check_addresses(addresses, allowed, name_allowed)
