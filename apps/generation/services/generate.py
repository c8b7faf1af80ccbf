"""A reply, from the person's message to the stored answer:

1. `generation_prepare` (here; in a request's thread, one transaction): the person's message goes in through the
   chat write path; the context is built (memory in its slots, the turn's recall kept on that message); the prompt
   is assembled; a `Generation` records it. A retry with the same Idempotency-Key finds that record instead.
2. `generation_events` (apps/generation/services/stream.py): the reply streamed and stored.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import IntegrityError, transaction
from django.db.models.fields.json import KT

from apps.chats.models import Character, Chat, Message
from apps.chats.selectors import chat_characters_in_order, chat_person_name
from apps.chats.services.chats import chat_lock
from apps.chats.services.start import next_speaker, send_date
from apps.chats.services.writes import chat_append, chat_metadata_patch
from apps.common.exceptions import ApplicationError
from apps.generation.models import Generation
from apps.generation.services.bounds import MAX_MESSAGE
from apps.generation.services.lease import (
    generation_lapse,
    lease_end,
    streams_check,
)
from apps.generation.services.prompt import Composing, Prompt, Speakers, card_prompt
from apps.generation.services.store import extends_of
from apps.generation.services.stream import open_streams
from apps.injection.services.context import context_build
from apps.llm.models import Connection
from apps.llm.selectors import connection_for_replies, connection_get

MODES = tuple(Generation.Mode.values)


@dataclass
class Prepared:
    generation: Generation
    fresh: bool  # False: a retry found the generation its first request made


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


def _responder(
    chat: Chat, characters: list[Character], character: str | int | None, message: str, person_picks: bool = True
):
    if character in (None, ""):
        chosen = next_speaker(chat=chat, text=message, characters=characters, person_picks=person_picks)
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
    connection: Connection | None = None,
    integrity: uuid.UUID | None = None,
    idempotency_key: str = "",
    compose: Callable[[Composing], Prompt] = card_prompt,
    options: dict[str, Any] | None = None,
    body_digest: str = "",
    timings: dict[str, float] | None = None,
    streams_checked: bool = False,
    recall_from: int | None = None,
    person_picks: bool = True,
) -> Prepared:
    """Everything before the model is asked: the generation to stream, or for a retry the one the first request
    made (its state says whether it is still streaming or already stored). `compose` makes the prompt once the
    context is built (the web chat's: `card_prompt`); `options` (`max_tokens`, `sampler`) are asked of the model
    over the connection's own reply length and samplers, and kept with the request, as is `body_digest` (another
    client's whole request, which its retries are compared by). `timings`: the caller's own steps before this one,
    in ms, kept with the generation's (`prompt_info.timings_ms`). `connection`: the one a caller has already
    chosen among the person's (the gateway, by the request's model), not read again. `streams_checked`: the caller
    has made the first check of the caps on streams (before its own work), not made again. `recall_from`: the first
    of the chat's turns the prompt holds, when the caller knows (another client's request sent them): the recall
    leaves them out (context_build). `person_picks` False: in a group where the person picks who replies, a
    client that cannot (the gateway) has the reply named as in natural order (next_speaker)."""
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
    if not streams_checked:
        streams_check(user=user, open_in_process=len(open_streams))  # before the work: a refusal costs nothing
    if connection is None or connection.user_id != user.pk:
        connection = _connection(user, connection_id if connection is None else connection.pk)
    chat = chat_lock(chat=chat, integrity=integrity)
    characters = chat_characters_in_order(chat=chat)
    responder = _responder(chat, characters, character, message or "", person_picks)
    speakers = _speakers(chat, responder, group=len(characters) > 1)
    if mode == Generation.Mode.NEW and message:
        line = _user_line(speakers.user, message)
        chat = chat_append(chat=chat, messages=[line], integrity=chat.integrity).chat
    steps = {"append": _ms(started)}  # where the time before the first token goes (bench/chat.py reads them)
    if recall_from is None and mode == Generation.Mode.NEW and message:
        recall_from = _history_held(chat)
    context = context_build(
        user=user, chat=chat, message=message if mode == Generation.Mode.NEW else None, character=responder,
        characters=characters, recall_from=recall_from,
    )  # fmt: skip
    chat = context.chat
    steps["context"] = context.timings_ms.get("total", 0.0)
    steps |= {f"context_{step}": ms for step, ms in context.timings_ms.items() if step != "total"}
    mark = time.perf_counter()
    chat.user = user  # its owner, checked above: what reads it (the World Info's books and settings) asks no query
    prompt = compose(Composing(chat, context, responder, speakers, connection, mode))
    if prompt.timed is not None:  # World Info's sticky and cooldown, kept in the chat as SillyTavern keeps them
        patch = [{"op": "add", "path": "/timedWorldInfo", "value": prompt.timed}]
        chat = chat_metadata_patch(chat=chat, patch=patch, kind="json", integrity=chat.integrity)
    steps["prompt"] = _ms(mark)
    prompt.info["timings_ms"] = (timings or {}) | steps | {"total": _ms(started)}
    streams_check(user=user, open_in_process=len(open_streams), locked=True)
    try:
        with transaction.atomic():
            generation = _record(user, chat, connection, mode, speakers, idempotency_key, asked, prompt, context)
    except IntegrityError as exc:  # the same key, sent again while the first request was still preparing
        raise ApplicationError(
            "This request is still generating; ask again when it has ended.", status=409, code="generation_in_progress"
        ) from exc
    return Prepared(generation, fresh=True)


def _history_held(chat: Chat) -> int | None:
    """The first message the prompt of the chat's latest reply held (prompt_build's `history_from`). The next
    prompt's history starts about there, later as the chat grows: the turn's recall leaves out the turns from there
    on, which the history holds, rather than only the last `recent_messages` (a history of 60 messages had #12 and
    #13 recalled beside it, word for word). None before a first reply: the recall then takes the last
    `recent_messages` to be in the prompt."""
    held = (
        Generation.objects.filter(chat=chat, message_index__isnull=False)
        .order_by("-message_index", "-id")
        .values_list(KT("prompt_info__history_from"), flat=True)
        .first()
    )
    return int(held) if held is not None else None


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
    user = chat_person_name(chat=chat) or "You"
    return Speakers(
        char=responder.name if responder else (chat.character_name or "Assistant"),
        user=user,
        persona=persona.description if persona else "",
        group=group,
    )


def _recall_summary(recall: dict[str, Any]) -> dict[str, Any]:
    return {key: recall.get(key) for key in ("source", "message_index", "stored")}
