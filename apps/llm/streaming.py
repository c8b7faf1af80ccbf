"""Streaming a chat reply from the person's own model, for async code: `stream_chat` yields the reply's text as it
arrives, through both APIs (OpenAI-compatible server-sent events, Ollama's NDJSON).

What it shares with the blocking client (apps/llm/client.py): the outbound-call guard (`provider_url_check`, then a
client that checks every connection's address, apps/llm/outbound.py), the key decrypted only into the request, the
retries with backoff on 429 and 5xx (only while the stream has not opened: once text was shown, a retry would say
it twice), messages fit to show a person (LlmError), and a Call record of every stream, a stopped one as `stopped`.

A consumer that stops early closes the generator: `async with contextlib.aclosing(stream_chat(...)) as deltas:`, or
cancels the task that iterates it. Either closes the HTTP stream at once, so the model stops generating.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
from asgiref.sync import sync_to_async
from django.conf import settings

from apps.common.exceptions import ApplicationError
from apps.common.netguard import BLOCKED_MESSAGE, provider_url_check
from apps.common.secrets import secret_decrypt
from apps.llm.client import RECORD_LIMIT, LlmError, _backoff, _refused, _retry_after, _Retryable
from apps.llm.models import Call, Connection
from apps.llm.outbound import READ_BUFFER, Blocked, guarded_session
from apps.llm.profiles import connection_context_size
from apps.llm.sampler import sampler_request
from apps.llm.thinking import REASONING_FIELDS, ThinkFilter, split_message
from apps.llm.tokens import tokenizer_for

log = logging.getLogger(__name__)
# The most bytes of a stream read (and parsed) at once: about 300 events of one token, a few milliseconds of the
# event loop. A caller that reads once a window (apps/generation) then takes at most this much a window.
READ_BATCH = 64 * 1024


@dataclass
class _Chunk:
    content: str = ""
    reasoning: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    done: bool = False


@dataclass
class _Record:
    """What the Call of a stream will say. The text is kept in pieces, joined when read: a reply grown by `+=` on an
    attribute is copied whole at each piece (CPython extends a string in place only in a local variable), which
    made a long reply's stream cost the event loop time growing with the square of its length."""

    pieces: list[str] = field(default_factory=list)
    reasoning_pieces: list[str] = field(default_factory=list)
    shown: bool = False
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

    def take(self, chunk: _Chunk) -> None:
        if chunk.content:
            self.pieces.append(chunk.content)
        if chunk.reasoning:
            self.reasoning_pieces.append(chunk.reasoning)
        if chunk.prompt_tokens is not None:
            self.prompt_tokens = chunk.prompt_tokens
        if chunk.completion_tokens is not None:
            self.completion_tokens = chunk.completion_tokens


def _status_error(status: int, headers) -> Exception:
    if status == 429:
        return _Retryable("rate limited (429)", _retry_after(headers))
    if status >= 500:
        return _Retryable(f"server error {status}", _retry_after(headers))
    return _refused(status)


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _openai_chunk(payload: str, *, field: str = "delta") -> _Chunk:
    """One chat.completion.chunk (or, `field` "message", a whole chat.completion). Raises ValueError when it is not
    one, LlmError when it is the server's error."""
    try:
        data = json.loads(payload)
    except RecursionError as exc:  # "[[[[…": nested past what the parser follows
        raise ValueError("nested too deeply") from exc
    if not isinstance(data, dict):
        raise ValueError("not an object")
    if data.get("error"):  # the server's own words could be anything: not shown
        raise LlmError("the model reported an error in the middle of its answer")
    choices = data.get("choices") or [{}]
    delta = choices[0].get(field) if isinstance(choices, list) and isinstance(choices[0], dict) else None
    usage = data.get("usage")
    if not isinstance(delta or {}, dict) or not isinstance(usage or {}, dict):
        raise ValueError("not a chat completion chunk")
    delta, usage = delta or {}, usage or {}
    return _Chunk(
        content=str(delta.get("content") or ""),
        reasoning="".join(str(delta.get(name) or "") for name in REASONING_FIELDS),
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
    )


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


async def _whole(response: aiohttp.ClientResponse) -> str:
    """A body read whole (a server that ignored `stream`), up to READ_BUFFER bytes."""
    body = await response.content.read(READ_BUFFER + 1)
    if len(body) > READ_BUFFER:
        raise ValueError("an answer longer than any reply")
    return body.decode()


async def _openai_chunks(
    session: aiohttp.ClientSession, connection: Connection, messages: list[dict], options: dict
) -> AsyncIterator[list[_Chunk]]:
    """The server-sent events, read here rather than through the openai SDK, whose objects cost the web worker about
    90 µs of CPU a token (bench/chat.py). A server that ignores `stream` and answers JSON is read whole."""
    extra = options.get("extra_body") or {}  # what the SDK would have merged into the body
    body = {"model": connection.model, "messages": messages, "stream": True, **options, **extra}
    body.pop("extra_body", None)
    headers = {"Authorization": f"Bearer {secret_decrypt(connection.api_key_encrypted) or 'unused'}"}
    url = connection.base_url.rstrip("/") + "/chat/completions"
    async with _post(session, connection, url, body, headers) as response:
        if response.content_type == "application/json":
            yield [_openai_chunk(await _whole(response), field="message")]
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
                        chunks.append(_openai_chunk(payload))
                    except (LlmError, ValueError):
                        if chunks:  # what came before the error is shown first
                            yield chunks
                        raise
            if chunks:
                yield chunks
        if data and "\n".join(data).strip() != "[DONE]":
            yield [_openai_chunk("\n".join(data))]


def _ollama_chunk(line: str) -> _Chunk:
    try:
        data = json.loads(line)
        if data.get("error"):  # the server's own words could be anything: not shown
            raise LlmError("the model reported an error in the middle of its answer")
        message = data.get("message") or {}
        done = bool(data.get("done"))
        return _Chunk(
            content=str(message.get("content") or ""),
            reasoning=str(message.get("thinking") or ""),
            prompt_tokens=_count(data.get("prompt_eval_count")) if done else None,
            completion_tokens=_count(data.get("eval_count")) if done else None,
            done=done,
        )
    except (ValueError, AttributeError, RecursionError) as exc:
        raise LlmError("unreadable answer: not an Ollama chat stream") from exc


async def _ollama_chunks(
    session: aiohttp.ClientSession, connection: Connection, messages: list[dict], options: dict
) -> AsyncIterator[list[_Chunk]]:
    body = {"model": connection.model, "messages": messages, "stream": True, **options}
    # Always the context size the prompt was built for: Ollama's own default is small, and it would silently cut
    # the start of a prompt that is longer.
    body["options"] = {**body.get("options", {}), "num_ctx": connection_context_size(connection)}
    key = secret_decrypt(connection.api_key_encrypted)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = connection.base_url.rstrip("/") + "/api/chat"
    async with _post(session, connection, url, body, headers) as response:
        done = False
        async for lines in _lines(response):
            chunks = []
            for line in filter(str.strip, lines):
                try:
                    chunks.append(_ollama_chunk(line))
                except LlmError:
                    if chunks:  # what came before the error is shown first
                        yield chunks
                    raise
            done = done or any(chunk.done for chunk in chunks)
            if chunks:
                yield chunks
        if not done:
            raise LlmError("the connection to the model broke off in the middle of its answer")


@contextlib.asynccontextmanager
async def _post(session: aiohttp.ClientSession, connection: Connection, url: str, body: dict, headers: dict):
    """The response to a model request that was answered (not refused): connection failures, refusals, rate limits
    and server errors become the errors `_open` retries or gives up on."""
    try:
        async with session.post(url, json=body, headers=headers, allow_redirects=False) as response:
            if response.status >= 400:
                raise _status_error(response.status, response.headers)
            yield response
    except aiohttp.ClientConnectorError as exc:
        if isinstance(exc.os_error, Blocked):
            raise LlmError(BLOCKED_MESSAGE) from exc
        raise _Retryable(f"cannot connect to {connection.base_url}") from exc


_SOURCES = {Connection.Api.OPENAI: _openai_chunks, Connection.Api.OLLAMA: _ollama_chunks}


async def _next(source: AsyncIterator[list[_Chunk]], *, connection: Connection, timeout: float, shown: bool):
    """The chunks of the next read, or an LlmError a person can read when none come within `timeout`."""
    try:
        async with asyncio.timeout(timeout):
            return await anext(source)
    except TimeoutError as exc:  # aiohttp's own time-outs are TimeoutErrors too
        if shown:
            raise LlmError(f"the model sent nothing for {timeout:g} s in the middle of its answer") from exc
        raise LlmError(f"timed out after {timeout:g} s before the first token") from exc
    except aiohttp.ClientError as exc:
        if shown:
            raise LlmError("the connection to the model broke off in the middle of its answer") from exc
        raise LlmError(f"the connection to {connection.base_url} broke off before the answer began") from exc
    except ValueError as exc:  # an event that is not JSON, or not a chunk
        raise LlmError("unreadable answer: not a chat completion stream") from exc


async def _open(
    session: aiohttp.ClientSession,
    connection: Connection,
    messages: list[dict],
    options: dict,
    *,
    timeout: float,
    record: _Record,
) -> tuple[AsyncIterator[list[_Chunk]], list[_Chunk] | None]:
    """The stream and its first read's chunks (None: it ended at once), after retries while it would not open."""
    attempts = 1 + max(0, int(settings.LOREKEEPER_LLM["retries"]))
    for attempt in range(attempts):
        record.attempts = attempt + 1
        source = _SOURCES[connection.api](session, connection, messages, options)
        try:
            return source, await _next(source, connection=connection, timeout=timeout, shown=False)
        except StopAsyncIteration:
            return source, None
        except _Retryable as exc:
            await source.aclose()
            message = f"{exc} (after {attempt + 1} attempt{'s' if attempt else ''})"
            if attempt + 1 == attempts:
                raise LlmError(message) from exc
            await asyncio.sleep(_backoff(attempt, exc.retry_after))
    raise AssertionError("unreachable")


def _save_call(
    *, connection: Connection, user_id: int, purpose: str, messages: list[dict], record: _Record, status: str, ms: int
) -> Call:
    text, reasoning = split_message({"content": record.raw, "reasoning_content": record.reasoning})
    call = Call(
        user_id=user_id,
        connection_id=connection.pk,
        purpose=purpose,
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


async def stream_chat(
    connection: Connection,
    messages: list[dict],
    *,
    purpose: str,
    user_id: int,
    max_tokens: int | None = None,
    sampler: dict | None = None,
) -> AsyncIterator[str]:
    """The model's reply to `messages`, as text deltas while they arrive (each what one read from the network
    brought): a think block at its start and the reasoning fields are never yielded. `max_tokens` and `sampler`
    default to the connection's own (`reply_tokens`, `sampler`). Raises LlmError (its `call` is the record) when
    the model cannot be reached, refuses, is silent for the connection's timeout, or breaks off; text already
    yielded stays yielded."""
    started = time.monotonic()
    record = _Record()
    status = Call.Status.ERROR
    failure: LlmError | None = None
    timeout = connection.timeout or settings.LOREKEEPER_LLM["timeout"]
    try:
        options = sampler_request(
            connection.api,
            max_tokens=connection.reply_tokens if max_tokens is None else max_tokens,
            sampler=connection.sampler if sampler is None else sampler,
        )
        await sync_to_async(provider_url_check, thread_sensitive=False)(connection.base_url)
        async with guarded_session(timeout=timeout) as session:
            source, chunks = await _open(session, connection, messages, options, timeout=timeout, record=record)
            async with contextlib.aclosing(source):
                filter_ = ThinkFilter()
                while chunks is not None:
                    for chunk in chunks:
                        record.take(chunk)
                    shown = filter_.feed("".join(chunk.content for chunk in chunks))
                    if shown:
                        record.shown = True
                        yield shown
                    try:
                        chunks = await _next(source, connection=connection, timeout=timeout, shown=record.shown)
                    except StopAsyncIteration:
                        chunks = None
                tail = filter_.finish()
                if tail:
                    yield tail
        status = Call.Status.OK
    except (GeneratorExit, asyncio.CancelledError):
        status = Call.Status.STOPPED
        raise
    except ApplicationError as exc:  # the URL or the samplers, refused by the rules
        failure = LlmError(exc.message)
        raise failure from exc
    except LlmError as exc:
        failure = exc
        raise
    except Exception as exc:
        record.error = f"unexpected {type(exc).__name__}"
        raise
    finally:
        record.error = failure.message if failure else record.error
        save = sync_to_async(_save_call)(
            connection=connection,
            user_id=user_id,
            purpose=purpose,
            messages=messages,
            record=record,
            status=status,
            ms=int((time.monotonic() - started) * 1000),
        )
        call = await asyncio.shield(save)  # recorded even when the task is cancelled again meanwhile
        if failure is not None:
            failure.call = call
            log.warning("llm stream %s (%s) failed: %s", call.pk, purpose, failure.message)
