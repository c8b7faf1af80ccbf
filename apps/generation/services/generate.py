"""A reply, from the person's message to the stored answer:

1. `generation_prepare` (in a request's thread, one transaction): the person's message goes in through the chat
   write path; the context is built (memory in its slots, the turn's recall kept on that message); the prompt is
   assembled; a `Generation` records it. A retry with the same Idempotency-Key finds that record instead.
2. `generation_events` (async, on the event loop: a slow model holds no thread): the model's reply streams from the
   person's connection, delta by delta, and is stored when it ends (apps/generation/services/store.py). Stopped
   (the client went away, or a bound: apps/generation/services/bounds.py) or failed, what arrived is stored, marked
   as such. While it streams, its lease is renewed with the text so far (apps/generation/services/lease.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.models import AbstractUser
from django.db import IntegrityError, transaction
from django.db import connection as db_connection
from django.utils import timezone

from apps.chats.models import Character, Chat, Message
from apps.chats.selectors import chat_characters_in_order
from apps.chats.services.chats import chat_lock
from apps.chats.services.start import next_speaker, send_date
from apps.chats.services.writes import chat_append, chat_delta
from apps.common.exceptions import ApplicationError
from apps.generation.models import Generation
from apps.generation.services.bounds import MAX_MESSAGE, Arrived, Bounds
from apps.generation.services.lease import (
    generation_lapse,
    lease_end,
    lease_renew,
    lease_seconds,
    streams_check,
)
from apps.generation.services.prompt import Composing, Prompt, Speakers, card_prompt
from apps.generation.services.store import Stored, extends_of, reply_store
from apps.injection.services.context import context_build
from apps.llm.client import LlmError
from apps.llm.models import Connection
from apps.llm.selectors import connection_for_replies, connection_get
from apps.llm.streaming import stream_chat
from apps.llm.tokens import tokenizer_for

log = logging.getLogger(__name__)
MODES = tuple(Generation.Mode.values)
# A stream sends at most one event in DELTA_WINDOW seconds: a person reads no faster, and what arrives meanwhile
# waits in the socket and is read at once after, so the web worker wakes once for a window's tokens, not for each.
# An event costs the worker about 0.25 ms of CPU, whatever it holds (bench/chat.py): past BUSY_STREAMS streams open
# in one worker, the window grows with their number (to MAX_WINDOW), so that many streams cost the people waiting on
# the same cores less, and each reply comes in larger pieces.
DELTA_WINDOW = 0.1
BUSY_STREAMS = 25
MAX_WINDOW = 0.4
open_streams: set[int] = set()  # the generations streaming in this process (set.add and discard hold the GIL)


def delta_window() -> float:
    """The seconds between two events of a stream, now."""
    return min(MAX_WINDOW, DELTA_WINDOW * max(1.0, len(open_streams) / BUSY_STREAMS))


@dataclass
class Prepared:
    generation: Generation
    fresh: bool  # False: a retry found the generation its first request made


@dataclass
class Event:
    """One Server-Sent Event: `context` (the context is built), `delta` (text), `done`, `error` or `conflict`."""

    name: str
    data: dict[str, Any]


def _check(chat: Chat, mode: str, message: str | None) -> None:
    if mode not in MODES:
        raise ApplicationError(f"`mode` is one of {', '.join(MODES)}.", {"field": "mode"})
    if message is not None and len(message) > MAX_MESSAGE:
        raise ApplicationError(f"A message holds at most {MAX_MESSAGE} characters.", {"field": "message"})
    if mode in (Generation.Mode.SWIPE, Generation.Mode.CONTINUE):
        if message:
            raise ApplicationError("A swipe or a continuation takes no message.", {"field": "message"})
        last = Message.objects.filter(chat=chat).order_by("-index").first()
        if last is None or last.is_user or last.is_system:
            what = "swipe" if mode == Generation.Mode.SWIPE else "continue"
            raise ApplicationError(
                f"There is no reply to {what}: the last message is not a character's.", {"field": "mode"}
            )


def _responder(chat: Chat, characters: list[Character], character: str | int | None, message: str):
    if character in (None, ""):
        chosen = next_speaker(chat=chat, text=message)
        if chosen is None and len(characters) > 1:
            raise ApplicationError("Choose who replies: in this group a person picks.", {"field": "character"})
        return chosen
    for candidate in characters:
        if str(candidate.pk) == str(character) or candidate.name.lower() == str(character).strip().lower():
            return candidate
    raise ApplicationError("That character does not take part in this chat.", {"field": "character"})


def _connection(user: AbstractUser, connection_id: int | None) -> Connection:
    """The connection asked for (another user's is a 404), else the person's default one, else their first."""
    if connection_id:
        return connection_get(user=user, connection_id=connection_id)
    found = connection_for_replies(user_id=user.pk)
    if found is None:
        raise ApplicationError(
            "Add a model connection first (Models) to generate replies.",
            {"field": "connection"},
            status=409,
            code="no_model",
        )
    return found


@transaction.atomic
def generation_prepare(
    *,
    user: AbstractUser,
    chat: Chat,
    mode: str = Generation.Mode.NEW,
    message: str | None = None,
    character: str | int | None = None,
    connection_id: int | None = None,
    integrity: uuid.UUID | None = None,
    idempotency_key: str = "",
    compose: Callable[[Composing], Prompt] = card_prompt,
    options: dict[str, Any] | None = None,
    body_digest: str = "",
) -> Prepared:
    """Everything before the model is asked: the generation to stream, or for a retry the one the first request
    made (its state says whether it is still streaming or already stored). `compose` makes the prompt once the
    context is built (the web chat's: `card_prompt`); `options` (`max_tokens`, `sampler`) are asked of the model
    over the connection's own reply length and samplers, and kept with the request, as is `body_digest` (another
    client's whole request, which its retries are compared by)."""
    if chat.user_id != user.pk:
        raise ApplicationError("Unknown chat.", {"field": "chat"}, status=404)  # selectors scope chats: a bug
    message = (message or "").replace("\x00", "").strip() or None
    asked = {"mode": mode, "message": message, "character": character, "chat": chat.pk}
    if options:
        asked["options"] = options
    if body_digest:  # another client's request, by the digest of its body (the gateway's retries compare it)
        asked["body"] = body_digest
    if idempotency_key:
        earlier = (
            Generation.objects.select_related("chat", "connection")
            .filter(user=user, idempotency_key=idempotency_key)
            .first()
        )
        if earlier is not None:
            if earlier.request != asked:
                raise ApplicationError(
                    "This Idempotency-Key was used for another request.", status=422, code="idempotency_key_reused"
                )
            if earlier.state == Generation.State.STREAMING:
                generation_lapse(generation_id=earlier.pk)  # its process died: the retry answers how it ended
                earlier.refresh_from_db()
            return Prepared(earlier, fresh=False)
    started = time.perf_counter()
    _check(chat, mode, message)
    streams_check(user=user, open_in_process=len(open_streams))  # before the work: a refusal costs nothing
    connection = _connection(user, connection_id)
    chat = chat_lock(chat=chat, integrity=integrity)
    characters = chat_characters_in_order(chat=chat)
    responder = _responder(chat, characters, character, message or "")
    speakers = _speakers(chat, responder, group=len(characters) > 1)
    if mode == Generation.Mode.NEW and message:
        line = _user_line(speakers.user, message)
        chat = chat_append(chat=chat, messages=[line], integrity=chat.integrity).chat
    timings = {"append": _ms(started)}  # where the time before the first token goes (bench/chat.py reads them)
    context = context_build(
        user=user, chat=chat, message=message if mode == Generation.Mode.NEW else None, character=responder
    )
    chat = context.chat
    timings["context"] = context.timings_ms.get("total", 0.0)
    timings |= {f"context_{step}": ms for step, ms in context.timings_ms.items() if step != "total"}
    mark = time.perf_counter()
    prompt = compose(Composing(chat, context, responder, speakers, connection, mode))
    timings["prompt"] = _ms(mark)
    prompt.info["timings_ms"] = timings | {"total": _ms(started)}
    streams_check(user=user, open_in_process=len(open_streams), locked=True)
    try:
        with transaction.atomic():
            generation = _record(user, chat, connection, mode, speakers, idempotency_key, asked, prompt, context)
    except IntegrityError as exc:  # the same key, sent again while the first request was still preparing
        raise ApplicationError(
            "This request is still generating; ask again when it has ended.", status=409, code="generation_in_progress"
        ) from exc
    return Prepared(generation, fresh=True)


def _record(user, chat, connection, mode, speakers, idempotency_key, asked, prompt, context) -> Generation:
    extends = {}
    if mode in (Generation.Mode.SWIPE, Generation.Mode.CONTINUE):
        extends = extends_of(Message.objects.get(chat=chat, index=chat.message_count - 1))
    generation = Generation.objects.create(
        user=user, chat=chat, connection=connection, mode=mode, character_name=speakers.char,
        idempotency_key=idempotency_key, request=asked, expected_count=chat.message_count, extends=extends,
        lease_until=lease_end(),
        prompt=prompt.messages if prompt.kept is None else prompt.kept, prompt_tokens=prompt.tokens,
        tokenizer=prompt.tokenizer,
        prompt_info=prompt.info | {"exact": prompt.exact, "recall": _recall_summary(context.recall)},
        api=connection.api, model=connection.model,
    )  # fmt: skip
    generation.prompt = prompt.messages  # what the model is sent, whatever form is kept
    return generation


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 2)


def _user_line(name: str, message: str) -> dict[str, Any]:
    """The person's message as SillyTavern writes one."""
    return {"name": name, "is_user": True, "is_system": False, "send_date": send_date(), "mes": message, "extra": {}}


def _speakers(chat: Chat, responder: Character | None, *, group: bool) -> Speakers:
    persona = chat.persona
    user = (persona.name if persona else "") or chat.user_name or "You"
    return Speakers(
        char=responder.name if responder else (chat.character_name or "Assistant"),
        user=user,
        persona=persona.description if persona else "",
        group=group,
    )


def _recall_summary(recall: dict[str, Any]) -> dict[str, Any]:
    return {key: recall.get(key) for key in ("source", "message_index", "stored")}


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
    deadline = loop.time() + bounds.seconds
    sent_at = 0.0
    open_streams.add(generation.pk)
    lease = asyncio.create_task(_keep_lease(generation, arrived))
    try:
        deltas = stream_chat(
            connection, generation.prompt, purpose="chat", user_id=generation.user_id, max_tokens=reply_tokens,
            sampler=options.get("sampler"),
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
    except (asyncio.CancelledError, GeneratorExit):
        await asyncio.shield(
            _released(reply_store)(generation=generation, text=arrived.text(), state=Generation.State.STOPPED)
        )
        raise
    finally:
        open_streams.discard(generation.pk)
        lease.cancel()
    if arrived.reason:
        ended = {"state": Generation.State.STOPPED, "error": bounds.says(arrived.reason), "reason": arrived.reason}
    else:
        ended = {"state": Generation.State.DONE}
    stored = await _released(reply_store)(generation=generation, text=arrived.text(), **ended)
    yield stored_event(stored)


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
