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
from dataclasses import dataclass

import httpx
import openai
from asgiref.sync import sync_to_async
from django.conf import settings

from apps.common.exceptions import ApplicationError
from apps.common.netguard import provider_url_check
from apps.common.secrets import secret_decrypt
from apps.llm.client import RECORD_LIMIT, LlmError, _backoff, _refused, _retry_after, _Retryable
from apps.llm.models import Call, Connection
from apps.llm.outbound import guarded_async_client
from apps.llm.profiles import connection_context_size
from apps.llm.sampler import sampler_request
from apps.llm.thinking import REASONING_FIELDS, ThinkFilter, split_message
from apps.llm.tokens import tokenizer_for

log = logging.getLogger(__name__)


class _BrokenOff(Exception):
    """The connection failed after the stream had opened."""


@dataclass
class _Chunk:
    content: str = ""
    reasoning: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    done: bool = False


@dataclass
class _Record:
    """What the Call of a stream will say."""

    raw: str = ""
    reasoning: str = ""
    shown: bool = False
    attempts: int = 1
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str = ""

    def take(self, chunk: _Chunk) -> None:
        self.raw += chunk.content
        self.reasoning += chunk.reasoning
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


async def _openai_chunks(
    http: httpx.AsyncClient, connection: Connection, messages: list[dict], options: dict
) -> AsyncIterator[_Chunk]:
    client = openai.AsyncOpenAI(
        base_url=connection.base_url,
        api_key=secret_decrypt(connection.api_key_encrypted) or "unused",
        timeout=http.timeout,
        max_retries=0,  # ours, and only while the stream would not open
        http_client=http,
    )
    try:
        stream = await client.chat.completions.create(
            model=connection.model, messages=messages, stream=True, **options
        )
    except openai.APIStatusError as exc:
        raise _status_error(exc.status_code, exc.response.headers) from exc
    except openai.APITimeoutError as exc:
        raise TimeoutError from exc
    except openai.APIConnectionError as exc:
        raise _Retryable(f"cannot connect to {connection.base_url}") from exc
    try:
        async for chunk in stream:
            delta = chunk.choices[0].delta.model_dump() if chunk.choices else {}
            usage = chunk.usage
            yield _Chunk(
                content=delta.get("content") or "",
                reasoning="".join(str(delta.get(name) or "") for name in REASONING_FIELDS),
                prompt_tokens=usage.prompt_tokens if usage else None,
                completion_tokens=usage.completion_tokens if usage else None,
            )
    except openai.APITimeoutError as exc:  # recent versions of the SDK wrap httpx's errors mid-stream too
        raise TimeoutError from exc
    except openai.APIConnectionError as exc:
        raise _BrokenOff from exc
    except openai.APIError as exc:  # an error event in the stream
        raise LlmError("the model reported an error in the middle of its answer") from exc
    finally:
        await stream.close()


async def _ollama_chunks(
    http: httpx.AsyncClient, connection: Connection, messages: list[dict], options: dict
) -> AsyncIterator[_Chunk]:
    body = {"model": connection.model, "messages": messages, "stream": True, **options}
    # Always the context size the prompt was built for: Ollama's own default is small, and it would silently cut
    # the start of a prompt that is longer.
    body["options"] = {**body.get("options", {}), "num_ctx": connection_context_size(connection)}
    key = secret_decrypt(connection.api_key_encrypted)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = connection.base_url.rstrip("/") + "/api/chat"
    try:
        async with http.stream("POST", url, json=body, headers=headers) as response:
            if response.status_code >= 400:
                raise _status_error(response.status_code, response.headers)
            done = False
            async for line in response.aiter_lines():
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                    message = data.get("message") or {}
                except (ValueError, AttributeError) as exc:
                    raise LlmError("unreadable answer: not an Ollama chat stream") from exc
                if data.get("error"):  # the server's own words could be anything: not shown
                    raise LlmError("the model reported an error in the middle of its answer")
                done = bool(data.get("done"))
                yield _Chunk(
                    content=str(message.get("content") or ""),
                    reasoning=str(message.get("thinking") or ""),
                    prompt_tokens=data.get("prompt_eval_count") if done else None,
                    completion_tokens=data.get("eval_count") if done else None,
                    done=done,
                )
            if not done:
                raise LlmError("the connection to the model broke off in the middle of its answer")
    except httpx.ConnectError as exc:
        raise _Retryable(f"cannot connect to {connection.base_url}") from exc


_SOURCES = {Connection.Api.OPENAI: _openai_chunks, Connection.Api.OLLAMA: _ollama_chunks}


async def _next(source: AsyncIterator[_Chunk], *, connection: Connection, timeout: float, shown: bool) -> _Chunk:
    """The next chunk, or an LlmError a person can read when it does not come within `timeout`."""
    try:
        async with asyncio.timeout(timeout):
            return await anext(source)
    except (TimeoutError, httpx.TimeoutException) as exc:
        if shown:
            raise LlmError(f"the model sent nothing for {timeout:g} s in the middle of its answer") from exc
        raise LlmError(f"timed out after {timeout:g} s before the first token") from exc
    except (httpx.HTTPError, _BrokenOff) as exc:
        if shown:
            raise LlmError("the connection to the model broke off in the middle of its answer") from exc
        raise LlmError(f"the connection to {connection.base_url} broke off before the answer began") from exc
    except (openai.OpenAIError, ValueError) as exc:  # ValueError: an event that is not JSON
        raise LlmError("unreadable answer: not a chat completion stream") from exc


async def _open(
    http: httpx.AsyncClient,
    connection: Connection,
    messages: list[dict],
    options: dict,
    *,
    timeout: float,
    record: _Record,
) -> tuple[AsyncIterator[_Chunk], _Chunk | None]:
    """The stream and its first chunk (None: it ended at once), after retries while it would not open."""
    attempts = 1 + max(0, int(settings.LOREKEEPER_LLM["retries"]))
    for attempt in range(attempts):
        record.attempts = attempt + 1
        source = _SOURCES[connection.api](http, connection, messages, options)
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
    """The model's reply to `messages`, as text deltas while they arrive: a think block at its start and the
    reasoning fields are never yielded. `max_tokens` and `sampler` default to the connection's own
    (`reply_tokens`, `sampler`). Raises LlmError (its `call` is the record) when the model cannot be reached,
    refuses, is silent for the connection's timeout, or breaks off; text already yielded stays yielded."""
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
        async with guarded_async_client(timeout=timeout) as http:
            source, chunk = await _open(http, connection, messages, options, timeout=timeout, record=record)
            async with contextlib.aclosing(source):
                filter_ = ThinkFilter()
                while chunk is not None:
                    record.take(chunk)
                    shown = filter_.feed(chunk.content)
                    if shown:
                        record.shown = True
                        yield shown
                    try:
                        chunk = await _next(source, connection=connection, timeout=timeout, shown=record.shown)
                    except StopAsyncIteration:
                        chunk = None
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
