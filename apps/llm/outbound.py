"""The outbound-call guard of apps/common/netguard.py for aiohttp: a session whose every connection goes to an
address it has just resolved and checked (netguard's `allowed_only`), that ignores the environment's proxies and
follows no redirect. The rule itself, which addresses are allowed, stays in netguard; this is only its wiring.

Every call to a person's model goes through it, blocking or streamed (apps/llm/transport). aiohttp rather than
httpx (netguard's `guarded_http_client`, which a user's embeddings endpoint still gets): reading a stream token by
token costs it less than half of httpx's CPU (about 45 µs a token against 110, bench/chat.py), and a stream's
tokens are the web workers' main work while replies are written. The check is made twice: a name is refused when
any address it resolves to is (the resolver), and every socket is refused unless the address it connects to is
allowed (the socket factory: it also sees an IP address written in the URL, which aiohttp does not resolve).

Connections belong to the event loop that opened them. A blocking call (apps/llm/client.py, a Celery task) runs on
a loop of its own each time, so it gets a session of its own, closed with the call. The loop a web process serves
on lives as long as the process: marked by `connections_kept` (config/asgi.py), it keeps a session for each model
connection in use (a person's, by its id and URL: never shared with another person's calls), whose connections
stay open between calls (`LOREKEEPER_LLM["keepalive"]` seconds idle), so a reply to a model reached over TLS does
not wait for a new TCP and TLS handshake, one or two round trips, each time. At most KEPT_SESSIONS are kept; the
least recently used idle one is closed past it. A connection is only kept once its answer was read to its end: a
stream stopped early closes its connection, so that the model stops. No cookie is kept, and a connection goes only
where the guard let it go when it was opened. Only the TLS context (loading the CA certificates, about 25 ms) is
made once for every session.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass, field
from functools import cache

import aiohttp
import anyio
from aiohttp.abc import AbstractResolver, ResolveResult
from django.conf import settings

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


def guarded_session(
    *, timeout: float | None = None, resolve: Resolver = _resolve, keepalive: float = 0.0
) -> aiohttp.ClientSession:
    """A session for calls to URLs a user chose: address policy at each connection, no proxy from the environment,
    no cookie kept, and `timeout` for connecting and for each read (or given with each request). A caller passes
    `allow_redirects=False` on every request (aiohttp has no session-wide switch): a redirect could name any
    address, and only the first is checked before the request is sent. `keepalive`: seconds a connection whose
    answer was read to its end stays open for the next call; 0 closes each with its call."""
    connector = aiohttp.TCPConnector(
        resolver=_GuardedResolver(resolve),
        use_dns_cache=False,
        socket_factory=_guarded_socket,
        ssl=ssl_context(),
        force_close=keepalive <= 0,
        keepalive_timeout=keepalive if keepalive > 0 else None,
        limit=0 if keepalive > 0 else 10,  # a kept session's calls at once: its person's, capped (generation)
    )
    return aiohttp.ClientSession(
        connector=connector,
        trust_env=False,
        cookie_jar=aiohttp.DummyCookieJar(),
        timeout=aiohttp.ClientTimeout(total=None, connect=timeout, sock_read=timeout),  # never aiohttp's 5 minutes
        read_bufsize=READ_BUFFER,
        trace_configs=[_reuse_traced()] if keepalive > 0 else None,
    )


# At most this many kept sessions a serving loop (one per model connection in use); the least recently used idle
# one is closed past it, so that a person cycling through model servers does not leave a socket open to each.
KEPT_SESSIONS = 64


@dataclass
class _Held:
    session: aiohttp.ClientSession
    users: int = 0  # calls using it now: it is not closed under them


@dataclass
class _Kept:
    """One serving loop's kept sessions, by the model connection each serves, least recently used first."""

    sessions: OrderedDict[Hashable, _Held] = field(default_factory=OrderedDict)
    ended: bool = False  # the server shut down: nothing more is kept


# The loops that serve web requests (marked by `connections_kept`).
_kept: dict[asyncio.AbstractEventLoop, _Kept] = {}


def _reuse_traced() -> aiohttp.TraceConfig:
    """Marks a request's `trace_request_ctx` (any object with a `reused` attribute) when it goes over a kept
    connection: a kept connection closing under a request was most likely closed by its server as idle, one just
    opened was not."""
    trace = aiohttp.TraceConfig()

    async def reused(session, context, params) -> None:
        if context.trace_request_ctx is not None:
            context.trace_request_ctx.reused = True

    trace.on_connection_reuseconn.append(reused)
    return trace


@contextlib.asynccontextmanager
async def model_session(key: Hashable | None = None) -> AsyncIterator[aiohttp.ClientSession]:
    """The session for one call to a person's model: on a serving loop, the one kept for `key` (the model
    connection the call is for: its id and URL), left open; else (or with no key) one of its own, closed with the
    call. A kept session serves one model connection of one person only: a connection is never passed from one
    person's calls to another's, whatever a server sends on it. Each request gives its own time-outs."""
    loop = asyncio.get_running_loop()
    kept = _kept.get(loop)
    keepalive = float(settings.LOREKEEPER_LLM["keepalive"])
    if kept is None or kept.ended or key is None or keepalive <= 0:
        async with guarded_session() as session:
            yield session
        return
    held = kept.sessions.get(key)
    if held is None or held.session.closed:
        held = kept.sessions[key] = _Held(guarded_session(keepalive=keepalive))
    kept.sessions.move_to_end(key)
    held.users += 1
    try:
        await _evict(kept)
        yield held.session
    finally:
        held.users -= 1


async def _evict(kept: _Kept) -> None:
    """Close the least recently used idle sessions past KEPT_SESSIONS (taken out first: no call picks one up while
    it closes)."""
    excess = len(kept.sessions) - KEPT_SESSIONS
    if excess <= 0:
        return
    idle = [key for key, held in kept.sessions.items() if held.users == 0][:excess]
    for session in [kept.sessions.pop(key).session for key in idle]:
        await session.close()


async def _close_kept(loop: asyncio.AbstractEventLoop) -> None:
    kept = _kept.setdefault(loop, _Kept())
    kept.ended = True
    sessions = [held.session for held in kept.sessions.values()]
    kept.sessions.clear()
    for session in sessions:
        await session.close()


def connections_kept(app):
    """ASGI middleware: the loop serving `app` keeps its connections to models open between calls
    (`model_session`), and closes them when the server shuts down (the lifespan protocol, answered here: the
    application below has no use for it)."""

    async def application(scope, receive, send):
        loop = asyncio.get_running_loop()
        if scope["type"] != "lifespan":
            if loop not in _kept:
                _kept[loop] = _Kept()
            return await app(scope, receive, send)
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                _kept.setdefault(loop, _Kept())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await _close_kept(loop)
                await send({"type": "lifespan.shutdown.complete"})
                return

    return application
