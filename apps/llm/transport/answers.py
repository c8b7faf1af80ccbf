"""Reading a model's answer into chunks, whichever form the server chose: OpenAI-compatible server-sent events or
one chat.completion, Ollama's NDJSON lines or one chat response. A server may ignore `stream` either way; what it
sent decides how it is read. A read that brings nothing usable raises LlmError (its words are what a person reads)
or ValueError (an event that is not one: the caller's "unreadable answer").

Events are parsed here rather than through the openai SDK, whose objects cost the web worker about 90 µs of CPU a
token (bench/chat.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp

from apps.llm.outbound import READ_BUFFER
from apps.llm.thinking import REASONING_FIELDS
from apps.llm.transport.records import Chunk, LlmError

# The most bytes of a stream read (and parsed) at once: about 300 events of one token, a few milliseconds of the
# event loop. A caller that reads once a window (apps/generation) then takes at most this much a window.
READ_BATCH = 64 * 1024
# After `[DONE]`, how long the end of the body is waited for (its last chunk often comes in a write of its own), and
# how much of it is read: a body read to its end leaves its connection open for the next call
# (apps/llm/outbound.py); one that goes on past these is closed with the call, as before.
REST_SECONDS = 0.1
REST_BYTES = 64 * 1024
LENGTH = "length"  # the finish_reason (Ollama: done_reason) of a reply the model stopped at its max_tokens


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _whole(response: aiohttp.ClientResponse, *, asked_stream: bool, streamed_type: str) -> bool:
    """Is the answer one JSON document?"""
    return response.content_type == "application/json" or (not asked_stream and response.content_type != streamed_type)


async def _body(response: aiohttp.ClientResponse) -> bytes:
    """A body read whole, up to READ_BUFFER bytes."""
    body = await response.content.read(READ_BUFFER + 1)
    if len(body) > READ_BUFFER:
        raise LlmError("unreadable answer: longer than any reply")
    return body


def _message_chunk(message: dict, usage: tuple[int | None, int | None], ended: object = None) -> Chunk:
    """A whole answer's message, of either API; `ended`: its finish_reason (done_reason)."""
    reasoning = [str(message[name]).strip() for name in REASONING_FIELDS if isinstance(message.get(name), str)]
    return Chunk(
        content=message["content"] if isinstance(message.get("content"), str) else "",
        reasoning="\n\n".join(part for part in reasoning if part),
        prompt_tokens=usage[0],
        completion_tokens=usage[1],
        done=True,
        length=ended == LENGTH,
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
    counts = (_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")))
    return _message_chunk(message, counts, data["choices"][0].get("finish_reason"))


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
        length=isinstance(choices[0], dict) and choices[0].get("finish_reason") == LENGTH,
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
    counts = (_count(data.get("prompt_eval_count")), _count(data.get("eval_count")))
    return _message_chunk(message, counts, data.get("done_reason"))


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
            length=done and data.get("done_reason") == LENGTH,
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


async def _rest_read(response: aiohttp.ClientResponse) -> None:
    """What follows the last event, read (a little, briefly) so that the body ends and its connection can be kept."""
    read = 0
    try:
        async with asyncio.timeout(REST_SECONDS):
            while read <= REST_BYTES and (data := await response.content.read(READ_BATCH)):
                read += len(data)
    except (TimeoutError, aiohttp.ClientError):
        pass  # the connection closes when the response is released


async def _openai_chunks(response: aiohttp.ClientResponse, *, asked_stream: bool) -> AsyncIterator[list[Chunk]]:
    """The server-sent events, each read's at once, or the whole answer."""
    if _whole(response, asked_stream=asked_stream, streamed_type="text/event-stream"):
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
                    await _rest_read(response)
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


async def _ollama_chunks(response: aiohttp.ClientResponse, *, asked_stream: bool) -> AsyncIterator[list[Chunk]]:
    """The NDJSON lines, each read's at once, or the whole answer."""
    if _whole(response, asked_stream=asked_stream, streamed_type="application/x-ndjson"):
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


# By the connection's API (`Connection.Api`): the chunks of an answered request's response.
READERS = {"openai": _openai_chunks, "ollama": _ollama_chunks}
