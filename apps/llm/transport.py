"""The wire to a person's model, one for blocking and streaming calls: apps/llm/client.py runs it to the end for a
whole answer, apps/llm/streaming.py yields from it as a reply arrives.

It holds, once for both APIs (OpenAI-compatible server-sent events or JSON, Ollama's NDJSON or JSON):
- the request (`request_for`): the body, and the key only in the Authorization header;
- the error mapping: what a person is told of a refusal, a rate limit, a server error, a time-out, a connection that
  fails or breaks off, an answer that cannot be read (LlmError; its message is what a person is shown);
- the retry rule (`_open`): retries with backoff on 429, 5xx and connection failures while nothing of the answer
  was read (once text was shown, a retry would say it twice), and on a time-out unless a person is watching a
  stream (they have waited the whole time-out already);
- reading the answer into chunks, streamed or sent whole, whichever the server chose (`answer_chunks`);
- the Call record of every request (`call_save`).

Every request goes through the guarded session of apps/llm/outbound.py: the address policy of
apps/common/netguard.py at every connection, no redirect followed, no proxy from the environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from http import HTTPStatus

import aiohttp
from django.conf import settings

from apps.common.netguard import BLOCKED_MESSAGE
from apps.common.secrets import secret_decrypt
from apps.llm.models import Call, Connection
from apps.llm.outbound import READ_BUFFER, Blocked, guarded_session
from apps.llm.profiles import connection_context_size
from apps.llm.thinking import REASONING_FIELDS, split_message
from apps.llm.tokens import tokenizer_for

RECORD_LIMIT = 20000
# The most bytes of a stream read (and parsed) at once: about 300 events of one token, a few milliseconds of the
# event loop. A caller that reads once a window (apps/generation) then takes at most this much a window.
READ_BATCH = 64 * 1024


class LlmError(Exception):
    def __init__(self, message: str, *, call: Call | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.call = call


class Retryable(Exception):
    """A failure another attempt may mend, while nothing of the answer was read."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TimedOut(Retryable):
    """Nothing of the answer within the time-out."""


@dataclass
class Chunk:
    content: str = ""
    reasoning: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    done: bool = False


@dataclass
class Record:
    """What the Call will say. The text is kept in pieces, joined when read: a reply grown by `+=` on an attribute
    is copied whole at each piece (CPython extends a string in place only in a local variable), which made a long
    reply's stream cost the event loop time growing with the square of its length."""

    pieces: list[str] = field(default_factory=list)
    reasoning_pieces: list[str] = field(default_factory=list)
    shown: bool = False  # set by a stream's reader once it has yielded text: no retry after that
    attempts: int = 1
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str = ""

    @property
    def raw(self) -> str:
        return "".join(self.pieces)

    @property
    def reasoning(self) -> str:
        return "".join(self.reasoning_pieces)

    def take(self, chunk: Chunk) -> None:
        if chunk.content:
            self.pieces.append(chunk.content)
        if chunk.reasoning:
            self.reasoning_pieces.append(chunk.reasoning)
        if chunk.prompt_tokens is not None:
            self.prompt_tokens = chunk.prompt_tokens
        if chunk.completion_tokens is not None:
            self.completion_tokens = chunk.completion_tokens

    def answer(self) -> tuple[str, str]:
        """(text, reasoning): think blocks moved from the text to the reasoning."""
        return split_message({"content": self.raw, "reasoning_content": self.reasoning})


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
async def _post(session: aiohttp.ClientSession, connection: Connection, request: Request):
    """The response to a model request that was answered (not refused): connection failures, refusals, rate limits
    and server errors become the errors `_open` retries or gives up on."""
    try:
        async with session.post(
            request.url, json=request.body, headers=request.headers, allow_redirects=False
        ) as response:
            if not 200 <= response.status < 300:
                raise _status_error(response.status, response.headers)
            yield response
    except aiohttp.ClientConnectorError as exc:
        if isinstance(exc.os_error, Blocked):
            raise LlmError(BLOCKED_MESSAGE) from exc
        raise Retryable(f"cannot connect to {connection.base_url}") from exc


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


def _given_up(exc: Retryable, *, request: Request, attempts: int) -> LlmError:
    if request.stream and isinstance(exc, TimedOut):
        return LlmError(f"{exc} before the first token")
    return LlmError(f"{exc} (after {attempts} attempt{'s' if attempts > 1 else ''})")


# ---------------------------------------------------------------------------------------------- reading answers


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _whole(response: aiohttp.ClientResponse, request: Request, streamed_type: str) -> bool:
    """Is the answer one JSON document? A server may ignore `stream` either way: what it sent decides."""
    return response.content_type == "application/json" or (
        not request.stream and response.content_type != streamed_type
    )


async def _body(response: aiohttp.ClientResponse) -> bytes:
    """A body read whole, up to READ_BUFFER bytes."""
    body = await response.content.read(READ_BUFFER + 1)
    if len(body) > READ_BUFFER:
        raise LlmError("unreadable answer: longer than any reply")
    return body


def _message_chunk(message: dict, usage: tuple[int | None, int | None]) -> Chunk:
    """A whole answer's message, of either API."""
    reasoning = [str(message[name]).strip() for name in REASONING_FIELDS if isinstance(message.get(name), str)]
    return Chunk(
        content=message["content"] if isinstance(message.get("content"), str) else "",
        reasoning="\n\n".join(part for part in reasoning if part),
        prompt_tokens=usage[0],
        completion_tokens=usage[1],
        done=True,
    )


def _openai_answer(body: bytes) -> Chunk:
    """A whole chat.completion."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise LlmError("unreadable answer: not an OpenAI-compatible chat completion") from exc
    try:
        message = data["choices"][0]["message"]
        if not isinstance(message, dict):
            raise TypeError
    except (KeyError, IndexError, TypeError) as exc:
        raise LlmError("unreadable answer: no choices in it") from exc
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return _message_chunk(message, (_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))))


def _openai_event(payload: str) -> Chunk:
    """One chat.completion.chunk. Raises ValueError when it is not one, LlmError when it is the server's error."""
    try:
        data = json.loads(payload)
    except RecursionError as exc:  # "[[[[…": nested past what the parser follows
        raise ValueError("nested too deeply") from exc
    if not isinstance(data, dict):
        raise ValueError("not an object")
    if data.get("error"):  # the server's own words could be anything: not shown
        raise LlmError("the model reported an error in the middle of its answer")
    choices = data.get("choices") or [{}]
    delta = choices[0].get("delta") if isinstance(choices, list) and isinstance(choices[0], dict) else None
    usage = data.get("usage")
    if not isinstance(delta or {}, dict) or not isinstance(usage or {}, dict):
        raise ValueError("not a chat completion chunk")
    delta, usage = delta or {}, usage or {}
    return Chunk(
        content=str(delta.get("content") or ""),
        reasoning="".join(str(delta.get(name) or "") for name in REASONING_FIELDS),
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
    )


def _ollama_answer(body: bytes) -> Chunk:
    """A whole Ollama chat response (one JSON object with the message)."""
    try:
        data = json.loads(body)
        message = data["message"]
        if not isinstance(message, dict):
            raise TypeError
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise LlmError("unreadable answer: not an Ollama chat response") from exc
    return _message_chunk(message, (_count(data.get("prompt_eval_count")), _count(data.get("eval_count"))))


def _ollama_line(line: str) -> Chunk:
    try:
        data = json.loads(line)
        if data.get("error"):  # the server's own words could be anything: not shown
            raise LlmError("the model reported an error in the middle of its answer")
        message = data.get("message") or {}
        done = bool(data.get("done"))
        return Chunk(
            content=str(message.get("content") or ""),
            reasoning=str(message.get("thinking") or ""),
            prompt_tokens=_count(data.get("prompt_eval_count")) if done else None,
            completion_tokens=_count(data.get("eval_count")) if done else None,
            done=done,
        )
    except (ValueError, AttributeError, RecursionError) as exc:
        raise LlmError("unreadable answer: not an Ollama chat stream") from exc


async def _lines(response: aiohttp.ClientResponse) -> AsyncIterator[list[str]]:
    """The body's lines, as many at a time as each read brought: a stream read after a pause (the caller's
    coalescing window) comes in one read and costs one wake-up, not one a token. A read brings at most READ_BATCH
    bytes, however much waits: a model that streams faster than the caller reads never makes one read's parsing
    long, and after a full batch (more was waiting, the read did not wait) the loop serves others before the next."""
    partial = b""
    while data := await response.content.read(READ_BATCH):
        if len(data) == READ_BATCH:
            await asyncio.sleep(0)
        if b"\n" not in data:  # the line goes on: kept whole, up to a limit (a server that never ends one)
            partial += data
            if len(partial) > READ_BUFFER:
                raise ValueError("a line longer than any event")
            continue
        *lines, partial = (partial + data).split(b"\n")
        yield [line.rstrip(b"\r").decode() for line in lines]  # UnicodeDecodeError is a ValueError
    if partial:
        yield [partial.rstrip(b"\r").decode()]


async def _openai_chunks(
    session: aiohttp.ClientSession, connection: Connection, request: Request
) -> AsyncIterator[list[Chunk]]:
    """The server-sent events, read here rather than through the openai SDK, whose objects cost the web worker about
    90 µs of CPU a token (bench/chat.py); or the whole answer."""
    async with _post(session, connection, request) as response:
        if _whole(response, request, "text/event-stream"):
            yield [_openai_answer(await _body(response))]
            return
        data: list[str] = []  # the data lines of the event being read
        async for lines in _lines(response):
            chunks = []
            for line in lines:
                if line.startswith("data:"):
                    data.append(line[6:] if line.startswith("data: ") else line[5:])
                elif not line and data:  # a blank line ends an event; comments, `event:` and `id:` are not read
                    payload, data = "\n".join(data), []
                    if payload.strip() == "[DONE]":
                        if chunks:
                            yield chunks
                        return
                    try:
                        chunks.append(_openai_event(payload))
                    except (LlmError, ValueError):
                        if chunks:  # what came before the error is shown first
                            yield chunks
                        raise
            if chunks:
                yield chunks
        if data and "\n".join(data).strip() != "[DONE]":
            yield [_openai_event("\n".join(data))]


async def _ollama_chunks(
    session: aiohttp.ClientSession, connection: Connection, request: Request
) -> AsyncIterator[list[Chunk]]:
    """The NDJSON lines, or the whole answer."""
    async with _post(session, connection, request) as response:
        if _whole(response, request, "application/x-ndjson"):
            yield [_ollama_answer(await _body(response))]
            return
        done = False
        async for lines in _lines(response):
            chunks = []
            for line in filter(str.strip, lines):
                try:
                    chunks.append(_ollama_line(line))
                except LlmError:
                    if chunks:  # what came before the error is shown first
                        yield chunks
                    raise
            done = done or any(chunk.done for chunk in chunks)
            if chunks:
                yield chunks
        if not done:
            raise LlmError("the connection to the model broke off in the middle of its answer")


_SOURCES = {Connection.Api.OPENAI: _openai_chunks, Connection.Api.OLLAMA: _ollama_chunks}


# ---------------------------------------------------------------------------------------------- the retry rule


def _backoff(attempt: int, retry_after: float | None) -> float:
    config = settings.LOREKEEPER_LLM
    if retry_after is not None:
        return min(retry_after, config["retry_after_max"])
    return min(config["backoff"] * (2**attempt), config["backoff_max"]) * random.uniform(0.5, 1.0)


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
    for attempt in range(attempts):
        record.attempts = attempt + 1
        source = _SOURCES[connection.api](session, connection, request)
        try:
            return source, await _next(source, connection=connection, timeout=timeout, shown=False)
        except StopAsyncIteration:
            return source, None
        except Retryable as exc:
            await source.aclose()
            if attempt + 1 == attempts or (request.stream and isinstance(exc, TimedOut)):
                raise _given_up(exc, request=request, attempts=attempt + 1) from exc
            await asyncio.sleep(_backoff(attempt, exc.retry_after))
    raise AssertionError("unreachable")


async def answer_chunks(
    connection: Connection, request: Request, *, timeout: float, retries: int, record: Record
) -> AsyncIterator[list[Chunk]]:
    """The answer's chunks, each read's at once, also taken into `record`. `timeout` bounds connecting and each
    read. Raises LlmError. A consumer that stops early closes the generator (`contextlib.aclosing`), which closes
    the HTTP stream at once, so the model stops generating."""
    async with guarded_session(timeout=timeout) as session:
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


# ---------------------------------------------------------------------------------------------- the Call record


def call_save(
    *,
    connection: Connection,
    user_id: int,
    purpose: str,
    template: str = "",
    messages: list[dict],
    record: Record,
    status: str,
    ms: int,
) -> Call:
    """The Call of one request (its attempts), with the server's token counts, or counted here when it sent none."""
    text, reasoning = record.answer()
    call = Call(
        user_id=user_id,
        connection_id=connection.pk,
        purpose=purpose,
        template=template,
        model=connection.model,
        status=status,
        error=record.error,
        attempts=record.attempts,
        latency_ms=ms,
        response=text[:RECORD_LIMIT],
        reasoning=reasoning[:RECORD_LIMIT],
    )
    call.tokens_estimated = record.prompt_tokens is None or record.completion_tokens is None
    tokenizer = tokenizer_for(connection) if call.tokens_estimated else None
    call.prompt_tokens = (
        record.prompt_tokens if record.prompt_tokens is not None else tokenizer.count_messages(messages)
    )
    call.completion_tokens = (
        record.completion_tokens
        if record.completion_tokens is not None
        else tokenizer.count(record.raw + record.reasoning)
    )
    call.save()
    return call
