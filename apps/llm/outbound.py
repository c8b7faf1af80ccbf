"""The outbound-call guard of apps/common/netguard.py for aiohttp: a session whose every connection goes to an
address it has just resolved and checked (netguard's `allowed_only`), that ignores the environment's proxies and
follows no redirect. The rule itself, which addresses are allowed, stays in netguard; this is only its wiring.

Every call to a person's model goes through it, blocking or streamed (apps/llm/transport). aiohttp rather than
httpx (netguard's `guarded_http_client`, which a user's embeddings endpoint still gets): reading a stream token by
token costs it less than half of httpx's CPU (about 45 µs a token against 110, bench/chat.py), and a stream's
tokens are the web workers' main work while replies are written. The check is made twice: a name is refused when
any address it resolves to is (the resolver), and every socket is refused unless the address it connects to is
allowed (the socket factory: it also sees an IP address written in the URL, which aiohttp does not resolve).

A session is made for each call: its connections belong to the event loop that opened them, and a Django async
view run under WSGI gets a new loop for each request (as does a blocking call, apps/llm/client.py). Only the TLS
context (loading the CA certificates, about 25 ms) is made once.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from functools import cache

import aiohttp
import anyio
from aiohttp.abc import AbstractResolver, ResolveResult

from apps.common.netguard import Address, address_of, addresses_of, allowed_only

Resolver = Callable[[str, int], Awaitable[Iterable[Address]]]
READ_BUFFER = 2**20  # the longest line of a stream (one event), and the longest whole answer, read


async def _resolve(host: str, port: int) -> list[Address]:
    return addresses_of(await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM))


class _GuardedResolver(AbstractResolver):
    """Resolve once; refuse the name (netguard's Blocked) unless every address is allowed."""

    def __init__(self, resolve: Resolver) -> None:
        self._resolve = resolve

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        try:
            addresses = list(await self._resolve(host, port))
        except OSError as exc:
            raise OSError(f"cannot resolve {host!r}") from exc
        return [
            ResolveResult(
                hostname=host,
                host=str(address),
                port=port,
                proto=0,
                flags=socket.AI_NUMERICHOST,
                family=socket.AF_INET6 if address.version == 6 else socket.AF_INET,
            )  # fmt: skip
            for address in allowed_only(addresses)
        ]

    async def close(self) -> None:
        pass


def _guarded_socket(addr_info) -> socket.socket:
    """The socket for one address aiohttp is about to connect to, if that address is allowed."""
    family, kind, proto, _, address = addr_info
    allowed_only([address_of(address[0])])
    return socket.socket(family, kind, proto)


@cache
def ssl_context() -> ssl.SSLContext:
    """One per process: building one reads the CA bundle (tens of milliseconds on the event loop), and a context
    serves any number of connections."""
    return ssl.create_default_context()


def guarded_session(*, timeout: float, resolve: Resolver = _resolve) -> aiohttp.ClientSession:
    """A new session for one call to a URL a user chose: address policy at each connection, no proxy from the
    environment, and `timeout` for connecting and for each read. A caller passes `allow_redirects=False` on every
    request (aiohttp has no session-wide switch): a redirect could name any address, and only the first is
    checked before the request is sent."""
    connector = aiohttp.TCPConnector(
        resolver=_GuardedResolver(resolve),
        use_dns_cache=False,
        socket_factory=_guarded_socket,
        ssl=ssl_context(),
        force_close=True,  # one stream, one connection: closed with the stream
        limit=10,
    )
    return aiohttp.ClientSession(
        connector=connector,
        trust_env=False,
        timeout=aiohttp.ClientTimeout(total=None, connect=timeout, sock_read=timeout),
        read_bufsize=READ_BUFFER,
    )
