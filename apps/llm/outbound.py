"""The outbound-call guard of apps/common/netguard.py for async code: an httpx AsyncClient that connects only to an
address it has just resolved and checked (`address_allowed`), ignores the environment's proxies and follows no
redirect. It mirrors netguard's `GuardedTransport` (the sync client's) for the streaming client; the rule itself,
which addresses are allowed, stays in netguard.

A client is made for each stream: an async client's connections belong to the event loop that opened them, and a
Django async view run under WSGI gets a new loop for each request. Only the TLS context (loading the CA
certificates, about 25 ms) is made once.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from functools import cache

import anyio
import httpcore
import httpx

from apps.common.netguard import BLOCKED_MESSAGE, Address, BlockedAddress, address_allowed

Resolver = Callable[[str, int], Awaitable[Iterable[Address]]]


async def _resolve(host: str, port: int) -> list[Address]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos))


class _AsyncGuardedBackend(httpcore.AsyncNetworkBackend):
    """netguard's `_GuardedBackend`, async: resolve once, refuse unless every address is allowed, connect to one of
    those addresses (TLS is still started with the URL's host name)."""

    def __init__(self, resolve: Resolver = _resolve) -> None:
        self._resolve = resolve
        self._plain = httpcore.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        try:
            addresses = list(await self._resolve(host, port))
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host!r}") from exc
        if not addresses or not all(address_allowed(address) for address in addresses):
            raise BlockedAddress(BLOCKED_MESSAGE)
        error: Exception | None = None
        for address in addresses:
            try:
                return await self._plain.connect_tcp(str(address), port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        raise error  # type: ignore[misc]  # at least one address was tried

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise BlockedAddress("Unix sockets are never a provider.")

    async def sleep(self, seconds: float) -> None:
        await self._plain.sleep(seconds)


@cache
def _ssl_context():
    """One per process: building one reads the CA bundle (tens of milliseconds on the event loop), and a context
    serves any number of connections."""
    return httpx.create_ssl_context(trust_env=False)


class AsyncGuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's async transport over a pool whose every connection goes through `_AsyncGuardedBackend` (the pool is
    replaced as netguard's `GuardedTransport` does it; tests/llm/test_outbound.py fails if httpx changes that)."""

    def __init__(self, resolve: Resolver = _resolve) -> None:
        super().__init__(verify=_ssl_context(), trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=_ssl_context(),
            max_connections=10,
            max_keepalive_connections=0,  # one stream, one connection: closed with the stream
            network_backend=_AsyncGuardedBackend(resolve),
        )


def guarded_async_client(*, timeout: float, resolve: Resolver = _resolve) -> httpx.AsyncClient:
    """A new AsyncClient for one call to a URL a user chose: address policy at each connection, no redirects."""
    return httpx.AsyncClient(
        transport=AsyncGuardedTransport(resolve), follow_redirects=False, trust_env=False, timeout=timeout
    )
