"""Messages deleted (or added) amid a history along with other changes, read message by message against the chat
(services/aligning.py): what is written, what stays as it was, and what the reading refuses (a side request, most of
the chat left out, a guessed chat, a history the alignment could not weigh cheaply)."""

from __future__ import annotations

import pytest
from django.db import connection as db_connection
from django.test.utils import CaptureQueriesContext

from apps.chats.models import Chat
from apps.chats.selectors import history_digests
from apps.gateway.services import aligning
from apps.gateway.services.aligning import aligned
from apps.gateway.services.request import Line
from apps.generation.models import Generation
from tests.gateway.stories import SYSTEM, synced_as_sent, telling
from tests.gateway.test_sync_rules import GO, IMPERSONATE, NOTHING, origins, story, texts, without

pytestmark = pytest.mark.django_db

NEW, SWIPE, CONTINUE, IMP = (Generation.Mode.NEW, Generation.Mode.SWIPE, Generation.Mode.CONTINUE,
                             Generation.Mode.IMPERSONATE)  # fmt: skip


def edited(turns: list[Line], *at: int) -> list[Line]:
    return [Line(line.role, f"{line.content} Edited.") if n in at else line for n, line in enumerate(turns)]


def test_two_blocks_and_the_end_deleted(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(turns, 20, 34, 38, 39, 40)  # ends with #37, the person's: another turn follows
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert (synced.mode, synced.message, synced.written) == (NEW, GO.content, {**NOTHING, "deleted": 5})
    assert origins(chat) == [n for n in range(41) if n not in (20, 34, 38, 39, 40)]
    assert synced.indices == [*range(36), None]


def test_a_deletion_then_the_last_turn_edited_and_regenerated(user):
    """As the comparison reads a history one shorter than the chat ending with the person's message: their last
    turn edited, its reply regenerated (kept as a swipe)."""
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(edited(turns, 39), 20, 40)
    synced = synced_as_sent(user, [SYSTEM, *sent], "long")
    assert (synced.mode, synced.message) == (SWIPE, None)
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 1}
    assert origins(chat) == [n for n in range(41) if n != 20]
    assert texts(chat)[-2] == sent[-1].content


def test_a_deletion_then_the_last_exchange_deleted_and_a_turn_said(user):
    """The person deleted #20 and the last exchange, then wrote a turn sharing no words with their deleted one: the
    history is one shorter than the chat and ends with their message, but it is their new turn, not an edit."""
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(turns, 20, 39, 40)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert (synced.mode, synced.message, synced.written) == (NEW, GO.content, {**NOTHING, "deleted": 3})
    assert origins(chat) == [n for n in range(39) if n != 20]


def test_a_deletion_an_edit_and_a_message_added_before_the_turn(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    extra = Line("assistant", "A reply written by hand.")
    sent = [*without(edited(turns, 12), 30), extra, GO]
    synced = synced_as_sent(user, [SYSTEM, *sent], "long")
    assert (synced.mode, synced.message) == (NEW, GO.content)
    assert synced.written == {"appended": 1, "edited": 1, "deleted": 1}
    assert texts(chat) == [line.content for line in sent[:-1]]
    assert origins(chat) == [*(n for n in range(41) if n != 30), None]
    assert synced.indices == [*range(41), None]


def test_a_deletion_with_a_message_spaced_otherwise_is_no_edit(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(turns, 34)
    sent[36] = Line(sent[36].role, f"  {sent[36].content.replace(' ', '   ')}\n")  # the chat's #37
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.written == {**NOTHING, "deleted": 1}
    assert texts(chat) == [line.content for line in without(turns, 34)]  # #37 stays as the chat holds it
    assert synced.indices[36] is None and synced.indices[35] == 35 and synced.indices[37] == 37


def test_a_deletion_and_an_edit_then_continue(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(edited(turns, 20), 9)
    synced = synced_as_sent(user, [SYSTEM, *sent], "long")
    assert (synced.mode, synced.message) == (CONTINUE, None)
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 1}
    assert origins(chat) == [n for n in range(41) if n != 9]


def test_a_deletion_and_an_edit_with_impersonate_are_written_and_nothing_appended(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(edited(turns, 38), 34)
    synced = synced_as_sent(user, [SYSTEM, *sent, IMPERSONATE], "long")
    assert (synced.mode, synced.message) == (IMP, None)
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 1}
    assert origins(chat) == [n for n in range(41) if n != 34]


def test_a_guessed_chat_with_a_deletion_and_an_edit_goes_on_in_a_branch(user):
    turns = telling(40)
    chat = story(user, turns)
    sent = without(edited(turns, 38), 34)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO])
    assert synced.chat.pk != chat.pk
    assert origins(chat) == list(range(41)) and texts(chat) == [line.content for line in turns]
    assert texts(synced.chat) == [line.content for line in sent]


def test_a_side_request_sharing_the_opening_is_not_stored(user):
    """A named request for a summary: the story's first messages, then its own exchange."""
    turns = telling(40)
    chat = story(user, turns, "long")
    side = [*turns[:6], *[Line("user" if n % 2 else "assistant", f"Summary part {n}.") for n in range(8)], GO]
    synced = synced_as_sent(user, [SYSTEM, *side], "long")
    assert synced.mode == IMP
    assert origins(chat) == list(range(41))


def test_the_deletion_inside_a_kept_greeting_window_with_an_edit(user):
    """A front end keeping the greeting past its cut; the person deleted #34 and edited #38 inside the window."""
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = [turns[0], *without(edited(turns, 38), 34)[20:]]
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert (synced.message, synced.written) == (GO.content, {**NOTHING, "edited": 1, "deleted": 1})
    assert origins(chat) == [n for n in range(41) if n != 34]


def _reading(user, turns: list[Line], sent: list[Line], same: int, chat: Chat | None = None):
    chat = chat or story(user, turns, "long", tagged=False)
    history = [line for line in sent if line.role != "system"]
    stored = history_digests(chat=chat)

    def read(indices: list[int]) -> dict[int, str]:
        return dict(chat.messages.filter(index__in=indices).values_list("index", "mes"))

    return aligned(history, stored, same, answered=False, read=read)


def test_more_left_out_than_kept_is_no_reading(user):
    turns = telling(40)
    sent = [line for n, line in enumerate(turns) if n < 3 or n % 3 == 0]  # two of every three left out
    assert _reading(user, turns, [*sent, GO], 3) is None


def test_only_edits_or_only_the_end_deleted_are_left_to_the_comparison(user):
    turns = telling(40)
    assert _reading(user, turns, [*edited(turns, 20, 30), GO], 20) is None
    assert _reading(user, turns, turns[:30], 30) is None
    assert _reading(user, turns, turns[:-1], 40) is None  # a regenerate


def test_messages_added_amid_the_chat_with_a_deletion_are_read(user):
    """Messages shown again in the front end (deleted here when hidden there) with another message deleted."""
    turns = telling(40)
    sent = [*turns[:20], Line("user", "Shown again."), Line("assistant", "Shown too."), *without(turns, 30)[20:]]
    reading = _reading(user, turns, sent, 20)
    assert (reading.added, reading.gone, reading.edited) == ([20, 21], [30], [])
    assert reading.held == [*range(20), None, None, *range(20, 30), *range(31, 41)]


def test_more_added_amid_the_chat_than_kept_or_added_first_is_no_reading(user):
    turns = telling(20)
    many = [Line("user" if n % 2 else "assistant", f"New line {n}.") for n in range(30)]
    assert _reading(user, turns, [*turns[:5], *many, *without(turns, 12)[5:]], 5) is None
    first = [Line("assistant", "Before the greeting."), *without(turns, 12)]
    assert _reading(user, turns, first, 0) is None


def test_a_turn_said_over_and_over_is_read_by_the_replies_around_it(user):
    """Every turn of the person's is "ok": the replies, each said once, place them."""
    turns = [Line("user" if n % 2 else "assistant", "ok" if n % 2 else f"Reply {n}.") for n in range(2001)]
    reading = _reading(user, turns, [*without(edited(turns, 1700), 100, 101), GO], 100)
    assert (reading.gone, reading.edited, reading.spaced) == ([100, 101], [1698], [])


def test_texts_said_over_and_over_are_left_to_the_comparison(user):
    """A chat of two texts said over and over: nothing anchors it, and the pairs to weigh pass ALIGNED_CELLS."""
    turns = [Line("user" if n % 2 else "assistant", "ok" if n % 2 else "...") for n in range(401)]
    assert (300 - 100) ** 2 > aligning.ALIGNED_CELLS
    assert _reading(user, turns, [*without(edited(turns, 300), 100, 101), GO], 100) is None


def test_past_the_pairs_it_may_weigh_the_alignment_gives_no_reading(user, monkeypatch):
    turns = telling(40)
    sent = [*without(edited(turns, 30), 20), GO]
    assert _reading(user, turns, sent, 20).gone == [20]
    monkeypatch.setattr(aligning, "ALIGNED_CELLS", 0)  # the edit alone is one pair to weigh
    assert _reading(user, turns, sent, 20, chat=Chat.objects.get(user=user)) is None


def test_a_deletion_next_to_an_edit_is_told_by_the_words_kept(user):
    """#20 and #21 deleted and #22 edited, or #20 edited and #21 and #22 deleted: the same speakers either way; the
    edited message is the one whose words it keeps."""
    turns = telling(40)
    assert _reading(user, turns, [*without(edited(turns, 22), 20, 21), GO], 20).gone == [20, 21]
    assert _reading(user, turns, [*without(edited(turns, 20), 21, 22), GO], 20, chat=Chat.objects.get(
        user=user)).gone == [21, 22]  # fmt: skip


def test_queries_deleting_one_and_editing_one_amid_2000(user):
    turns = telling(2000)
    chat = story(user, turns, "long", tagged=False)
    sent = without(edited(turns, 1990), 1000)
    with CaptureQueriesContext(db_connection) as queries:
        synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 1}
    assert texts(Chat.objects.get(pk=chat.pk)) == [line.content for line in sent]
    assert len(queries) <= 40, len(queries)


def test_a_guessed_chat_with_two_earlier_edits_and_the_last_turn_deleted_goes_on_in_a_branch(user):
    turns = telling(40)
    chat = story(user, turns)
    sent = without(edited(turns, 10, 12), 39)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO])
    assert synced.chat.pk != chat.pk
    assert origins(chat) == list(range(41))
