"""A reply streamed and stored: `generation_events` (async, on the event loop: a slow model holds no thread) streams
the model's reply from the person's connection, delta by delta, and stores it when it ends
(apps/generation/services/store.py). Stopped (the client went away, or a bound: apps/generation/services/bounds.py)
or failed, what arrived is stored, marked as such. While it streams, its lease is renewed with the text so far
(apps/generation/services/lease.py). The generation was prepared by apps/generation/services/generate.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from concurrent import futures
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection as db_connection
from django.utils import timezone

from apps.chats.models import Chat
from apps.chats.services.writes import chat_delta
from apps.common.handler import unless_left
from apps.generation.models import Generation
from apps.generation.services.bounds import Arrived, Bounds, generation_settings
from apps.generation.services.lease import lease_renew, lease_seconds
from apps.generation.services.store import Stored, reply_store
from apps.llm.client import LlmError
from apps.llm.streaming import StreamEnd, stream_chat
from apps.llm.tokens import tokenizer_for

log = logging.getLogger(__name__)
INTERNAL_ERROR = "the server failed while relaying the reply; what had arrived is kept"
UNSENT = "the client left before the reply began; the model was not asked"
# A stream sends at most one event in DELTA_WINDOW seconds: a person reads no faster, and what arrives meanwhile
# waits in the socket and is read at once after, so the web worker wakes once for a window's tokens, not for each.
# An event costs the worker about 0.25 ms of CPU, whatever it holds (bench/chat.py): past BUSY_STREAMS streams open
# in one worker, the window grows with their number (to MAX_WINDOW), so that many streams cost the people waiting on
# the same cores less, and each reply comes in larger pieces.
DELTA_WINDOW = 0.1
BUSY_STREAMS = 25
MAX_WINDOW = 0.4
open_streams: set[int] = set()  # the generations streaming in this process (set.add and discard hold the GIL)


def streams_full() -> bool:
    """Whether this process streams as many replies as it may: the web worker then leaves new connections to the
    others (apps/common/capacity.py, apps/common/worker.py)."""
    return len(open_streams) >= generation_settings()["streams_per_process"]


def delta_window() -> float:
    """The seconds between two events of a stream, now."""
    return min(MAX_WINDOW, DELTA_WINDOW * max(1.0, len(open_streams) / BUSY_STREAMS))


@dataclass
class Event:
    """One Server-Sent Event: `context` (the context is built), `delta` (text), `done`, `error` or `conflict`."""

    name: str
    data: dict[str, Any]


def stored_event(stored: Stored) -> Event:
    """The event that ends a stream: the stored message and the chat's new integrity, or why there is none."""
    generation = stored.generation
    data = {
        "generation": str(generation.uid),
        "state": generation.state,
        "mode": generation.mode,
        "text": generation.text,
        "index": generation.message_index,
        "swipe_id": generation.swipe_id,
        "message": stored.message,
        "integrity": str(stored.chat.integrity),
        "reason": generation.stop_reason,
    }
    if generation.state == Generation.State.CONFLICT:
        return Event(
            "conflict",
            data
            | {"detail": "The chat changed elsewhere while the reply was written: it was not stored, here it is."},
        )
    if generation.state == Generation.State.FAILED:
        return Event("error", data | {"detail": generation.error})
    if generation.error:  # stopped by a bound: what arrived was stored, and why it stopped is said
        data["detail"] = generation.error
    return Event("done", data)


async def last_event(events: AsyncIterator[Event]) -> Event:
    """How a stream of events ended (a JSON answer, not streamed, waits for it)."""
    last = None
    async for event in events:
        last = event
    return last


def reply_whole(generation: Generation, events: AsyncIterator[Event], *, left: asyncio.Event | None) -> Event:
    """How the reply ended, waited for in the caller's thread (a client asking for it whole, not streamed). Its
    client leaving (`left`: apps/common/handler.py's client_left) stops it as a stream's client leaving does, also
    when it left while the reply was prepared: the reply is then ended before the model is asked."""
    try:
        return async_to_sync(unless_left)(last_event(events), left)
    except (asyncio.CancelledError, futures.CancelledError):
        generation_left(generation)  # cancelled before its stream began: ended here (one that began ended itself)
        raise


def replay_event(generation: Generation) -> Event:
    """What a retry of a finished generation answers: how it ended, as the first request was told."""
    message = None
    chat = generation.chat
    if generation.message_index is not None:
        message = chat_delta(chat=chat, from_index=generation.message_index, limit=1).messages[0]
    return stored_event(Stored(generation, Chat.objects.get(pk=chat.pk), message))


def _released(function):
    """An ORM step of a stream, run in the request's thread, after which its database connection is given back: a
    stream waits on the model for seconds and must hold no connection meanwhile (outside a transaction only: a
    test's own is kept)."""

    def run(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        finally:
            if not db_connection.in_atomic_block:
                db_connection.close()

    return sync_to_async(run)


async def generation_events(generation: Generation) -> AsyncIterator[Event]:
    """The reply as it streams, then how it was stored. Stopped by a bound (bounds.py), what arrived is stored as
    stopped with the reason. Cancelled (the client went away: Stop), what arrived is stored as stopped before the
    cancellation goes on."""
    yield Event(
        "context",
        {
            "generation": str(generation.uid),
            "name": generation.character_name,
            "prompt_tokens": generation.prompt_tokens,
            "recall": generation.prompt_info.get("recall"),
            "integrity": str(generation.chat.integrity),
        },
    )
    loop = asyncio.get_running_loop()
    # Also gives back the database connection the preparation used.
    connection, tokenizer = await _released(lambda: (generation.connection, tokenizer_for(generation.connection)))()
    options = generation.request.get("options") or {}
    reply_tokens = options.get("max_tokens") or connection.reply_tokens
    bounds = Bounds.of(generation, reply_tokens)
    arrived = Arrived(bounds, tokenizer)
    end = StreamEnd()
    deadline = loop.time() + bounds.seconds
    sent_at = 0.0
    open_streams.add(generation.pk)
    lease = asyncio.create_task(_keep_lease(generation, arrived))
    try:
        deltas = stream_chat(
            connection, generation.prompt, purpose="chat", user_id=generation.user_id, max_tokens=reply_tokens,
            sampler=options.get("sampler"), end=end,
        )  # fmt: skip
        async with aclosing(deltas):  # stopped early, the model's stream is closed at once, not when collected
            while True:
                delta = await _next_delta(deltas, arrived, deadline=deadline, idle=bounds.idle)
                if delta is None or lease.done():  # ended, a bound, or the lease lost (the sweep ended it)
                    break
                first_at = timezone.now() if not arrived.chars else None
                delta = arrived.add(delta)
                wait = sent_at + delta_window() - loop.time()  # the first goes at once
                if wait > 0:
                    await asyncio.sleep(wait)
                if delta:
                    yield Event("delta", {"text": delta})
                if first_at is not None:  # written once the first words are on their way, not before
                    await _released(_first_token)(generation, first_at)
                sent_at = loop.time()
                if arrived.reason:
                    break
    except LlmError as exc:
        stored = await _released(reply_store)(
            generation=generation, text=arrived.text(), state=Generation.State.FAILED, error=exc.message
        )
        yield stored_event(stored)
        return
    except Exception:  # a fault of ours mid-stream: the reply still ends in a known state, what arrived kept
        log.exception("generation %s failed while streaming", generation.pk)
        stored = await _released(reply_store)(
            generation=generation,
            text=arrived.text(),
            state=Generation.State.FAILED,
            error=INTERNAL_ERROR,
            reason=Generation.Reason.SERVER,
        )
        yield stored_event(stored)
        return
    except (asyncio.CancelledError, GeneratorExit):
        await asyncio.shield(
            _released(reply_store)(generation=generation, text=arrived.text(), state=Generation.State.STOPPED)
        )
        raise
    finally:
        open_streams.discard(generation.pk)
        lease.cancel()
    if not arrived.reason and end.length:  # the model stopped itself at the reply's length: as the bound would
        arrived.reason = Generation.Reason.LENGTH
    if arrived.reason:
        ended = {"state": Generation.State.STOPPED, "error": bounds.says(arrived.reason), "reason": arrived.reason}
    else:
        ended = {"state": Generation.State.DONE}
    stored = await _released(reply_store)(generation=generation, text=arrived.text(), **ended)
    yield stored_event(stored)


def generation_left(generation: Generation) -> None:
    """A reply whose answer was closed without relaying it (its client left while it was prepared, or before its
    stream reached the model): ended stopped, nothing arrived and the model never asked, so that it holds none of
    the person's streams until its lease runs out. One this process relays (`open_streams`) is ended by its
    stream, with what arrived; one that ended already is left as it ended."""
    if generation.pk not in open_streams:
        reply_store(generation=generation, text="", state=Generation.State.STOPPED, error=UNSENT)


async def _next_delta(deltas: AsyncIterator[str], arrived: Arrived, *, deadline: float, idle: float) -> str | None:
    """The model's next delta, or None: it ended, or it went past the total time or (once it has begun) the idle
    time, and then `arrived.reason` says which."""
    left = deadline - asyncio.get_running_loop().time()
    reason = Generation.Reason.TIME
    if arrived.chars and idle < left:
        left, reason = idle, Generation.Reason.IDLE
    try:
        async with asyncio.timeout(max(0.0, left)):
            return await anext(deltas)
    except StopAsyncIteration:
        return None
    except TimeoutError:  # the model's stream was cancelled where it waited, and is closed
        arrived.reason = reason
        return None


async def _keep_lease(generation: Generation, arrived: Arrived) -> None:
    """Renew the generation's lease every third of it, saving the text so far, until it ends; ends itself when
    the generation is no longer streaming (the sweep took it for dead: its stream then stops too)."""
    every = lease_seconds() / 3
    renew = _released(lease_renew)
    while True:
        await asyncio.sleep(every)
        try:
            if not await renew(generation_id=generation.pk, text=arrived.text()):
                return
        except Exception:  # the database away for a moment: the next renewal may reach it, the lease has room
            log.warning("generation %s: its lease could not be renewed", generation.uid, exc_info=True)


def _first_token(generation: Generation, at) -> None:
    Generation.objects.filter(pk=generation.pk, first_token_at__isnull=True).update(first_token_at=at)
