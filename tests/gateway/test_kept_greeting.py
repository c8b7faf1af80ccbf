"""A front end that keeps the greeting past its cut (docs/GATEWAY.md), with hidden messages, system messages in the
request, Impersonate, Continue and regenerate, edits and deletions, and unlucky windows. The stories are stored as
the gateway stores them; each request is matched and synced as the gateway does (with the header or without)."""

from __future__ import annotations

import pytest

from apps.chats.models import Chat, Message
from apps.gateway.services.request import Line
from apps.generation.models import Generation
from tests.gateway.stories import GREETING, SYSTEM, answered, expected_rows, rows, synced_as_sent, telling

pytestmark = pytest.mark.django_db

IMPERSONATE = Line("system", "[Write your next reply from the point of view of Rowan, using the chat history so far]")
NUDGE = Line("system", "[Continue your last message without repeating its original content.]")
BOTH = pytest.mark.parametrize("header", ["", "long"])
L1 = "guessed, a window whose first two messages are not both the chat's is not found: a new chat (docs)"


def marked(reason_named: str = "", reason_guessed: str = ""):
    """`header` parametrized, each value xfail (strict) with its reason when given."""
    return pytest.mark.parametrize("header", [
        pytest.param("", marks=[pytest.mark.xfail(strict=True, reason=reason_guessed)] if reason_guessed else []),
        pytest.param("long", marks=[pytest.mark.xfail(strict=True, reason=reason_named)] if reason_named else []),
    ])  # fmt: skip


def story(user, turns: list[Line], header: str = "", hidden: tuple[int, ...] = ()) -> Chat:
    """The turns stored as the gateway stores them (the last must be a reply), then `hidden` hidden (is_system)."""
    chat = synced_as_sent(user, [SYSTEM, *turns], header).chat
    assert chat.message_count == len(turns)
    if hidden:
        Message.objects.filter(chat=chat, index__in=hidden).update(is_system=True)
    return Chat.objects.get(pk=chat.pk)


NOTHING = {"appended": 0, "edited": 0, "deleted": 0}


# 1. Hidden messages -------------------------------------------------------------------------------------------------


@BOTH
@pytest.mark.parametrize("kept", [1, 2])
def test_hidden_in_the_skipped_middle(user, header, kept):
    turns = telling(60)  # 61 messages, the last a reply
    hidden = (40, 41, 42)
    chat = story(user, turns, header, hidden)
    person = Line("user", "Go on.")
    synced = synced_as_sent(user, [SYSTEM, *turns[:kept], *turns[46:], person], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, Generation.Mode.NEW, "Go on.")
    assert synced.written == NOTHING
    assert synced.indices == [*range(kept), *range(46, 61), None]
    assert rows(chat) == expected_rows(turns, hidden)
    assert Chat.objects.count() == 1


@BOTH
def test_hidden_inside_the_window_two_turns(user, header):
    turns = telling(60)
    hidden = (52, 53)
    chat = story(user, turns, header, hidden)
    for cut in (46, 48):
        person = Line("user", f"Go on from {cut}.")
        shown = [line for n, line in enumerate(turns) if n >= cut and n not in hidden]
        synced = synced_as_sent(user, [SYSTEM, GREETING, *shown, person], header)
        assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, Generation.Mode.NEW, person.content)
        assert synced.written == NOTHING
        held = [n for n in range(cut, len(turns)) if n not in hidden]
        assert synced.indices == [0, *held, None]
        turns += [person, Line("assistant", f"Reply {cut}.")]
        answered(chat, *turns[-2:])
        assert rows(chat) == expected_rows(turns, hidden)
    assert Chat.objects.count() == 1


@BOTH
def test_hidden_right_after_the_greeting(user, header):
    turns = telling(60)
    hidden = (1, 2)
    chat = story(user, turns, header, hidden)
    synced = synced_as_sent(user, [SYSTEM, GREETING, *turns[46:], Line("user", "Go on.")], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, Generation.Mode.NEW, "Go on.")
    assert synced.written == NOTHING
    assert synced.indices == [0, *range(46, 61), None]
    assert rows(chat) == expected_rows(turns, hidden)


@BOTH
def test_hidden_where_the_window_begins(user, header):
    """The messages just before and at the front end's cut are hidden: the window is found past them."""
    turns = telling(60)
    hidden = (45, 46, 47)
    chat = story(user, turns, header, hidden)
    synced = synced_as_sent(user, [SYSTEM, GREETING, *turns[48:], Line("user", "Go on.")], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, Generation.Mode.NEW, "Go on.")
    assert synced.written == NOTHING
    assert synced.indices == [0, *range(48, 61), None]
    assert rows(chat) == expected_rows(turns, hidden)


@BOTH
def test_hidden_inside_the_window_then_regenerate(user, header):
    turns = telling(60)
    hidden = (52, 53)
    chat = story(user, turns, header, hidden)
    shown = [line for n, line in enumerate(turns[:-1]) if n >= 46 and n not in hidden]
    synced = synced_as_sent(user, [SYSTEM, GREETING, *shown], header)
    assert (synced.chat.pk, synced.mode, synced.written) == (chat.pk, Generation.Mode.SWIPE, NOTHING)
    assert rows(chat) == expected_rows(turns, hidden)


@BOTH
def test_hidden_last_reply_then_a_new_turn(user, header):
    """The chat's last reply hidden (not sent): the new turn goes after it, nothing deleted."""
    turns = telling(60)
    hidden = (60,)
    chat = story(user, turns, header, hidden)
    synced = synced_as_sent(user, [SYSTEM, GREETING, *turns[46:60], Line("user", "Go on.")], header)
    assert (synced.chat.pk, synced.message) == (chat.pk, "Go on.")
    assert synced.written["deleted"] == 0
    assert rows(chat) == expected_rows(turns, hidden)


# 2. System messages interleaved --------------------------------------------------------------------------------------


@BOTH
def test_system_lines_after_the_greeting_and_at_depth_4(user, header):
    turns = telling(40)
    chat = story(user, turns, header)
    window = turns[30:]
    note = Line("system", "[Author's note: it is raining.]")
    lines = [SYSTEM, GREETING, Line("system", "[Start a new chat]"), *window[:-3], note, *window[-3:]]
    lines.append(Line("user", "Go on."))
    synced = synced_as_sent(user, lines, header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, Generation.Mode.NEW, "Go on.")
    assert synced.written == NOTHING
    assert synced.indices == [0, *range(30, 41), None]
    assert rows(chat) == expected_rows(turns)


@BOTH
def test_system_line_between_the_two_messages_that_place_the_window(user, header):
    turns = telling(40)
    chat = story(user, turns, header)
    lines = [SYSTEM, GREETING, turns[30], Line("system", "[Note]"), *turns[31:], Line("user", "Go on.")]
    synced = synced_as_sent(user, lines, header)
    assert (synced.chat.pk, synced.message, synced.written) == (chat.pk, "Go on.", NOTHING)
    assert synced.indices == [0, *range(30, 41), None]


@BOTH
def test_post_history_system_line_after_the_persons_turn(user, header):
    turns = telling(40)
    chat = story(user, turns, header)
    lines = [SYSTEM, GREETING, *turns[30:], Line("user", "Go on."), Line("system", "[Stay in character.]")]
    synced = synced_as_sent(user, lines, header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, Generation.Mode.NEW, "Go on.")
    assert synced.written == NOTHING and rows(chat) == expected_rows(turns)


@BOTH
def test_regenerate_with_a_post_history_system_line(user, header):
    turns = telling(40)
    chat = story(user, turns, header)
    lines = [SYSTEM, GREETING, *turns[30:-1], Line("system", "[Stay in character.]")]
    synced = synced_as_sent(user, lines, header)
    assert (synced.chat.pk, synced.mode, synced.written) == (chat.pk, Generation.Mode.SWIPE, NOTHING)
    assert rows(chat) == expected_rows(turns)


# 3. Impersonate, Continue, quiet prompts -----------------------------------------------------------------------------


@BOTH
@pytest.mark.parametrize("kept", [1, 2])
def test_impersonate(user, header, kept):
    turns = telling(40)
    chat = story(user, turns, header)
    synced = synced_as_sent(user, [SYSTEM, *turns[:kept], *turns[30:], IMPERSONATE], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, Generation.Mode.IMPERSONATE, None)
    assert synced.written == NOTHING and rows(chat) == expected_rows(turns)
    assert Chat.objects.count() == 1


@BOTH
@pytest.mark.parametrize("nudge", [False, True])
def test_continue(user, header, nudge):
    turns = telling(40)
    chat = story(user, turns, header)
    synced = synced_as_sent(user, [SYSTEM, GREETING, *turns[30:], *([NUDGE] if nudge else [])], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, Generation.Mode.CONTINUE, None)
    assert synced.written == NOTHING and rows(chat) == expected_rows(turns)
    assert synced.indices == [0, *range(30, 41)]


@BOTH
def test_continue_of_an_edited_last_reply(user, header):
    turns = telling(40)
    chat = story(user, turns, header)
    edited = Line("assistant", "Turn 40, trimmed by the person")
    synced = synced_as_sent(user, [SYSTEM, GREETING, *turns[30:40], edited], header)
    assert (synced.chat.pk, synced.mode) == (chat.pk, Generation.Mode.CONTINUE)
    assert synced.written == {"appended": 0, "edited": 1, "deleted": 0}
    assert rows(chat) == expected_rows([*turns[:40], edited])


@BOTH
def test_quiet_prompt(user, header):
    turns = telling(40)
    chat = story(user, turns, header)
    lines = [SYSTEM, GREETING, *turns[30:], Line("system", "Summarize the story so far in a paragraph.")]
    synced = synced_as_sent(user, lines, header)
    assert (synced.chat.pk, synced.mode, synced.written) == (chat.pk, Generation.Mode.IMPERSONATE, NOTHING)
    assert rows(chat) == expected_rows(turns)


# 4. Regenerate ----------------------------------------------------------------------------------------------------


@BOTH
@pytest.mark.parametrize("kept", [1, 2])
def test_regenerate_twice(user, header, kept):
    turns = telling(40)
    chat = story(user, turns, header)
    for _ in range(2):
        synced = synced_as_sent(user, [SYSTEM, *turns[:kept], *turns[30:-1]], header)
        assert (synced.chat.pk, synced.mode, synced.message, synced.written) == (
            chat.pk, Generation.Mode.SWIPE, None, NOTHING)  # fmt: skip
        assert synced.indices == [*range(kept), *range(30, 40)]
    assert rows(chat) == expected_rows(turns) and Chat.objects.count() == 1


# 5. Edits and deletions -------------------------------------------------------------------------------------------


@BOTH
@pytest.mark.parametrize("at", [35, 38, 40])
def test_edit_one_message_inside_the_window(user, header, at):
    turns = telling(40)
    chat = story(user, turns, header)
    sent = list(turns)
    sent[at] = Line(turns[at].role, f"Turn {at}, said otherwise.")
    synced = synced_as_sent(user, [SYSTEM, GREETING, *sent[30:], Line("user", "Go on.")], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, Generation.Mode.NEW, "Go on.")
    assert synced.written == {"appended": 0, "edited": 1, "deleted": 0}
    assert rows(chat) == expected_rows(sent) and Chat.objects.count() == 1


@marked("", L1)
@pytest.mark.parametrize("at", [30, 31])
def test_edit_one_of_the_two_messages_that_place_the_window(user, header, at):
    """The person edits the oldest (or second oldest) message the front end still sends."""
    turns = telling(40)
    chat = story(user, turns, header)
    sent = list(turns)
    sent[at] = Line(turns[at].role, f"Turn {at}, said otherwise.")
    synced = synced_as_sent(user, [SYSTEM, GREETING, *sent[30:], Line("user", "Go on.")], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, Generation.Mode.NEW, "Go on.")
    assert synced.written == {"appended": 0, "edited": 1, "deleted": 0}
    assert rows(chat) == expected_rows(sent) and Chat.objects.count() == 1


@BOTH
def test_delete_the_last_reply_then_send(user, header):
    turns = telling(40)
    chat = story(user, turns, header)
    synced = synced_as_sent(user, [SYSTEM, GREETING, *turns[30:40], Line("user", "Go on.")], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, Generation.Mode.NEW, "Go on.")
    assert synced.written == {"appended": 0, "edited": 0, "deleted": 1}
    assert rows(chat) == expected_rows(turns[:40])


@BOTH
def test_delete_the_last_exchange_then_send(user, header):
    """Indistinguishable from "edit the last message, regenerate" (docs: that reads as an edit and a swipe)."""
    turns = telling(40)
    chat = story(user, turns, header)
    synced = synced_as_sent(user, [SYSTEM, GREETING, *turns[30:39], Line("user", "Go on.")], header)
    assert (synced.chat.pk, synced.mode) == (chat.pk, Generation.Mode.SWIPE)
    assert synced.written == {"appended": 0, "edited": 1, "deleted": 0}
    assert rows(chat)[39] == (True, "Go on.", False) and len(rows(chat)) == 41


def test_delete_two_exchanges_then_send_named(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    synced = synced_as_sent(user, [SYSTEM, GREETING, *turns[30:37], Line("user", "Go on.")], "long")
    assert synced.chat.pk == chat.pk and synced.mode == Generation.Mode.NEW
    # The person's words end the chat (as an edit of #37, the rest deleted: the same end state)
    assert rows(chat) == [*expected_rows(turns[:37]), (True, "Go on.", False)]


def test_delete_two_exchanges_then_send_guessed_branches(user):
    turns = telling(40)
    chat = story(user, turns)
    synced = synced_as_sent(user, [SYSTEM, GREETING, *turns[30:37], Line("user", "Go on.")])
    assert synced.chat.pk != chat.pk and synced.message == "Go on."
    assert rows(synced.chat) == expected_rows(turns[:37])
    assert rows(chat) == expected_rows(turns)


def test_delete_one_message_inside_the_window_named(user):
    """The person deletes #34 in the front end (its window 30..40): only #34 should go; #35..#40 (with their swipes)
    stay the same messages."""
    turns = telling(40)
    chat = story(user, turns, "long")
    Message.objects.filter(chat=chat, index=38).update(swipes=[turns[38].content, "Another take."], swipe_id=0)
    sent = [line for n, line in enumerate(turns) if n != 34]
    synced = synced_as_sent(user, [SYSTEM, GREETING, *sent[30:], Line("user", "Go on.")], "long")
    assert synced.chat.pk == chat.pk and synced.message == "Go on."
    assert [m for _, m, _ in rows(chat)] == [line.content for line in sent]
    swipes = Message.objects.filter(chat=chat, mes=turns[38].content).values_list("swipes", flat=True).get()
    assert swipes == [turns[38].content, "Another take."]  # the message's swipes survive
    assert synced.written == {"appended": 0, "edited": 0, "deleted": 1}


def test_delete_one_message_inside_a_full_history_named(user):
    """Control for the test above without a kept greeting: the whole history, #34 deleted."""
    turns = telling(40)
    chat = story(user, turns, "long")
    Message.objects.filter(chat=chat, index=38).update(swipes=[turns[38].content, "Another take."], swipe_id=0)
    sent = [line for n, line in enumerate(turns) if n != 34]
    synced = synced_as_sent(user, [SYSTEM, *sent, Line("user", "Go on.")], "long")
    assert [m for _, m, _ in rows(chat)] == [line.content for line in sent]
    swipes = Message.objects.filter(chat=chat, mes=turns[38].content).values_list("swipes", flat=True).get()
    assert swipes == [turns[38].content, "Another take."]
    assert synced.written == {"appended": 0, "edited": 0, "deleted": 1}


def test_messages_deleted_around_a_hidden_one_are_deleted_and_it_kept(user):
    """The person deletes #34 and #36 in the front end, #35 between them hidden (never sent): the two are deleted, the
    hidden one and every later message kept as they were."""
    turns = telling(40)
    chat = story(user, turns, "long", hidden=(35,))
    sent = [line for n, line in enumerate(turns) if n not in (34, 35, 36)]
    synced = synced_as_sent(user, [SYSTEM, *sent, Line("user", "Go on.")], "long")
    assert (synced.chat.pk, synced.message, synced.written) == (chat.pk, "Go on.", {**NOTHING, "deleted": 2})
    kept = [(n, line) for n, line in enumerate(turns) if n not in (34, 36)]
    assert rows(chat) == [(line.role == "user", line.content, n == 35) for n, line in kept]
    assert synced.indices == [*range(34), *range(35, 39), None]


def test_a_guessed_chats_last_turn_deleted_leaves_the_reply_after_it_as_it_was(user):
    """Without the header, the person's last message deleted (its reply kept): within the last exchange, so written
    in the chat, and only it deleted (the reply's swipes kept)."""
    turns = telling(40)
    chat = story(user, turns)
    Message.objects.filter(chat=chat, index=40).update(swipes=[turns[40].content, "Another take."], swipe_id=0)
    sent = [line for n, line in enumerate(turns) if n != 39]
    synced = synced_as_sent(user, [SYSTEM, *sent, Line("user", "Go on.")])
    assert (synced.chat.pk, synced.message, synced.written) == (chat.pk, "Go on.", {**NOTHING, "deleted": 1})
    assert rows(chat) == expected_rows(sent)
    assert Message.objects.get(chat=chat, index=39).swipes == [turns[40].content, "Another take."]


@pytest.mark.parametrize("sent", [[40], [2, 40], [0, 40]])
def test_a_named_history_ending_as_the_chat_does_but_agreeing_little_deletes_nothing(user, sent):
    """The chat's last reply alone, or after another message (a side request, or a front end that keeps one
    message): it would be read as the chat with all but its end deleted. Answered, not stored (or, after the
    greeting, read as a cut): nothing deleted."""
    turns = telling(40)
    chat = story(user, turns, "long")
    synced = synced_as_sent(user, [SYSTEM, *[turns[n] for n in sent], Line("user", "Go on.")], "long")
    assert synced.written["deleted"] == 0 and rows(chat) == expected_rows(turns)


def test_delete_one_message_inside_the_window_guessed(user):
    turns = telling(40)
    chat = story(user, turns)
    sent = [line for n, line in enumerate(turns) if n != 34]
    synced = synced_as_sent(user, [SYSTEM, GREETING, *sent[30:], Line("user", "Go on.")])
    # A guess deletes nothing: #34 is hidden where it stands (no branch copying the story).
    assert rows(chat) == expected_rows(turns, hidden=(34,))
    assert (synced.chat.pk, synced.message, synced.written) == (chat.pk, "Go on.", {**NOTHING, "hidden": 1})


# 6. The words after the greeting said again where the window begins -------------------------------------------------


@BOTH
@pytest.mark.parametrize("kept", [1, 2])
def test_same_words_after_the_greeting_as_the_window_begins(user, header, kept):
    turns = telling(40)
    turns[1] = turns[31] = Line("user", "...")
    turns[2] = turns[32] = Line("assistant", "*She nods.*")
    chat = story(user, turns, header)
    synced = synced_as_sent(user, [SYSTEM, *turns[:kept], *turns[31:], Line("user", "Go on.")], header)
    assert (synced.chat.pk, synced.message, synced.written) == (chat.pk, "Go on.", NOTHING)
    assert synced.indices == [*range(kept), *range(31, 41), None]
    assert rows(chat) == expected_rows(turns)


# 7. Unlucky windows ---------------------------------------------------------------------------------------------


@BOTH
def test_greeting_then_only_the_persons_new_message_starts_the_story_again(user, header):
    """The greeting and a new first message: the person deleted the story after the greeting in the front end and
    began again (nothing of the chat's newest messages tells a front end's cut). Named, the chat follows; guessed, a
    new chat (another first message is another story)."""
    turns = telling(40)
    chat = story(user, turns, header)
    synced = synced_as_sent(user, [SYSTEM, GREETING, Line("user", "Go on.")], header)
    if header:  # written over the first message (the turn then answered), the rest deleted
        assert synced.chat.pk == chat.pk and rows(chat) == expected_rows([GREETING, Line("user", "Go on.")])
    else:
        assert (synced.chat.pk != chat.pk, synced.message) == (True, "Go on.")
        assert rows(chat) == expected_rows(turns)


@marked("", L1)
def test_greeting_then_the_last_reply_and_the_new_message(user, header):
    """Greeting, the chat's last reply, the person's new message: a window of two, its second not yet stored."""
    turns = telling(40)
    chat = story(user, turns, header)
    synced = synced_as_sent(user, [SYSTEM, GREETING, turns[40], Line("user", "Go on.")], header)
    assert rows(chat) == expected_rows(turns)  # nothing of the story deleted
    assert synced.chat.pk == chat.pk and synced.message == "Go on." and synced.written == NOTHING


@marked("", L1)
def test_greeting_then_regenerate_of_the_last_message_alone(user, header):
    turns = telling(40)
    chat = story(user, turns, header)
    synced = synced_as_sent(user, [SYSTEM, GREETING, turns[39]], header)
    assert rows(chat) == expected_rows(turns)  # nothing deleted
    assert synced.chat.pk == chat.pk and synced.mode == Generation.Mode.SWIPE


@BOTH
def test_greeting_then_last_exchange_and_new_message(user, header):
    turns = telling(40)
    chat = story(user, turns, header)
    synced = synced_as_sent(user, [SYSTEM, GREETING, turns[39], turns[40], Line("user", "Go on.")], header)
    assert (synced.chat.pk, synced.message, synced.written) == (chat.pk, "Go on.", NOTHING)
    assert synced.indices == [0, 39, 40, None]
    assert rows(chat) == expected_rows(turns)


def opening_of_four() -> list[Line]:
    """A chat that opens with four of the character's messages before the person's first words."""
    intro = [GREETING, *[Line("assistant", f"Intro {n}: the harbour at night.") for n in (1, 2, 3)]]
    rest = [Line("assistant" if n % 2 else "user", f"Turn {n} of the long story.") for n in range(4, 45)]
    return [*intro, *rest]  # 45 messages, #4 the person's first words


@BOTH
@pytest.mark.parametrize("kept", [1, 2, 4])
def test_an_opening_of_four_kept_then_the_window(user, header, kept):
    turns = opening_of_four()[:44]  # #43 a reply
    assert turns[-1].role == "assistant" and turns[4].role == "user"
    chat = story(user, turns, header)
    synced = synced_as_sent(user, [SYSTEM, *turns[:kept], *turns[30:], Line("user", "Go on.")], header)
    assert (synced.chat.pk, synced.message, synced.written) == (chat.pk, "Go on.", NOTHING)
    assert synced.indices == [*range(kept), *range(30, 44), None]
    assert rows(chat) == expected_rows(turns)


def test_a_window_both_stories_of_one_card_hold(user):
    """Two stories of one card (the same greeting, other first words) whose last messages are the same words: the
    window goes on in the one written last or the one it agrees with longest; neither loses a message."""
    a_turns = telling(40)
    b_turns = [GREETING, *[Line(t.role, t.content.replace("long", "other")) for t in telling(40)[1:]]]
    for n in range(34, 41):
        b_turns[n] = a_turns[n]
    a = story(user, a_turns)
    b = story(user, b_turns)
    assert a.pk != b.pk
    synced = synced_as_sent(user, [SYSTEM, GREETING, *a_turns[30:], Line("user", "Go on.")])
    assert synced.chat.pk == a.pk and synced.written == NOTHING
    synced = synced_as_sent(user, [SYSTEM, GREETING, *b_turns[30:], Line("user", "Go on.")])
    assert synced.chat.pk == b.pk and synced.written == NOTHING
    assert rows(a) == expected_rows(a_turns) and rows(b) == expected_rows(b_turns)


@marked("", L1)
def test_edit_the_first_message_of_a_window_that_begins_with_the_persons(user, header):
    """As above, the front end's cut falling before one of the person's messages (the speakers then line up with the
    chat's from its start)."""
    turns = telling(40)
    chat = story(user, turns, header)
    sent = list(turns)
    sent[31] = Line("user", "Turn 31, said otherwise.")
    synced = synced_as_sent(user, [SYSTEM, GREETING, *sent[31:], Line("user", "Go on.")], header)
    assert rows(chat)[:31] == expected_rows(turns)[:31]  # nothing the front end cut is lost
    assert (synced.chat.pk, synced.message) == (chat.pk, "Go on.")
    assert rows(chat) == expected_rows(sent)


@BOTH
@pytest.mark.parametrize("kept", [0, 1])
def test_a_window_whose_first_message_is_stored_with_other_spacing(user, header, kept):
    """Docs: the same words spaced otherwise are not an edit. The window's first message was stored with a double
    space (written elsewhere, or the front end normalises spacing since); a plain trimmed history (`kept` 0) too."""
    turns = telling(40)
    turns[30] = Line("assistant", "Turn 30  of the long story.")
    chat = story(user, turns, header)
    sent = list(turns)
    sent[30] = Line("assistant", "Turn 30 of the long story.")
    synced = synced_as_sent(user, [SYSTEM, *sent[:kept], *sent[30:], Line("user", "Go on.")], header)
    assert rows(chat) == expected_rows(turns)  # nothing deleted, nothing edited
    assert (synced.chat.pk, synced.message, synced.written) == (chat.pk, "Go on.", NOTHING)
    assert synced.indices == [*range(kept), None, *range(31, 41), None]


@BOTH
def test_a_window_whose_first_message_is_sent_with_other_spacing_and_begins_with_the_persons(user, header):
    turns = telling(40)
    turns[31] = Line("user", "Turn 31\n\nof the long story.")
    chat = story(user, turns, header)
    sent = list(turns)
    sent[31] = Line("user", "Turn 31\nof the long story.")
    synced = synced_as_sent(user, [SYSTEM, GREETING, *sent[31:], Line("user", "Go on.")], header)
    assert rows(chat) == expected_rows(turns)
    assert (synced.chat.pk, synced.message, synced.written) == (chat.pk, "Go on.", NOTHING)


def test_a_window_in_the_part_two_stories_share(user):
    """Hostile: two stories of one card whose newest messages are the same words; the window begins in the shared
    part. Either chat may take it, but neither loses a message."""
    a_turns = telling(40)
    b_turns = [GREETING, *[Line(t.role, t.content.replace("long", "other")) for t in telling(40)[1:]]]
    for n in range(30, 41):
        b_turns[n] = a_turns[n]
    a = story(user, a_turns)
    b = story(user, b_turns)
    synced = synced_as_sent(user, [SYSTEM, GREETING, *a_turns[32:], Line("user", "Go on.")])
    assert synced.chat.pk in (a.pk, b.pk) and synced.written == NOTHING and synced.message == "Go on."
    assert rows(a) == expected_rows(a_turns) and rows(b) == expected_rows(b_turns)


@BOTH
def test_prompt_kept_and_recall_with_a_kept_greeting_and_hidden_messages(user, connection, no_embeddings, header):
    """Through completion_prepare: the kept prompt's runs skip the cut and the hidden messages, and read back are
    what the model was sent."""
    from apps.gateway.services.complete import completion_prepare
    from apps.generation.selectors import prompt_messages

    turns = telling(60)
    hidden = (52, 53)
    chat = story(user, turns, header, hidden)
    shown = [line for n, line in enumerate(turns) if n >= 46 and n not in hidden]
    messages = [{"role": line.role, "content": line.content} for line in [SYSTEM, GREETING, *shown]]
    body = {"model": "scripted", "messages": [*messages, {"role": "user", "content": "Go on."}]}
    generation = completion_prepare(user=user, body=body, chat_header=header).generation
    assert generation.chat_id == chat.pk and generation.mode == Generation.Mode.NEW
    kept = Generation.objects.get(pk=generation.pk)
    assert [m for m in kept.prompt if m["role"] == "chat"] == [
        {"role": "chat", "from": 0, "to": 0, "messages": 1},
        {"role": "chat", "from": 46, "to": 51, "messages": 6},
        {"role": "chat", "from": 54, "to": 61, "messages": 8},
    ]
    assert prompt_messages(generation=kept) == generation.prompt
    assert rows(chat)[:61] == expected_rows(turns, hidden) and rows(chat)[61] == (True, "Go on.", False)


def test_a_named_chat_sent_its_greeting_and_last_reply_keeps_its_story_through_the_gateway(
    user, connection, no_embeddings
):
    """End to end, X-Lorekeeper-Chat named: a front end whose context holds the greeting, the last reply and the
    person's new message."""
    from apps.gateway.services.complete import completion_prepare

    turns = telling(40)
    chat = story(user, turns, "long")
    messages = [{"role": line.role, "content": line.content} for line in [SYSTEM, GREETING, turns[40]]]
    body = {"model": "scripted", "messages": [*messages, {"role": "user", "content": "Go on."}]}
    completion_prepare(user=user, body=body, chat_header="long")
    assert rows(chat)[:41] == expected_rows(turns)
