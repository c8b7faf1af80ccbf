"""The request to a model and what becomes of it: the body for each API, one error mapping, one retry rule, over
the guarded session of apps/llm/outbound.py (the address policy of apps/common/netguard.py at every connection, no
redirect followed, no proxy from the environment)."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from http import HTTPStatus
from types import SimpleNamespace

import aiohttp
from django.conf import settings

from apps.common.jsonsafe import json_bytes
from apps.common.netguard import BLOCKED_MESSAGE, Blocked
from apps.common.secrets import secret_decrypt
from apps.llm.models import Connection
from apps.llm.outbound import model_session
from apps.llm.profiles import connection_context_size
from apps.llm.transport.answers import READERS
from apps.llm.transport.records import Chunk, LlmError, Record


class Retryable(Exception):
    """A failure another attempt may mend, while nothing of the answer was read."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TimedOut(Retryable):
    """Nothing of the answer within the time-out."""


class Unreachable(Retryable):
    """Nothing answered at the connection's address (refused, no route, a name that does not resolve): most often
    a wrong port or a server not started, which waiting seldom mends."""


class Dropped(Retryable):
    """A kept connection closed before the answer began: its server had most likely just closed it as idle (the
    first retry goes at once, on a new connection)."""


# ------------------------------------------------------------------------------------------------ the request


@dataclass(frozen=True)
class Request:
    url: str
    body: dict
    headers: dict = field(repr=False)  # the key: never in a message, a record or a log line
    stream: bool


def request_for(connection: Connection, messages: list[dict], options: dict, *, stream: bool) -> Request:
    """The request for the connection's API. `options` are `apps.llm.sampler.sampler_request`'s for that API."""
    key = secret_decrypt(connection.api_key_encrypted)
    base = connection.base_url.rstrip("/")
    body = {"model": connection.model, "messages": messages, "stream": stream, **options}
    if connection.api == Connection.Api.OLLAMA:
        # Always the context size the prompt was built for: Ollama's own default is small, and it would silently cut
        # the start of a prompt that is longer.
        body["options"] = {**body.get("options", {}), "num_ctx": connection_context_size(connection)}
        return Request(base + "/api/chat", body, {"Authorization": f"Bearer {key}"} if key else {}, stream)
    body |= body.pop("extra_body", None) or {}  # what the openai SDK would have merged into the body
    return Request(base + "/chat/completions", body, {"Authorization": f"Bearer {key or 'unused'}"}, stream)


# ------------------------------------------------------------------------------------------- the error mapping


def _retry_after(headers) -> float | None:
    for key, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(key)
        if value:
            try:
                return float(value) * scale
            except ValueError:
                return None
    return None


def _refused(status: int) -> LlmError:
    """What a person is told of a refusal: the status and its standard reason, never the body. The body could be
    any service's page, and echoing it would make the connection test a probe (nor is it logged: providers echo
    parts of the key in it)."""
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "an unknown status"
    return LlmError(f"the server refused the request ({status}): {reason}")


def _status_error(status: int, headers) -> Exception:
    if status == 429:
        return Retryable("rate limited (429)", _retry_after(headers))
    if status >= 500:
        return Retryable(f"server error {status}", _retry_after(headers))
    return _refused(status)  # a redirect too: it could name any address, and is never followed


@contextlib.asynccontextmanager
async def _post(session: aiohttp.ClientSession, connection: Connection, request: Request, timeout: float):
    """The response to a model request that was answered (not refused): connection failures, refusals, rate limits
    and server errors become the errors `_open` retries or gives up on. `timeout` bounds connecting and each read."""
    # Encoded here, not by aiohttp (the standard library's json): a long history costs the loop 0.3 ms, not 10.
    headers = {**request.headers, "Content-Type": "application/json"}
    attempt = SimpleNamespace(reused=False)  # set when the request goes over a kept connection (outbound.py)
    try:
        response = await session.post(
            request.url, data=json_bytes(request.body), headers=headers, allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=None, connect=timeout, sock_read=timeout), trace_request_ctx=attempt,
        )  # fmt: skip
    except aiohttp.ClientConnectorError as exc:
        if isinstance(exc.os_error, Blocked):
            raise LlmError(BLOCKED_MESSAGE) from exc
        raise Unreachable(f"cannot connect to {connection.base_url}") from exc
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientConnectionResetError, aiohttp.ClientOSError) as exc:
        if not attempt.reused:  # a new connection: the server failed with the request (not sent again)
            raise
        raise Dropped(f"the connection to {connection.base_url} closed before the answer began") from exc
    async with response:  # released at the end: kept for the next call if read to its end, else closed
        if not 200 <= response.status < 300:
            raise _status_error(response.status, response.headers)
        yield response


async def _next(source: AsyncIterator[list[Chunk]], *, connection: Connection, timeout: float, shown: bool):
    """The chunks of the next read, or the error a person can read when none come within `timeout`."""
    try:
        async with asyncio.timeout(timeout):
            return await anext(source)
    except TimeoutError as exc:  # aiohttp's own time-outs are TimeoutErrors too
        if shown:
            raise LlmError(f"the model sent nothing for {timeout:g} s in the middle of its answer") from exc
        raise TimedOut(f"timed out after {timeout:g} s") from exc
    except aiohttp.ClientError as exc:
        if shown:
            raise LlmError("the connection to the model broke off in the middle of its answer") from exc
        raise LlmError(f"the connection to {connection.base_url} broke off before the answer began") from exc
    except ValueError as exc:  # an event that is not JSON, or not a chunk
        raise LlmError("unreadable answer: not a chat completion stream") from exc


async def _source(
    session: aiohttp.ClientSession, connection: Connection, request: Request, timeout: float
) -> AsyncIterator[list[Chunk]]:
    """The chunks of one attempt's answer."""
    async with _post(session, connection, request, timeout) as response:
        async with contextlib.aclosing(READERS[connection.api](response, asked_stream=request.stream)) as reads:
            async for chunks in reads:
                yield chunks


def _given_up(exc: Retryable, *, request: Request, attempts: int) -> LlmError:
    if request.stream and isinstance(exc, TimedOut):
        return LlmError(f"{exc} before the first token")
    return LlmError(f"{exc} (after {attempts} attempt{'s' if attempts > 1 else ''})")


# ---------------------------------------------------------------------------------------------- the retry rule


def _backoff(attempt: int, retry_after: float | None) -> float:
    config = settings.LOREKEEPER_LLM
    if retry_after is not None:
        return min(retry_after, config["retry_after_max"])
    return min(config["backoff"] * (2**attempt), config["backoff_max"]) * random.uniform(0.5, 1.0)


UNREACHABLE_WAIT = 1.0  # seconds before a streamed reply tries an address that did not answer once more


def _waited_for(exc: Retryable, attempt: int) -> bool:
    """Whether a streamed reply, which a person watches, stops trying: a time-out already took the connection's
    time-out, and an address that did not answer is tried once more, a second later (a server restarting), not
    three times over 14 s (a wrong port): the person is told at once, and can mend the address."""
    return isinstance(exc, TimedOut) or (isinstance(exc, Unreachable) and attempt >= 1)


async def _open(
    session: aiohttp.ClientSession,
    connection: Connection,
    request: Request,
    *,
    timeout: float,
    retries: int,
    record: Record,
) -> tuple[AsyncIterator[list[Chunk]], list[Chunk] | None]:
    """The answer and its first read's chunks (None: it ended at once), after retries while it would not open."""
    attempts = 1 + max(0, retries)
    unanswered = True  # every attempt so far found nothing answering at the address
    for attempt in range(attempts):
        record.attempts = attempt + 1
        source = _source(session, connection, request, timeout)
        try:
            return source, await _next(source, connection=connection, timeout=timeout, shown=False)
        except StopAsyncIteration:
            return source, None
        except Retryable as exc:
            await source.aclose()
            unanswered = unanswered and isinstance(exc, Unreachable)
            if attempt + 1 == attempts or (request.stream and _waited_for(exc, attempt)):
                record.reached = not unanswered
                raise _given_up(exc, request=request, attempts=attempt + 1) from exc
            wait = _backoff(attempt, exc.retry_after)
            if isinstance(exc, Dropped) and attempt == 0:
                wait = 0  # a kept connection closed as idle just as it was taken: the next, on a new one, at once
            elif request.stream and isinstance(exc, Unreachable):
                wait = min(wait, UNREACHABLE_WAIT)
            await asyncio.sleep(wait)
    raise AssertionError("unreachable")


async def answer_chunks(
    connection: Connection, request: Request, *, timeout: float, retries: int, record: Record
) -> AsyncIterator[list[Chunk]]:
    """The answer's chunks, each read's at once, also taken into `record`. `timeout` bounds connecting and each
    read. Raises LlmError. A consumer that stops early closes the generator (`contextlib.aclosing`), which closes
    the HTTP stream at once, so the model stops generating."""
    kept = (connection.pk, connection.base_url) if connection.pk else None  # an unsaved connection keeps nothing
    async with model_session(kept) as session:
        source, chunks = await _open(session, connection, request, timeout=timeout, retries=retries, record=record)
        async with contextlib.aclosing(source):
            while chunks is not None:
                for chunk in chunks:
                    record.take(chunk)
                yield chunks
                try:
                    chunks = await _next(source, connection=connection, timeout=timeout, shown=record.shown)
                except StopAsyncIteration:
                    chunks = None
                except Retryable as exc:  # silent after chunks that showed nothing (a think block)
                    raise _given_up(exc, request=request, attempts=record.attempts) from exc


async def answer_whole(connection: Connection, request: Request, *, timeout: float, retries: int, record: Record):
    """Read the whole answer into `record`."""
    async with contextlib.aclosing(
        answer_chunks(connection, request, timeout=timeout, retries=retries, record=record)
    ) as reads:
        async for _ in reads:
            pass
