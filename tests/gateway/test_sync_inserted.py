"""Messages added amid a chat's history (services/writing.py `inserted_written`): a front end that hides messages sends
the history without them, and the gateway deletes them (as it cannot tell a message hidden from one deleted; a guessed
chat hides them instead); shown again, they come back amid the history. They are put back in their place (or shown),
and the chat's other messages stay as they were: their swipes, recalls and extension data. Before, the comparison read
every later message as edited into its neighbour's text."""

from __future__ import annotations

import pytest
from django.db import connection as db_connection
from django.test.utils import CaptureQueriesContext

from apps.chats.models import Chat, Message
from apps.gateway.services.request import Line
from tests.gateway.stories import (
    REPLY,
    SYSTEM,
    THEN,
    answered,
    hidden_flags,
    synced_as_sent,
    telling,
)
from tests.gateway.test_sync_rules import (
    CONTINUE,
    GO,
    IMP,
    IMPERSONATE,
    NEW,
    NOTHING,
    origins,
    story,
    texts,
    without,
)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("header", ["long", ""])
def test_messages_hidden_in_the_front_end_then_shown_again_are_put_back_in_their_place(user, header):
    """Named, the chat deletes them, and puts them back when shown again; guessed, it hides them (nothing is deleted
    on a guess) and shows them again, their swipes kept."""
    turns = telling(40)
    chat = story(user, turns, header)
    synced = synced_as_sent(user, [SYSTEM, *without(turns, 20, 21, 22, 23), GO], header)
    assert synced.written == {**NOTHING, ("deleted" if header else "hidden"): 4} and synced.chat.pk == chat.pk
    assert hidden_flags(chat) == ([False] * 37 if header else [20 <= n <= 23 for n in range(41)])
    answered(synced.chat, GO, REPLY)
    shown_again = [SYSTEM, *turns, GO, REPLY, THEN]
    synced = synced_as_sent(user, shown_again, header)
    assert (synced.mode, synced.message) == (NEW, THEN.content)
    assert synced.chat.pk == chat.pk
    assert synced.written == {**NOTHING, ("appended" if header else "shown"): 4}
    gone = [None] * 4 if header else [20, 21, 22, 23]
    assert origins(chat) == [*range(20), *gone, *range(24, 41), None, None]
    assert texts(chat) == [line.content for line in shown_again[1:-1]]
    assert hidden_flags(chat) == [False] * 43
    assert synced.indices == [*range(43), None]  # each message held word for word by the chat's at that index


def test_messages_hidden_here_and_shown_in_the_front_end_are_shown_again_not_added(user):
    """SillyTavern with the extension hid #20 and #21 (is_system); the person then shows them again in a front end
    without it: the chat's hidden messages saying the same are shown, with their swipes."""
    turns = telling(40)
    chat = story(user, turns, "long", hidden=(20, 21))
    synced = synced_as_sent(user, [SYSTEM, *turns, GO], "long")
    assert (synced.mode, synced.message, synced.written) == (NEW, GO.content, {**NOTHING, "shown": 2})
    assert origins(chat) == list(range(41)) and texts(chat) == [line.content for line in turns]
    assert hidden_flags(chat) == [False] * 41
    assert synced.indices == [*range(41), None]


def test_hidden_here_but_saying_otherwise_the_shown_messages_are_added_beside_them(user):
    turns = telling(40)
    chat = story(user, turns, "long", hidden=(20, 21))
    sent = [*turns[:20], Line("assistant", "Something else."), Line("user", "And more."), *turns[22:]]
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.written == {**NOTHING, "appended": 2}
    assert origins(chat) == [*range(22), None, None, *range(22, 41)]
    assert hidden_flags(chat) == [n in (20, 21) for n in range(43)]
    assert synced.indices == [*range(20), 22, 23, *range(24, 43), None]


def test_shown_again_ending_with_the_reply_is_a_continue_and_a_draft_writes_them_only(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    synced_as_sent(user, [SYSTEM, *without(turns, 10, 11), GO], "long")
    synced = synced_as_sent(user, [SYSTEM, *turns[:-1], turns[-1]], "long")
    assert (synced.mode, synced.message, synced.written) == (CONTINUE, None, {**NOTHING, "appended": 2})
    assert origins(chat) == [*range(10), None, None, *range(12, 41)]
    synced_as_sent(user, [SYSTEM, *without(turns, 30), GO], "long")
    synced = synced_as_sent(user, [SYSTEM, *turns, IMPERSONATE], "long")
    assert (synced.mode, synced.written) == (IMP, {**NOTHING, "appended": 1})
    assert texts(chat) == [line.content for line in turns]


def test_a_message_added_before_all_of_the_chat_is_not_this_reading(user):
    """Nothing of the chat before the message added: not messages shown again. The comparison reads it (a named
    chat: answered, not stored, as it would rewrite it)."""
    turns = telling(40)
    chat = story(user, turns, "long")
    synced = synced_as_sent(user, [SYSTEM, Line("assistant", "Before the greeting."), *turns, GO], "long")
    assert (synced.mode, synced.written) == (IMP, NOTHING)
    assert origins(chat) == list(range(41))


def test_shown_again_with_the_chats_end_cut_is_read_message_by_message(user):
    """The chat's end not after the message added (its last reply deleted too): read message by message
    (services/aligning.py), the added message put in its place and the last reply deleted, the others kept."""
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = [*turns[:20], Line("user", "Amid."), *turns[20:-1], GO]
    synced = synced_as_sent(user, [SYSTEM, *sent], "long")
    assert (synced.mode, synced.message) == (NEW, GO.content)
    assert synced.written == {**NOTHING, "appended": 1, "deleted": 1}
    assert origins(chat) == [*range(20), None, *range(20, 40)]
    assert texts(chat) == [line.content for line in sent[:-1]]


def test_a_large_block_shown_again_amid_a_long_chat_costs_a_few_statements(user):
    turns = telling(2000)
    chat = story(user, turns, "long", tagged=False)
    synced_as_sent(user, [SYSTEM, *turns[:500], *turns[700:], GO], "long")  # 200 hidden: deleted
    assert chat.messages.count() == 1801
    with CaptureQueriesContext(db_connection) as queries:
        synced = synced_as_sent(user, [SYSTEM, *turns, GO], "long")
    assert synced.written == {**NOTHING, "appended": 200}
    assert texts(chat) == [line.content for line in turns]
    assert len(queries) <= 40, len(queries)
    assert list(Message.objects.filter(chat=chat).order_by("index").values_list("index", flat=True)) == list(
        range(2001)
    )


def test_a_guessed_chat_hides_a_block_left_out_amid_it_and_goes_on_in_it(user):
    """Without the header, nothing is deleted on a guess: the block is hidden where it stands (it went on in a
    branch copying the story), and the next requests, which still leave it out, append as usual."""
    turns = telling(40)
    chat = story(user, turns)
    sent = without(turns, 10, 11)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO])
    assert (synced.chat.pk, synced.message, synced.written) == (chat.pk, GO.content, {**NOTHING, "hidden": 2})
    assert origins(chat) == list(range(41)) and hidden_flags(chat) == [n in (10, 11) for n in range(41)]
    assert synced.indices == [*range(10), *range(12, 41), None]
    answered(chat, GO, REPLY)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO, REPLY, THEN])
    assert (synced.chat.pk, synced.message, synced.written) == (chat.pk, THEN.content, NOTHING)
    synced = synced_as_sent(user, [SYSTEM, *without(sent, 20), GO, REPLY, IMPERSONATE])  # turn 22 too
    assert (synced.chat.pk, synced.mode, synced.written) == (chat.pk, IMP, {**NOTHING, "hidden": 1})
    assert hidden_flags(chat) == [n in (10, 11, 22) for n in range(43)]
    assert Chat.objects.filter(user=user).count() == 1


@pytest.mark.parametrize("header", ["long", ""])
@pytest.mark.parametrize("shown", [(10, 11, 20, 21), (11, 20), (21,)])
def test_hidden_messages_of_several_blocks_shown_again_at_once(user, header, shown):
    turns = telling(40)
    chat = story(user, turns, header, hidden=(10, 11, 20, 21))
    sent = [SYSTEM, *without(turns, *({10, 11, 20, 21} - set(shown))), GO]
    synced = synced_as_sent(user, sent, header)
    assert (synced.chat.pk, synced.message) == (chat.pk, GO.content)
    assert synced.written == {**NOTHING, "shown": len(shown)}
    assert origins(chat) == list(range(41))  # each message the one it was, its swipes kept
    assert hidden_flags(chat) == [n in {10, 11, 20, 21} - set(shown) for n in range(41)]
    assert synced.indices == [n for n in range(41) if n not in {10, 11, 20, 21} - set(shown)] + [None]


def test_hidden_messages_shown_out_of_their_order_are_not_shown_again(user):
    turns = telling(40)
    chat = story(user, turns, "long", hidden=(10, 20))
    sent = [*turns[:10], turns[20], *turns[11:20], turns[10], *turns[21:]]
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert "shown" not in synced.written and synced.written["appended"] == 2  # added in the places they are said
    assert [(mes, hidden) for mes, hidden in zip(texts(chat), hidden_flags(chat), strict=True) if hidden] == [
        (turns[10].content, True),
        (turns[20].content, True),
    ]
    assert [mes for mes, hidden in zip(texts(chat), hidden_flags(chat), strict=True) if not hidden] == [
        line.content for line in sent
    ]


@pytest.mark.parametrize("other", ["", "an edit"])
@pytest.mark.parametrize("header", ["long", ""])
def test_a_block_shown_again_past_what_one_patch_may_write_is_written_in_parts(user, settings, header, other):
    """Each message written carries its fields besides its text, so a block of messages shown again can pass the
    bytes a patch may write though the request was within its limit (the same figure): the request failed whole."""
    turns = telling(60)
    chat = story(user, without(turns, *range(20, 40)), header)
    settings.LOREKEEPER_MAX_JSON_BYTES = 2_000  # (twenty messages written take about 3,400)
    sent = list(turns)
    if other:
        sent[50] = Line("assistant", "Turn 50, edited.")
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], header)
    assert synced.written == {**NOTHING, "appended": 20, "edited": 1 if other else 0}
    assert texts(chat) == [line.content for line in sent]
