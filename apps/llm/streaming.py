"""Streaming a chat reply from the person's own model, for async code: `stream_chat` yields the reply's text as it
arrives, through both APIs (OpenAI-compatible server-sent events, Ollama's NDJSON).

It reads through the transport of the blocking client (apps/llm/transport/): the same requests, the outbound-call
guard at every connection, the key decrypted only into the request, the retries with backoff on 429 and 5xx (only
while the stream has not opened: once text was shown, a retry would say it twice), the same messages for the same
failures (LlmError), and a Call record of every stream, a stopped one as `stopped`. Its own part is the think filter:
a think block at the start of the reply is held back as it arrives.

A consumer that stops early closes the generator: `async with contextlib.aclosing(stream_chat(...)) as deltas:`, or
cancels the task that iterates it. Either closes the HTTP stream at once, so the model stops generating.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.conf import settings

from apps.common.exceptions import ApplicationError
from apps.common.netguard import provider_url_check
from apps.llm.models import Call, Connection
from apps.llm.sampler import sampler_request
from apps.llm.thinking import ThinkFilter
from apps.llm.transport import LlmError, Record, answer_chunks, call_save, request_for

log = logging.getLogger(__name__)


@dataclass
class StreamEnd:
    """How the model ended a streamed reply: `length` when it said it stopped at its reply length (max_tokens)."""

    length: bool = False


async def stream_chat(
    connection: Connection,
    messages: list[dict],
    *,
    purpose: str,
    user_id: int,
    max_tokens: int | None = None,
    sampler: dict | None = None,
    end: StreamEnd | None = None,
) -> AsyncIterator[str]:
    """The model's reply to `messages`, as text deltas while they arrive (each what one read from the network
    brought): a think block at its start and the reasoning fields are never yielded. `max_tokens` and `sampler`
    default to the connection's own (`reply_tokens`, `sampler`). Raises LlmError (its `call` is the record) when
    the model cannot be reached, refuses, is silent for the connection's timeout, or breaks off; text already
    yielded stays yielded. `end`, when given, says how the model ended its reply, once it has."""
    started = time.monotonic()
    record = Record()
    status = Call.Status.ERROR
    failure: LlmError | None = None
    config = settings.LOREKEEPER_LLM
    timeout = connection.timeout or config["timeout"]
    try:
        options = sampler_request(
            connection.api,
            max_tokens=connection.reply_tokens if max_tokens is None else max_tokens,
            sampler=connection.sampler if sampler is None else sampler,
        )
        await sync_to_async(provider_url_check, thread_sensitive=False)(connection.base_url)
        request = request_for(connection, messages, options, stream=True)
        reads = answer_chunks(connection, request, timeout=timeout, retries=int(config["retries"]), record=record)
        async with contextlib.aclosing(reads):
            filter_ = ThinkFilter()
            async for chunks in reads:
                if end is not None and any(chunk.length for chunk in chunks):
                    end.length = True
                shown = filter_.feed("".join(chunk.content for chunk in chunks))
                if shown:
                    record.shown = True
                    yield shown
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
        save = sync_to_async(call_save)(
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
