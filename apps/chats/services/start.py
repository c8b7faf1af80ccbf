"""Starting a chat as SillyTavern starts one (a header, then each character's greeting), and who replies next in a
group."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import transaction
from django.utils import timezone

from apps.chats.models import Character, Chat, Message, Persona, ReplyOrder
from apps.chats.selectors import chat_characters_in_order
from apps.chats.services.characters import character_greetings
from apps.chats.services.chats import chat_create, message_lines_append
from apps.chats.services.macros import macros_substitute
from apps.chats.services.personas import persona_default
from apps.common.exceptions import ApplicationError

# SillyTavern's name for the person when no persona is chosen.
DEFAULT_USER_NAME = "You"
MAX_CHARACTERS = 50


def send_date(moment: datetime | None = None) -> str:
    """A timestamp as SillyTavern writes `send_date` now (`Date.toISOString()`: UTC, milliseconds, "Z")."""
    moment = (moment or timezone.now()).astimezone(UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def chat_file_title(names: list[str], moment: datetime) -> str:
    """The name SillyTavern gives a new chat file: `Name - 2026-5-1@09h03m07s042ms`."""
    moment = moment.astimezone(UTC)
    stamp = (
        f"{moment.year}-{moment.month}-{moment.day}@{moment.hour:02d}h{moment.minute:02d}m{moment.second:02d}s"
        f"{moment.microsecond // 1000:03d}ms"
    )
    return f"{', '.join(names)} - {stamp}"


def greeting_line(*, character: Character, user_name: str, sent: str) -> dict[str, Any] | None:
    """The character's greeting as SillyTavern puts it in a new chat: the first message, every greeting a swipe
    (`swipe_info` entries as SillyTavern makes them for greetings: the date and an empty `extra`; no generation
    times), the macros resolved. None for a character with no greeting."""
    raw = character_greetings(character)
    greetings = [macros_substitute(text, char=character.name, user=user_name) for text in raw]
    if not greetings:
        return None
    return {
        "name": character.name,
        "is_user": False,
        "is_system": False,
        "send_date": sent,
        "mes": greetings[0],
        "extra": {},
        "swipe_id": 0,
        "swipes": greetings,
        "swipe_info": [{"send_date": sent, "extra": {}} for _ in greetings],
    }


@transaction.atomic
def chat_start(
    *,
    user: AbstractUser,
    characters: list[Character],
    persona: Persona | None = None,
    title: str = "",
    reply_order: str = ReplyOrder.NATURAL,
) -> Chat:
    """A new chat with these characters (several: a group, in this order), as SillyTavern writes a new one: a
    header (`user_name` the persona's name or "You", `character_name` the first character's, `create_date`,
    `chat_metadata` holding a fresh integrity slug), then each character's greeting (greeting_line). The persona
    defaults to the account's default one. Made through chat_create and the append path, so the chat has its
    integrity and the apps above hear of it (chat_written)."""
    characters = list(dict.fromkeys(characters))
    if not characters:
        raise ApplicationError("A chat starts with at least one character.", {"field": "characters"})
    if len(characters) > MAX_CHARACTERS:
        raise ApplicationError(f"A chat has at most {MAX_CHARACTERS} characters.", {"field": "characters"})
    if persona is None:
        persona = persona_default(user=user)
    user_name = persona.name if persona is not None else DEFAULT_USER_NAME
    now = timezone.now()
    sent = send_date(now)
    chat = chat_create(
        user=user,
        title=(title.strip() or chat_file_title([c.name for c in characters], now))[:300],
        character_ids=[character.pk for character in characters],
        user_name=user_name,
        character_name=characters[0].name,
        chat_metadata={"integrity": str(uuid.uuid4())},
        persona_id=persona.pk if persona is not None else None,
        reply_order=reply_order,
        create_date=sent,
    )
    lines = [greeting_line(character=character, user_name=user_name, sent=sent) for character in characters]
    return message_lines_append(chat=chat, lines=[line for line in lines if line is not None])


def _mentioned(characters: list[Character], text: str) -> Character | None:
    """The character named earliest in `text` (whole words, any case); at one place the longer name wins."""
    best: tuple[int, int, int] | None = None
    found = None
    for order, character in enumerate(characters):
        name = character.name.strip()
        if not name:
            continue
        match = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE)
        if match and (best is None or (match.start(), -len(name), order) < best):
            best, found = (match.start(), -len(name), order), character
    return found


def _last_speaker(chat: Chat, characters: list[Character]) -> Character | None:
    by_name: dict[str, Character] = {}
    for character in characters:
        by_name.setdefault(character.name, character)
    name = (
        Message.objects.filter(chat=chat, is_user=False, is_system=False, name__in=list(by_name))
        .order_by("-index")
        .values_list("name", flat=True)
        .first()
    )
    return by_name.get(name) if name is not None else None


def next_speaker(
    *,
    chat: Chat,
    text: str = "",
    exclude_last: bool = False,
    characters: list[Character] | None = None,
    person_picks: bool = True,
) -> Character | None:
    """Who replies next. One character: that one. A group in natural order: the character `text` (the person's new
    message) names first, whole-word and in any case; else the one after the character who spoke last, in the
    chat's character order; else the first. `exclude_last`: the last speaker is not chosen by being named (in
    turn it never is, in a group). A group in manual order: None (the person chooses who replies), as for a chat
    with no characters; for a client that cannot pick (`person_picks` False: the gateway, whose front end's prompt
    says who speaks), as in natural order. `characters`: the chat's in its order (chat_characters_in_order), when
    the caller has them."""
    characters = chat_characters_in_order(chat=chat) if characters is None else characters
    if len(characters) <= 1:
        return characters[0] if characters else None
    if chat.reply_order == ReplyOrder.MANUAL and person_picks:
        return None
    last = _last_speaker(chat, characters)
    candidates = [c for c in characters if not (exclude_last and last is not None and c.pk == last.pk)]
    named = _mentioned(candidates, text or "")
    if named is not None:
        return named
    if last is None:
        return characters[0]
    return characters[(characters.index(last) + 1) % len(characters)]
