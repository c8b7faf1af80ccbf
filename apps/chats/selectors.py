"""Reads, always scoped to the requesting user: another user's object is simply not found (404)."""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from dataclasses import dataclass

from django.contrib.auth.models import AbstractUser
from django.db import connection
from django.db.models import Count, Q, QuerySet
from django.http import Http404

from apps.chats.models import Character, Chat, ChatRevision, Message, Persona
from apps.common.holds import holds

MAX_PAGE = 500
REVISION_LIST_LIMIT = 100
CHUNK = 256 * 1024


def _search_term(search: str) -> str:
    # PostgreSQL text cannot hold NUL, and no stored name or title contains one.
    return search.replace("\x00", "").strip()


def character_list(*, user: AbstractUser, search: str = "", by_name: bool = False) -> QuerySet[Character]:
    search = _search_term(search)
    qs = Character.objects.filter(user=user)
    if search:
        qs = qs.filter(holds("name", search))
    return qs.order_by("name", "id") if by_name else qs


def character_list_counted(*, user: AbstractUser, search: str = "") -> QuerySet[Character]:
    """By name, each with how many chats it is in (`chat_count`): the characters page."""
    return character_list(user=user, search=search, by_name=True).annotate(chat_count=Count("chats"))


def character_get(*, user: AbstractUser, character_id: int) -> Character:
    try:
        return Character.objects.get(user=user, pk=character_id)
    except Character.DoesNotExist as exc:
        raise Http404("No such character.") from exc


def characters_get(*, user: AbstractUser, character_ids: list[int]) -> list[Character]:
    """The user's characters of these ids, in that order (repeats dropped); any other id is a 404."""
    ids = list(dict.fromkeys(character_ids))
    found = {character.pk: character for character in Character.objects.filter(user=user, pk__in=ids)}
    if len(found) != len(ids):
        raise Http404("No such character.")
    return [found[pk] for pk in ids]


def chat_list(
    *, user: AbstractUser, search: str = "", client_key: str | None = None, character: Character | None = None
) -> QuerySet[Chat]:
    search = _search_term(search)
    qs = Chat.objects.filter(user=user).prefetch_related("characters")
    if character is not None:
        qs = qs.filter(characters=character)
    if client_key is not None:
        qs = qs.filter(client_key=client_key.replace("\x00", ""))
    if search:
        # A subquery, not a join, so a chat matching through two characters is listed once.
        by_character = Character.objects.filter(holds("name", search), user=user).values("chats")
        qs = qs.filter(holds("title", search) | holds("character_name", search) | Q(pk__in=by_character))
    return qs


def chat_exists(*, user: AbstractUser) -> bool:
    return Chat.objects.filter(user=user).exists()


def chat_count(*, user: AbstractUser, character: Character) -> int:
    """How many of the user's chats the character is in."""
    return chat_list(user=user, character=character).count()


def chat_characters(*, chat: Chat) -> list[Character]:
    """The chat's characters, by name."""
    return list(chat.characters.order_by("name"))


def chat_characters_in_order(*, chat: Chat) -> list[Character]:
    """The chat's characters in the chat's order: the order they were linked in (a group's greetings, its turns)."""
    links = Chat.characters.through.objects.filter(chat=chat).select_related("character").order_by("id")
    return [link.character for link in links]


# What SillyTavern's current header style writes instead of the names (a chat's import reads past it too).
NO_NAME = {"", "unused"}


def chat_person_name(*, chat: Chat) -> str:
    """The name the person goes by in the chat: its persona's; else the chat's `user_name`, unless that is
    SillyTavern's header placeholder ("unused"), when the name on their latest message says it; "" when nothing
    does. A SillyTavern chat synced by the extension had its person called "unused" in every prompt."""
    if chat.persona_id is not None and chat.persona.name:
        return chat.persona.name
    if chat.user_name not in NO_NAME:
        return chat.user_name
    named = Message.objects.filter(chat=chat, is_user=True).exclude(name__in=NO_NAME).order_by("-index")
    return named.values_list("name", flat=True).first() or ""


def chat_get(*, user: AbstractUser, chat_id: int, characters: bool = True) -> Chat:
    """The user's chat (another user's, or none, is a 404), with its characters read beside it unless `characters`
    is False: a caller that locks the chat next reads it again, and would drop them unused."""
    chats = Chat.objects.prefetch_related("characters") if characters else Chat.objects
    try:
        return chats.get(user=user, pk=chat_id)
    except Chat.DoesNotExist as exc:
        raise Http404("No such chat.") from exc


# The user's chat with its links to characters: one row with NULL when it has none, no row when it is not theirs.
_CHARACTER_IDS_SQL = (
    f"SELECT link.character_id FROM {Chat._meta.db_table} c LEFT JOIN {Chat.characters.through._meta.db_table} link "
    "ON link.chat_id = c.id WHERE c.id = %s AND c.user_id = %s ORDER BY link.id"
)


def chat_character_ids(*, user: AbstractUser, chat_id: int) -> list[int]:
    """The ids of the chat's characters, in the order they were linked: a search's scope, so one written
    statement (the ORM's two took a third of a millisecond of every chat's search); another user's chat, or none,
    is a 404 as chat_get's."""
    with connection.cursor() as cursor:
        cursor.execute(_CHARACTER_IDS_SQL, [chat_id, user.pk])
        rows = cursor.fetchall()
    if not rows:
        raise Http404("No such chat.")
    return [row[0] for row in rows if row[0] is not None]


def message_page(*, chat: Chat, from_index: int = 0, limit: int = 100) -> list[Message]:
    """Messages from `from_index` on, in order, at most `limit` (capped at MAX_PAGE)."""
    limit = max(1, min(limit, MAX_PAGE))
    return list(Message.objects.filter(chat=chat, index__gte=from_index).order_by("index")[:limit])


def message_page_before(*, chat: Chat, before: int | None, limit: int = 30) -> list[Message]:
    """The `limit` messages just before index `before` (the newest when None), oldest first."""
    qs = Message.objects.filter(chat=chat)
    if before is not None:
        qs = qs.filter(index__lt=before)
    return list(reversed(qs.order_by("-index")[: max(1, min(limit, MAX_PAGE))]))


def message_page_around(*, chat: Chat, index: int, limit: int = 30) -> list[Message]:
    """`limit` messages with `index` near the middle, oldest first: a chat opened at one message (a memory's source,
    a search hit). Near either end the window slides so that it still holds `limit` messages."""
    limit = max(1, min(limit, MAX_PAGE))
    start = max(0, min(index - limit // 2, chat.message_count - limit))
    return message_page(chat=chat, from_index=start, limit=limit)


def message_get(*, chat: Chat, index: int) -> Message:
    try:
        return Message.objects.get(chat=chat, index=index)
    except Message.DoesNotExist as exc:
        raise Http404("No such message.") from exc


def revision_list(*, chat: Chat) -> QuerySet[ChatRevision]:
    """The chat's kept versions, newest first, without their (possibly large) contents."""
    return ChatRevision.objects.filter(chat=chat).defer("jsonl_gzip")


def revision_get(*, chat: Chat, revision_id: int) -> ChatRevision:
    try:
        return ChatRevision.objects.get(chat=chat, pk=revision_id)
    except ChatRevision.DoesNotExist as exc:
        raise Http404("No such version of this chat.") from exc


def revision_lines(*, revision: ChatRevision) -> Iterator[bytes]:
    """The kept JSONL, decompressed a chunk at a time (a 100 MB chat is never held whole)."""
    with revision_stream(revision=revision) as stream:
        while chunk := stream.read(CHUNK):
            yield chunk


def revision_stream(*, revision: ChatRevision) -> gzip.GzipFile:
    return gzip.GzipFile(fileobj=io.BytesIO(bytes(revision.jsonl_gzip)))


def persona_list(*, user: AbstractUser) -> QuerySet[Persona]:
    """The user's personas, the default first, then by name."""
    return Persona.objects.filter(user=user)


def persona_get(*, user: AbstractUser, persona_id: int) -> Persona:
    try:
        return Persona.objects.get(user=user, pk=persona_id)
    except Persona.DoesNotExist as exc:
        raise Http404("No such persona.") from exc


@dataclass(frozen=True)
class HistoryDigests:
    """A chat's messages from one index on, those hidden from the model (`is_system`) aside, as three aligned
    sequences: their indices; who says each, one character a message (`u` the person, `a` a character); and the MD5
    (hex) of each text, 32 characters a message, concatenated."""

    indices: list[int]
    speakers: str
    md5: str


# One row, read from the index message_history_digest alone: 5,000 messages read as rows (tuples) took 3-4 ms, as two
# strings 1.7 ms. A chat's indices are dense, so only the hidden messages' are listed.
_DIGESTS_SQL = (
    'SELECT count(*), max("index"), array_agg("index" ORDER BY "index") FILTER (WHERE is_system), '
    "string_agg(CASE WHEN is_user THEN 'u' ELSE 'a' END, '' ORDER BY \"index\") FILTER (WHERE NOT is_system), "
    "string_agg(mes_md5, '' ORDER BY \"index\") FILTER (WHERE NOT is_system) "
    'FROM chats_message WHERE chat_id = %s AND "index" >= %s'
)


def history_digests(*, chat: Chat, start: int = 0) -> HistoryDigests:
    """The digests of the chat's messages from index `start` on (a chat the caller has found among the person's):
    what a front end that sends the whole history with every turn is compared with, without reading the texts."""
    with connection.cursor() as cursor:
        cursor.execute(_DIGESTS_SQL, [chat.pk, start])
        count, last, hidden, speakers, md5 = cursor.fetchone()
    if not count:
        return HistoryDigests([], "", "")
    if last - start + 1 == count:
        skipped = set(hidden or ())
        indices = [n for n in range(start, last + 1) if n not in skipped] if skipped else list(range(start, last + 1))
    else:  # a gap in the indices (no write leaves one): read them
        indices = list(
            Message.objects.filter(chat=chat, index__gte=start, is_system=False)
            .order_by("index")
            .values_list("index", flat=True)
        )
    return HistoryDigests(indices, speakers or "", md5 or "")
