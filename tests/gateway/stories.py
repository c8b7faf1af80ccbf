"""A story as the gateway's tests tell it: a character's greeting, then the person's and the character's turns, sent
through the gateway's matching and sync as a front end's request."""

from __future__ import annotations

from apps.chats.models import Chat
from apps.chats.services.writes import chat_append
from apps.gateway.services.match import chat_for_request
from apps.gateway.services.request import Line
from apps.gateway.services.sync import Synced, history_sync

SYSTEM = Line("system", "Write Mira's next reply in a fictional chat between Mira and Rowan.")
GREETING = Line("assistant", "The lantern is lit.")
REPLY = Line("assistant", "The reply to go on.")
THEN = Line("user", "Then what?")


def telling(turns: int) -> list[Line]:
    """The greeting (index 0) and `turns` messages after it, the person's (odd indices) and the character's."""
    return [
        GREETING,
        *[Line("user" if n % 2 else "assistant", f"Turn {n} of the long story.") for n in range(1, turns + 1)],
    ]


def synced_as_sent(user, lines: list[Line], header: str = "") -> Synced:
    """The request's chat found and its history written, as the gateway does (`header`: X-Lorekeeper-Chat)."""
    found = chat_for_request(user=user, lines=lines, header=header)
    return history_sync(
        chat=found.chat, lines=lines, start=found.start, head=found.head, branch_key=found.branch_key,
        named=found.how == "header",
    )  # fmt: skip


def answered(chat: Chat, *said: Line) -> None:
    """The person's turn and its reply stored, as the reply's generation stores them."""
    chat = Chat.objects.get(pk=chat.pk)
    rows = [{"name": "x", "is_user": line.role == "user", "mes": line.content} for line in said]
    chat_append(chat=chat, messages=rows, integrity=chat.integrity)


def rows(chat: Chat) -> list[tuple[bool, str, bool]]:
    """The chat's messages as (is_user, mes, is_system), in order."""
    return list(chat.messages.order_by("index").values_list("is_user", "mes", "is_system"))


def expected_rows(turns: list[Line], hidden: tuple[int, ...] = ()) -> list[tuple[bool, str, bool]]:
    return [(line.role == "user", line.content, n in hidden) for n, line in enumerate(turns)]


def hidden_flags(chat: Chat) -> list[bool]:
    """Whether each of the chat's messages is hidden from the model (is_system), in order."""
    return list(chat.messages.order_by("index").values_list("is_system", flat=True))


def assert_indices_hold(chat: Chat, lines: list[Line], indices: list[int | None]) -> None:
    """Each index Synced gives holds exactly the text of its history message (or is None), and is shown."""
    held = {index: (mes, hidden) for index, mes, hidden in chat.messages.values_list("index", "mes", "is_system")}
    history = [line for line in lines if line.role != "system"]
    assert len(indices) == len(history)
    for line, index in zip(history, indices, strict=True):
        assert index is None or held[index] == (line.content, False), (index, line.content, held.get(index))
