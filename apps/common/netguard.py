"""Which addresses the server may call on a user's behalf, and HTTP clients that hold to it.

A user-chosen provider URL is a server-side request forgery risk on a hosted deployment: "http://10.0.0.5:6379"
would have the server talk to its own network, and a cloud's metadata address would hand out its credentials.
LOREKEEPER_PROVIDER_PRIVATE_HOSTS decides: allowed (the default, for a self-hosted install next to its Ollama) or
refused (a public deployment: production sets it off). When refused, a user's URL may reach only addresses that
are globally routable unicast (`address_allowed`), or a network the operator listed in
LOREKEEPER_PROVIDER_ALLOWED_NETWORKS (a shared model box on the private network, say).

The rule holds in three places:
- `provider_url_check` refuses such a URL when it is saved, naming the field (a clear message for the person);
- every connection goes only to an address just resolved and checked (`allowed_only`), so a name that resolves to
  a public address for the check and to a private one a moment later (DNS rebinding) gets nowhere: the address
  checked is the address connected to, while TLS still checks the certificate against the name in the URL. Two
  clients hold to it: `guarded_http_client` (httpx, `_GuardedBackend`: a user's embeddings endpoint) and the aiohttp
  session of apps/llm/outbound.py (every call to a user's model, blocking or streamed);
- no provider client follows a redirect (a public URL answering 307 to a private one).

Operator-configured URLs (LOREKEEPER_EMBEDDINGS_URL) are trusted and use `trusted_http_client`, which only refuses
redirects: the operator chose them, a user cannot change them.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from functools import cache
from urllib.parse import urlsplit

import httpcore
import httpx
from django.conf import settings

from apps.common.exceptions import ApplicationError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
BLOCKED_MESSAGE = "This deployment does not call private or local network addresses."

# The only IPv6 addresses allocated as global unicast (RFC 4291 §2.4).
_GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")

# Blocks of the IANA IPv4 and IPv6 special-purpose address registries that are not globally reachable, or that
# carry another address inside them. Python's `is_global` (3.11) misses some of them; an address in any of these
# is never a provider.
_SPECIAL_PURPOSE = tuple(
    ipaddress.ip_network(block)
    for block in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT (and cloud metadata at 100.100.100.200)
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local (and cloud metadata at 169.254.169.254)
        "172.16.0.0/12",
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation
        "192.88.99.0/24",  # 6to4 relay anycast (deprecated)
        "192.168.0.0/16",
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and the broadcast address
        "64:ff9b::/96",  # NAT64: an IPv4 address inside (RFC 6052)
        "64:ff9b:1::/48",  # local-use NAT64
        "100::/64",  # discard-only
        "2001::/23",  # IETF protocol assignments, Teredo (2001::/32) included
        "2001:db8::/32",  # documentation
        "2002::/16",  # 6to4: an IPv4 address inside, private ones included
        "3fff::/20",  # documentation
        "5f00::/16",  # segment routing
    )
)


def address_allowed(address: Address) -> bool:
    """May a user's URL reach this address? Everything, on a self-hosted install; else a globally routable unicast
    address, or one in a network the operator allowed."""
    if settings.LOREKEEPER_PROVIDER_PRIVATE_HOSTS:
        return True
    if any(address in network for network in _operator_networks()):
        return True
    return globally_routable(address)


def globally_routable(address: Address) -> bool:
    """A unicast address the public internet routes to: global by the registries, in no special-purpose block,
    and for IPv6 inside the global unicast range (an IPv4-mapped address is judged as the IPv4 address it is)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return globally_routable(address.ipv4_mapped)
        if address not in _GLOBAL_UNICAST_V6:
            return False
    if address.is_multicast or not address.is_global:
        return False
    return not any(address in network for network in _SPECIAL_PURPOSE if network.version == address.version)


def _operator_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(block, strict=False) for block in settings.LOREKEEPER_PROVIDER_ALLOWED_NETWORKS]


class Blocked(OSError):
    """An address refused by the policy (aiohttp reports it as a ClientConnectorError around this)."""


def address_of(host: str) -> Address:
    """The address a getaddrinfo answer or a socket address holds (an IPv6 zone, "%eth0", dropped)."""
    return ipaddress.ip_address(str(host).split("%", 1)[0])


def addresses_of(infos: Iterable[tuple]) -> list[Address]:
    """The distinct addresses of a getaddrinfo answer, in its order."""
    return list(dict.fromkeys(address_of(info[4][0]) for info in infos))


def allowed_only(addresses: Iterable[Address]) -> list[Address]:
    """`addresses`, when every one of them is allowed; Blocked otherwise. A name with one refused address gets
    nowhere: the one connected to could be that one."""
    addresses = list(addresses)
    if not addresses or not all(address_allowed(address) for address in addresses):
        raise Blocked(BLOCKED_MESSAGE)
    return addresses


def _resolve(host: str, port: int) -> list[Address]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    return addresses_of(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))


def provider_url_check(url: str, *, field: str = "base_url") -> None:
    """Raise ApplicationError naming `field` when `url` may not be called (its scheme, its port, or an address its
    host resolves to). The guarded client checks again at every connection: this check is for the message."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ApplicationError("The URL must start with http:// or https:// and name a host.", {"field": field})
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise ApplicationError("The URL's port is not a valid port.", {"field": field}) from exc
    if settings.LOREKEEPER_PROVIDER_PRIVATE_HOSTS:
        return
    try:
        addresses = _resolve(parts.hostname, port)
    except OSError as exc:
        raise ApplicationError(f"Cannot resolve {parts.hostname!r}.", {"field": field}) from exc
    try:
        allowed_only(addresses)
    except Blocked as exc:
        raise ApplicationError(BLOCKED_MESSAGE, {"field": field}) from exc


class BlockedAddress(httpcore.ConnectError):
    """A connection refused by the address policy (httpx reports it as a ConnectError with this message)."""


class _GuardedBackend(httpcore.NetworkBackend):
    """Resolves the host once, refuses the connection unless every address it resolves to is allowed, and connects
    to one of those very addresses. httpcore starts TLS on the stream with the URL's host name, so certificates are
    still checked against the name."""

    def __init__(self, resolve: Callable[[str, int], Iterable[Address]] = _resolve) -> None:
        self._resolve = resolve
        self._plain = httpcore.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        try:
            addresses = list(self._resolve(host, port))
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host!r}") from exc
        try:
            allowed_only(addresses)
        except Blocked as exc:
            raise BlockedAddress(BLOCKED_MESSAGE) from exc
        error: Exception | None = None
        for address in addresses:
            try:
                return self._plain.connect_tcp(str(address), port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        raise error  # type: ignore[misc]  # at least one address was tried

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise BlockedAddress("Unix sockets are never a provider.")

    def sleep(self, seconds: float) -> None:
        self._plain.sleep(seconds)


class GuardedTransport(httpx.HTTPTransport):
    """httpx's transport over a connection pool whose every connection goes through `_GuardedBackend`. The proxy
    variables of the environment are ignored: a proxy would make the connection the check never saw.

    httpx takes no network backend, so the pool it built is replaced by one that has ours (`_pool` is what its
    handle_request uses, in httpx 0.28; tests/security/test_outbound_calls.py fails if that changes)."""

    def __init__(self, resolve: Callable[[str, int], Iterable[Address]] = _resolve) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
            network_backend=_GuardedBackend(resolve),
        )


@cache
def guarded_http_client() -> httpx.Client:
    """The pooled client for every call to a URL a user chose: address policy at each connection, no redirects.
    Building a client loads the CA certificates (about 25 ms), so there is one per process."""
    return httpx.Client(transport=GuardedTransport(), follow_redirects=False, trust_env=False)


@cache
def trusted_http_client() -> httpx.Client:
    """The client for URLs the operator configured: any address, still no redirects."""
    return httpx.Client(follow_redirects=False)
