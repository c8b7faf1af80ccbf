"""A story as the gateway's tests tell it: a character's greeting, then the person's and the character's turns, sent
through the gateway's matching and sync as a front end's request."""

from __future__ import annotations

import random

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


VOCABULARY = (
    "amber ash bell birch blade bloom bone brook candle canyon cedar chalk cinder cliff cloak clover comet copper "
    "coral crane crow dawn delta dune dusk ember falcon fern flint fog forge fox frost gale garnet glacier glade "
    "granite gull harbor hare hawk hazel heath heron hollow honey iris ivory ivy jade juniper kestrel lagoon lantern "
    "larch lark lichen lily linen lynx maple marble marsh meadow mist moss moth nettle oak onyx orchid otter owl "
    "pebble pine plume pond poppy quarry quartz quill rain raven reed ridge river robin rook rose rowan rust sable "
    "saffron sage salt sand shale shell silk slate sleet smoke sorrel sparrow spruce star stone storm swan tallow "
    "thistle thorn thrush tide timber torch trout tulip vale velvet violet vine wasp willow wind wolf wren yarrow"
).split()


def prose(turns: int, seed: int = 7) -> list[Line]:
    """A story whose messages say different words (neighbours share few, as a story's do): the greeting, then the
    person's turns (odd) and the character's."""
    rng = random.Random(seed)
    return [
        Line("user" if n % 2 else "assistant", " ".join(rng.sample(VOCABULARY, 9)).capitalize() + ".")
        for n in range(turns + 1)
    ]


def visible(chat: Chat) -> list[str]:
    """The texts of the chat's messages shown to the model (not hidden), in order."""
    return list(chat.messages.filter(is_system=False).order_by("index").values_list("mes", flat=True))


def edited(line: Line) -> Line:
    return Line(line.role, f"{line.content} And then some more was said.")


def assert_as_sent(chat: Chat, sent: list[Line], synced) -> None:
    """The chat's visible messages are the history (its person's new turn aside), and each index holds its text."""
    history = [line for line in sent if line.role != "system"]
    turn = synced.message is not None
    assert visible(chat) == [line.content for line in history[: len(history) - turn]]
    assert_indices_hold(chat, sent, synced.indices)
