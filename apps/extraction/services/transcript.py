"""A chat's messages as the tiers read them: numbered lines, fitted to a token budget, and a fingerprint of exactly
what was read, so that results computed from messages that changed meanwhile are recognised and thrown away."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection

from apps.chats.models import Message
from apps.llm.tokens import count_tokens

MESSAGE_CHARS = 6000  # one very long message is cut, not allowed to crowd out the rest

# What a tier's results depend on: position, speaker and text. `extra` (extension data) is not part of it.
_FINGERPRINT_SQL = """
    SELECT count(*), md5(coalesce(string_agg(
        m.index::text || chr(31) || m.is_user::text || chr(31) || m.is_system::text || chr(31) || m.name
        || chr(31) || m.mes, chr(30) ORDER BY m.index), ''))
    FROM chats_message m WHERE m.chat_id = %s AND m.index >= %s AND m.index < %s
"""


@dataclass(frozen=True)
class Line:
    index: int
    name: str
    is_user: bool
    is_system: bool
    text: str

    def render(self) -> str:
        text = self.text if len(self.text) <= MESSAGE_CHARS else self.text[:MESSAGE_CHARS] + " […]"
        speaker = f"[{self.name or 'narrator'}, out of story]" if self.is_system else (self.name or "Narrator")
        return f"#{self.index} {speaker}: {text}"

    @property
    def tokens(self) -> int:
        return count_tokens(self.render()) + 1


def lines(*, chat_id: int, start: int, end: int) -> list[Line]:
    """Messages [start, end) with text, oldest first."""
    rows = (
        Message.objects.filter(chat_id=chat_id, index__gte=max(0, start), index__lt=end)
        .exclude(mes="")
        .order_by("index")
        .values_list("index", "name", "is_user", "is_system", "mes")
    )
    return [Line(*row) for row in rows]


def fingerprint(*, chat_id: int, start: int, end: int) -> str:
    """Changes whenever a message in [start, end) is edited, swiped, deleted, inserted or moved (a deletion before
    `start` moves every later message), or the chat is removed."""
    if end <= start:
        return "0:"
    with connection.cursor() as cursor:
        cursor.execute(_FINGERPRINT_SQL, [chat_id, start, end])
        count, digest = cursor.fetchone()
    return f"{count}:{digest}"


def render(items: Iterable[Line]) -> str:
    return "\n".join(line.render() for line in items)


def fit_newest(items: list[Line], budget: int) -> list[Line]:
    """The newest lines that fit in `budget` tokens (at least the newest one)."""
    kept: list[Line] = []
    used = 0
    for line in reversed(items):
        if kept and used + line.tokens > budget:
            break
        kept.append(line)
        used += line.tokens
    return list(reversed(kept))


def fit_oldest(items: list[Line], budget: int) -> list[Line]:
    """The oldest lines that fit in `budget` tokens (at least the oldest one): a pass that cannot take all of its
    range covers the beginning and leaves the rest to the next pass."""
    kept: list[Line] = []
    used = 0
    for line in items:
        if kept and used + line.tokens > budget:
            break
        kept.append(line)
        used += line.tokens
    return kept


def tokens_between(*, chat_id: int, start: int, end: int) -> int:
    """An estimate of the tokens of messages [start, end) as a chat model would see them, in the database (the
    planner asks after every write, and a chat may hold thousands of messages)."""
    if end <= start:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(ceil(char_length(m.name || ': ' || m.mes) / 3.6) + 4), 0) FROM chats_message m "
            "WHERE m.chat_id = %s AND m.index >= %s AND m.index < %s",
            [chat_id, start, end],
        )
        return int(cursor.fetchone()[0])


def batch_end(*, chat_id: int, count: int, group: bool) -> int:
    """Where batch extraction may read up to. A group chat is batched by rounds of responders: a round begins
    with the user's message and is complete when the next one comes, so the round still under way (from the
    latest user message on) waits."""
    if not group:
        return count
    latest_user = (
        Message.objects.filter(chat_id=chat_id, index__lt=count, is_user=True)
        .order_by("-index")
        .values_list("index", flat=True)
        .first()
    )
    return count if latest_user is None else latest_user
