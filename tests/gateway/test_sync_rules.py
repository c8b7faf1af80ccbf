"""Red team of two gateway rules: messages deleted amid a history deleted alone (services/blocks.py dropped_count,
_dropped, and with other changes services/aligning.py) and a named history's kept greeting placed by its last
messages (services/placing.py _at_end, kept_place).

Each message of a stored story carries a swipe naming it (`alt of #n`), so a test can tell whether a message kept
its identity (its swipes) or was deleted and written again. Expectations that fail today are xfail(strict=True)
with the cause."""

from __future__ import annotations

import random

import pytest
from django.db import connection as db_connection
from django.test.utils import CaptureQueriesContext

from apps.chats.models import Chat, Message
from apps.gateway.services.request import Line
from apps.generation.models import Generation
from tests.gateway.stories import GREETING, SYSTEM, answered, rows, synced_as_sent, telling

pytestmark = pytest.mark.django_db

# A story whose every message is tagged, and what reads the tags (the rest: tests/gateway/stories.py) -----------

IMPERSONATE = Line("system", "[Write your next reply from the point of view of Rowan, using the chat history so far]")
NUDGE = Line("system", "[Continue your last message without repeating its original content.]")
QUIET = Line("system", "Summarize the story so far in a paragraph.")
NOTHING = {"appended": 0, "edited": 0, "deleted": 0}
NEW, SWIPE, CONTINUE, IMP = (Generation.Mode.NEW, Generation.Mode.SWIPE, Generation.Mode.CONTINUE,
                             Generation.Mode.IMPERSONATE)  # fmt: skip
GO = Line("user", "Go on.")


def story(user, turns: list[Line], header: str = "", hidden: tuple[int, ...] = (), tagged: bool = True) -> Chat:
    """The turns stored as the gateway stores them, each message given a second swipe naming it (`alt of #n`)."""
    chat = synced_as_sent(user, [SYSTEM, *turns], header).chat
    assert chat.message_count == len(turns)
    if tagged:
        for message in Message.objects.filter(chat=chat):
            message.swipes, message.swipe_id = [message.mes, f"alt of #{message.index}"], 0
            message.absent_fields = [key for key in message.absent_fields if key not in ("swipes", "swipe_id")]
            message.save(update_fields=["swipes", "swipe_id", "absent_fields"])
    if hidden:
        Message.objects.filter(chat=chat, index__in=hidden).update(is_system=True)
    return Chat.objects.get(pk=chat.pk)


def texts(chat: Chat) -> list[str]:
    return list(chat.messages.order_by("index").values_list("mes", flat=True))


def origins(chat: Chat) -> list[int | None]:
    """For each stored message, the index it was stored at in the tagged story (None: written since)."""
    found = []
    for swipes in chat.messages.order_by("index").values_list("swipes", flat=True):
        tag = swipes[1] if isinstance(swipes, list) and len(swipes) > 1 else ""
        found.append(int(tag.split("#")[1]) if isinstance(tag, str) and tag.startswith("alt of #") else None)
    return found


def without(turns: list[Line], *gone: int) -> list[Line]:
    return [line for n, line in enumerate(turns) if n not in gone]


# 1. Control: the rule as meant ----------------------------------------------------------------------------------


@pytest.mark.parametrize("gone", [(34,), (33, 34), (20, 21, 22, 23, 24), (5,), (38,)])
def test_control_a_block_deleted_named_keeps_every_later_message(user, gone):
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(turns, *gone)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, NEW, GO.content)
    assert synced.written == {**NOTHING, "deleted": len(gone)}
    assert texts(chat) == [line.content for line in sent]
    assert origins(chat) == [n for n in range(41) if n not in gone]
    assert synced.indices == [*range(len(sent)), None]


# 2. Repeated texts -------------------------------------------------------------------------------------------------


def test_repeated_exchange_the_earlier_one_deleted(user):
    """The words "ok" / "*nods*" said twice; the person deletes the first pair (35, 36). The texts come out right;
    which pair's swipes survive cannot be told from the texts (the later pair, 37-38, is deleted instead): an
    inherent ambiguity, recorded here, not a bug."""
    turns = telling(40)
    turns[35] = turns[37] = Line("user", "ok")
    turns[36] = turns[38] = Line("assistant", "*nods*")
    chat = story(user, turns, "long")
    sent = without(turns, 35, 36)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.written == {**NOTHING, "deleted": 2} and synced.message == GO.content
    assert texts(chat) == [line.content for line in sent]
    assert origins(chat) == [*range(37), *range(39, 41)]  # 37, 38 went: the person deleted 35, 36


def test_repeated_short_texts_delete_one_of_a_run(user):
    """A run of "..." replies and "ok" turns; the person deletes one exchange of the run. Nothing else lost."""
    turns = telling(40)
    for n in range(30, 39):
        turns[n] = Line(turns[n].role, "ok" if n % 2 else "...")
    chat = story(user, turns, "long")
    sent = without(turns, 33, 34)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.written == {**NOTHING, "deleted": 2}
    assert texts(chat) == [line.content for line in sent]
    assert origins(chat)[-2:] == [39, 40]


def test_repeated_texts_guessed_deletion_within_the_last_exchange(user):
    """Guessed chat: the person deletes their last message (39, "ok") whose text also stands at 37: within the last
    exchange, written in place; the reply 40 keeps its swipes."""
    turns = telling(40)
    turns[37] = turns[39] = Line("user", "ok")
    chat = story(user, turns)
    sent = without(turns, 39)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO])
    assert (synced.chat.pk, synced.message, synced.written) == (chat.pk, GO.content, {**NOTHING, "deleted": 1})
    assert origins(chat) == [*range(39), 40]


# 3. Deletions combined with other changes ------------------------------------------------------------------------


def test_delete_one_and_edit_a_later_one_named(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = list(turns)
    sent[38] = Line("assistant", "Turn 38, edited.")
    sent = without(sent, 34)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert texts(chat) == [line.content for line in sent]  # holds
    assert synced.written == {"appended": 0, "edited": 1, "deleted": 1}
    assert origins(chat) == [n for n in range(41) if n != 34]


def test_edit_an_early_message_and_delete_a_later_one_named(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = list(turns)
    sent[10] = Line("assistant", "Turn 10, edited.")
    sent = without(sent, 34)
    synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert texts(chat) == [line.content for line in sent]
    assert origins(chat) == [n for n in range(41) if n != 34]


def test_two_separate_blocks_deleted_named(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(turns, 20, 34)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert texts(chat) == [line.content for line in sent]
    assert synced.written == {**NOTHING, "deleted": 2}
    assert origins(chat) == [n for n in range(41) if n not in (20, 34)]


def test_delete_a_pair_and_edit_a_later_message(user):
    """The person deletes #33, #34 and edits #38, then sends a turn. Expected: two deleted, one edited, the turn."""
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = list(turns)
    sent[38] = Line("assistant", "Turn 38, edited.")
    sent = without(sent, 33, 34)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert (synced.mode, synced.message) == (NEW, GO.content)
    assert texts(chat) == [line.content for line in sent]
    assert synced.written == {"appended": 0, "edited": 1, "deleted": 2}
    assert origins(chat) == [n for n in range(41) if n not in (33, 34)]


def test_delete_one_then_regenerate_named(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(turns, 34)[:-1]  # ... 39 (the person's last), the reply 40 regenerated
    synced = synced_as_sent(user, [SYSTEM, *sent], "long")
    assert (synced.mode, synced.message, synced.written) == (SWIPE, None, {**NOTHING, "deleted": 1})
    assert origins(chat) == [n for n in range(41) if n != 34]


def test_deleted_here_while_another_device_appended(user):
    """Device A deletes #34 and sends; device B had meanwhile appended an exchange (41, 42). The history no longer
    goes on as the chat does to its end, so the rule stays out; read message by message (services/aligning.py),
    #34 is deleted, the messages between kept, and device B's exchange deleted (whole-history sync has no merge:
    the history is the chat); A's turn shares no words with B's, so it is a new turn, not an edit of B's."""
    turns = telling(40)
    chat = story(user, turns, "long")
    answered(chat, Line("user", "From the phone."), Line("assistant", "Reply on the phone."))
    sent = without(turns, 34)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert (synced.mode, synced.message, synced.written) == (NEW, GO.content, {**NOTHING, "deleted": 3})
    assert "From the phone." not in texts(chat)
    assert origins(chat) == [n for n in range(41) if n != 34]


def test_other_device_deleted_then_stale_full_history(user):
    """Device B deleted #34 (written); device A, stale, sends the full history: #34 comes back (written again, the
    later messages written again): no duplicate, nothing of the story lost."""
    turns = telling(40)
    chat = story(user, turns, "long")
    synced_as_sent(user, [SYSTEM, *without(turns, 34), GO], "long")
    answered(chat, Line("assistant", "Reply."))
    synced = synced_as_sent(user, [SYSTEM, *turns, GO], "long")
    assert texts(chat) == [line.content for line in turns]
    assert synced.message == GO.content


# 4. Impersonate / continue / quiet prompts with deletions -------------------------------------------------------


@pytest.mark.parametrize("last", ["impersonate", "quiet"])
def test_answered_only_after_a_deletion_keeps_the_later_messages(user, last):
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(turns, 34)
    extra = IMPERSONATE if last == "impersonate" else QUIET
    synced = synced_as_sent(user, [SYSTEM, *sent, extra], "long")
    assert synced.mode == IMP
    assert origins(chat) == [n for n in range(41) if n != 34]


@pytest.mark.parametrize("nudge", [False, True])
def test_continue_after_a_deletion(user, nudge):
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(turns, 34)
    synced = synced_as_sent(user, [SYSTEM, *sent, *([NUDGE] if nudge else [])], "long")
    assert (synced.mode, synced.message, synced.written) == (CONTINUE, None, {**NOTHING, "deleted": 1})
    assert origins(chat) == [n for n in range(41) if n != 34]
    assert synced.indices == list(range(40))


def test_impersonate_then_send_after_deletion_same_result_as_send(user):
    """The person deletes #34, impersonates (a draft), then sends it: the deletion ends as one message deleted."""
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(turns, 34)
    synced_as_sent(user, [SYSTEM, *sent, IMPERSONATE], "long")
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.message == GO.content and texts(chat) == [line.content for line in sent]


# 5. The chat's end: a failed generation, hidden messages at the edges --------------------------------------------


def test_chat_ending_with_the_persons_message_block_deleted(user):
    """The last generation failed (the chat ends with the person's message): the block deleted, the reply asked for
    that message, nothing appended."""
    turns = telling(40)
    chat = story(user, turns, "long")
    answered(chat, Line("user", "Unanswered."))
    sent = [*without(turns, 34), Line("user", "Unanswered.")]
    synced = synced_as_sent(user, [SYSTEM, *sent], "long")
    assert (synced.mode, synced.message, synced.written) == (NEW, None, {**NOTHING, "deleted": 1})
    assert texts(chat) == [line.content for line in sent]


@pytest.mark.parametrize("hidden", [(40,), (33,), (35,), (34, 35)])
def test_hidden_at_the_edges_of_the_block(user, hidden):
    """Hidden messages (never sent) right before, right after, at the chat's end: the block (#34) deleted alone."""
    turns = telling(40)
    chat = story(user, turns, "long", hidden=hidden)
    gone = 34 if 34 not in hidden else 36
    sent = [line for n, line in enumerate(turns) if n != gone and n not in hidden]
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.written == {**NOTHING, "deleted": 1}
    assert origins(chat) == [n for n in range(41) if n != gone]
    assert [h for _, _, h in rows(chat)] == [n in hidden for n in range(41) if n != gone]


# 6. _at_end ---------------------------------------------------------------------------------------------------------


def test_at_end_greeting_last_reply_new_turn(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    synced = synced_as_sent(user, [SYSTEM, GREETING, turns[40], GO], "long")
    assert (synced.chat.pk, synced.mode, synced.message, synced.written) == (chat.pk, NEW, GO.content, NOTHING)
    assert synced.indices == [0, 40, None] and origins(chat) == list(range(41))


def test_at_end_greeting_and_last_reply_continue(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    synced = synced_as_sent(user, [SYSTEM, GREETING, turns[40]], "long")
    assert (synced.mode, synced.written, synced.indices) == (CONTINUE, NOTHING, [0, 40])
    assert origins(chat) == list(range(41))


def test_at_end_window_straddling_a_deleted_exchange(user):
    """A front end keeping the greeting and the newest 10 messages; the person deletes #30 and #31, so the window
    is [#29, #32 .. #40] (its first two do not stand together: the window search fails, _at_end places it)."""
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = [GREETING, turns[29], *turns[32:], GO]
    synced = synced_as_sent(user, [SYSTEM, *sent], "long")
    assert synced.chat.pk == chat.pk
    # Expected: #30, #31 deleted (or, as a cut, kept), the rest as it was; never a message written over another.
    assert texts(chat) in ([line.content for line in without(turns, 30, 31)], [line.content for line in turns])


def test_at_end_window_straddling_a_single_deleted_message_deletes_it_alone(user):
    """[#30, #32..#40]: the rest's first message stands before where it would be counted back from the chat's end:
    compared from there, #31 alone is deleted (before, placed at #31, it was answered and not stored, and so was
    each later turn until the window passed the gap)."""
    turns = telling(40)
    chat = story(user, turns, "long")
    synced = synced_as_sent(user, [SYSTEM, GREETING, turns[30], *turns[32:], GO], "long")
    assert (synced.mode, synced.message, synced.written) == (NEW, "Go on.", {**NOTHING, "deleted": 1})
    assert origins(chat) == [n for n in range(41) if n != 31]


def test_at_end_same_newest_message_twice_reads_as_regenerate(user):
    """The chat ends "Go on." / "*nods*" twice; the person says "Go on." again, the front end sending the greeting,
    the last reply and the new turn. The regenerate try is taken first: the person's new message is read as #39 and
    the reply becomes a swipe of #40. Ambiguous by the texts (the regenerate of #40 sends the same); recorded."""
    turns = telling(40)
    turns[37] = turns[39] = GO
    turns[38] = turns[40] = Line("assistant", "*nods*")
    chat = story(user, turns, "long")
    synced = synced_as_sent(user, [SYSTEM, GREETING, turns[40], GO], "long")
    assert synced.mode == SWIPE and synced.message is None
    assert origins(chat) == list(range(41))


def test_restart_whose_first_words_are_the_persons_last_reads_as_regenerate(user):
    """Docs: greeting + a new first message alone = the story begun again (named: written over the chat). Words equal
    to the person's last message ("hi") read instead as a regenerate of the last reply (_at_end's try): the story
    is kept. Ambiguous (a greeting-and-newest front end's regenerate sends the same); recorded."""
    turns = telling(40)
    turns[39] = Line("user", "hi")
    chat = story(user, turns, "long")
    synced = synced_as_sent(user, [SYSTEM, GREETING, Line("user", "hi")], "long")
    assert synced.mode == SWIPE and origins(chat) == list(range(41))


def test_restart_greeting_first_words_and_a_reply_equal_to_the_chats_last(user):
    """The person began again: greeting, their first words again (the chat's #1), the model's reply "*nods*" (the
    chat's last reply too), a new turn. _at_end (head 2, the rest [*nods*, new]) finds "*nods*" as the chat's last
    and reads this as the chat's end: nothing deleted. A named chat then goes on at its old end."""
    turns = telling(40)
    turns[40] = Line("assistant", "*nods*")
    chat = story(user, turns, "long")
    synced = synced_as_sent(user, [SYSTEM, GREETING, turns[1], Line("assistant", "*nods*"), GO], "long")
    assert synced.written == NOTHING and synced.message == GO.content
    assert synced.indices == [0, 1, 40, None] and synced.chat.pk == chat.pk


@pytest.mark.parametrize("kept", [1, 2, 3, 4])
def test_at_end_head_of_several_then_only_last_reply(user, kept):
    intro = [GREETING, *[Line("assistant", f"Intro {n}: the harbour at night.") for n in (1, 2, 3)]]
    turns = [*intro, *[Line("assistant" if n % 2 else "user", f"Turn {n} of the story.") for n in range(4, 45)]]
    turns = turns[:44]
    chat = story(user, turns, "long")
    synced = synced_as_sent(user, [SYSTEM, *turns[:kept], turns[43], GO], "long")
    assert (synced.chat.pk, synced.message, synced.written) == (chat.pk, GO.content, NOTHING)
    assert synced.indices == [*range(kept), 43, None]


def indices_hold(chat: Chat, lines: list[Line], synced) -> bool:
    """synced.indices: each history message's index in the chat holding exactly its text (or None)."""
    history = [line for line in lines if line.role != "system"]
    stored = dict(chat.messages.values_list("index", "mes"))
    if len(synced.indices) != len(history):
        return False
    pairs = zip(synced.indices, history, strict=True)
    return all(index is None or stored.get(index) == line.content for index, line in pairs)


@pytest.mark.parametrize("gone", [(34,), (33, 34), (39,), (2, 3)])
def test_indices_after_a_deletion_point_at_the_messages(user, gone):
    turns = telling(40)
    chat = story(user, turns, "long", hidden=(36,))
    sent = [line for n, line in enumerate(turns) if n not in gone and n != 36]
    lines = [SYSTEM, *sent, GO]
    synced = synced_as_sent(user, lines, "long")
    assert indices_hold(chat, lines, synced)


def test_trimmed_window_without_greeting_and_a_deletion_inside_named(user):
    """A front end that trims (no greeting kept), the person deleting #34 inside its window: only #34 goes."""
    turns = telling(40)
    chat = story(user, turns, "long")
    lines = [SYSTEM, *without(turns, 34)[30:], GO]
    synced = synced_as_sent(user, lines, "long")
    assert (synced.message, synced.written) == (GO.content, {**NOTHING, "deleted": 1})
    assert origins(chat) == [n for n in range(41) if n != 34] and indices_hold(chat, lines, synced)


def test_a_front_end_keeping_more_than_four_first_messages_deletes_the_middle(user):
    """A front end keeping the first six messages (past HEAD_KEPT) and the newest twenty: rule 1 reads the skipped
    middle as deleted in the front end (15 messages), where it was a cut. Documented ("at most the chat's first four
    messages"), recorded: with dropped_count disabled the same 15 go too, and the 20 after them are deleted and
    written again (35 deleted, 20 appended), so the rule loses less."""
    turns = telling(40)
    chat = story(user, turns, "long")
    synced = synced_as_sent(user, [SYSTEM, *turns[:6], *turns[21:], GO], "long")
    assert synced.written == {**NOTHING, "deleted": 15}
    assert len(texts(chat)) == 26


def test_messages_hidden_in_sillytavern_only_are_deleted(user):
    """Messages hidden in SillyTavern (/hide 20-25; not sent), the chat here not knowing them hidden: rule 1 deletes
    them (they cannot be told from deleted ones). Recorded: with dropped_count disabled the six go too, and every
    later message is "edited" to its neighbour's words (16 edits, 5 deleted: swipes under the wrong text)."""
    turns = telling(40)
    chat = story(user, turns, "long")
    synced = synced_as_sent(user, [SYSTEM, *without(turns, *range(20, 26)), GO], "long")
    assert synced.written == {**NOTHING, "deleted": 6}
    assert origins(chat) == [n for n in range(41) if not 20 <= n < 26]


def test_guessed_kept_opening_and_last_reply_goes_on_at_the_stories_end(user):
    """Without the header, the greeting and the person's first words (so the fingerprint finds the story), then the
    last reply and a new turn: _at_end (in history_sync, for a guessed chat too) places it at the story's end.
    Docs say such histories begin a new chat without the header; recorded (nothing lost either way)."""
    turns = telling(40)
    chat = story(user, turns)
    lines = [SYSTEM, GREETING, turns[1], turns[40], GO]
    synced = synced_as_sent(user, lines, "")
    assert (synced.chat.pk, synced.message, synced.written) == (chat.pk, GO.content, NOTHING)
    assert synced.indices == [0, 1, 40, None]


def test_guessed_second_conversation_same_first_words_a_common_reply(user):
    """Hostile: a second conversation of the same card with the same first words ("hi"), whose reply happens to be
    the story's last reply ("*smiles*"). Its first request goes to a branch (docs); its second must not be appended
    to the story."""
    turns = telling(40)
    turns[1] = Line("user", "hi")
    turns[40] = Line("assistant", "*smiles*")
    chat = story(user, turns)
    first = synced_as_sent(user, [SYSTEM, GREETING, Line("user", "hi")])
    assert first.chat.pk != chat.pk
    answered(first.chat, Line("assistant", "*smiles*"))
    second = synced_as_sent(user, [SYSTEM, GREETING, Line("user", "hi"), Line("assistant", "*smiles*"), GO])
    assert second.chat.pk == first.chat.pk
    assert texts(chat) == [line.content for line in turns]


def test_guessed_second_conversation_reply_not_stored_stays_in_its_branch(user):
    """As above, but the branch's first reply was never stored (the stream dropped; the front end kept it): the
    history agrees with the story and the branch alike as far as "hi"; it goes on in the branch (nearest length),
    not at the story's end (where _at_end would find "*smiles*")."""
    turns = telling(40)
    turns[1] = Line("user", "hi")
    turns[40] = Line("assistant", "*smiles*")
    chat = story(user, turns)
    first = synced_as_sent(user, [SYSTEM, GREETING, Line("user", "hi")])
    second = synced_as_sent(user, [SYSTEM, GREETING, Line("user", "hi"), Line("assistant", "*smiles*"), GO])
    assert second.chat.pk == first.chat.pk != chat.pk
    assert texts(chat) == [line.content for line in turns]


R40 = Line("assistant", "Turn 40 of the long")  # trimmed by the person
U39 = Line("user", "Turn 39 of the story, said otherwise.")


@pytest.mark.parametrize("shape", ["reply_edited_then_new_turn", "reply_edited_then_continue", "turn_edited_regen"])
def test_greeting_and_newest_front_end_edits_its_newest_message(user, shape):
    """A front end whose context keeps the greeting and only the newest message (the case _at_end is for): the
    person trims the last reply and sends a turn (or continues it), or edits their last message and regenerates
    (the window then holds the reply before it too). Expected: that one message edited, nothing deleted."""
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = {"reply_edited_then_new_turn": [GREETING, R40, GO], "reply_edited_then_continue": [GREETING, R40],
            "turn_edited_regen": [GREETING, turns[38], U39]}[shape]  # fmt: skip
    synced = synced_as_sent(user, [SYSTEM, *sent], "long")
    assert synced.written == {**NOTHING, "edited": 1}
    mode, message, at, edit = {
        "reply_edited_then_new_turn": (NEW, GO.content, 40, R40),
        "reply_edited_then_continue": (CONTINUE, None, 40, R40),
        "turn_edited_regen": (SWIPE, None, 39, U39),
    }[shape]
    assert (synced.mode, synced.message) == (mode, message)
    expected = [line.content for line in turns]
    expected[at] = edit.content
    assert texts(chat) == expected
    assert origins(chat) == list(range(41))


def test_greeting_and_newest_edited_then_the_story_goes_on_being_stored(user):
    """After that edit, the front end sends the greeting, the reply it got and the next turn: found where the chat
    ends, as before the edit (answered and not stored, the edit would have left every later turn unstored)."""
    turns = telling(40)
    chat = story(user, turns, "long")
    synced = synced_as_sent(user, [SYSTEM, GREETING, R40, GO], "long")
    assert synced.message == GO.content
    reply = Line("assistant", "The reply to go on.")
    answered(chat, GO, reply)
    go_on = Line("user", "And then?")
    synced = synced_as_sent(user, [SYSTEM, GREETING, reply, go_on], "long")
    assert (synced.chat.pk, synced.message, synced.written) == (chat.pk, go_on.content, NOTHING)
    assert texts(chat)[-3:] == [R40.content, GO.content, reply.content]


def test_greeting_and_a_newest_message_sharing_few_words_with_the_chats_is_not_stored(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    synced = synced_as_sent(user, [SYSTEM, GREETING, Line("assistant", "Something else entirely."), GO], "long")
    assert (synced.mode, synced.written) == (IMP, NOTHING) and origins(chat) == list(range(41))


def test_greeting_last_two_with_the_last_reply_edited_is_not_stored(user):
    """The same edit with two newest messages kept: compared from the start it is a misfit (answered, not stored):
    safe, though the turn is lost."""
    turns = telling(40)
    chat = story(user, turns, "long")
    synced = synced_as_sent(user, [SYSTEM, GREETING, turns[39], R40, GO], "long")
    assert (synced.mode, synced.written) == (IMP, NOTHING) and origins(chat) == list(range(41))


# 7. Short chats, odd histories: no crash, nothing invented ----------------------------------------------------------


SHORT = [
    [GREETING],
    [GREETING, Line("user", "a")],
    [GREETING, Line("user", "a"), Line("assistant", "b")],
    [GREETING, Line("user", "a"), Line("assistant", "b"), Line("user", "c")],
    [GREETING, Line("user", "ok"), Line("assistant", "ok"), Line("user", "ok"), Line("assistant", "ok")],
]


@pytest.mark.parametrize("header", ["", "long"])
@pytest.mark.parametrize("size", range(len(SHORT)))
def test_short_chats_against_odd_histories(user, header, size):
    """A chat of 1-5 messages, each of many odd histories: only system messages, empty texts, the history longer
    than the chat, the chat's messages out of order, the greeting alone, a lone reply. Nothing raises, and a
    history that is the chat less a block (then a new turn) leaves the chat holding that history."""
    turns = SHORT[size]
    histories = [
        [SYSTEM],
        [SYSTEM, Line("system", "x")],
        [Line("user", "")],
        [GREETING],
        [Line("assistant", "b")],
        [*turns, *turns],
        list(reversed(turns)),
        [turns[0], turns[-1]],
        [turns[0], turns[-1], GO],
        [turns[-1], GO],
        [*turns, IMPERSONATE],
        [*turns, QUIET],
        [*turns[:-1]],
        [GREETING, GO],
    ]
    for history in histories:
        Chat.objects.all().delete()
        story(user, turns, header) if turns[-1].role == "assistant" else _stored_raw(user, turns, header)
        synced_as_sent(user, [SYSTEM, *history], header)  # must not raise


def _stored_raw(user, turns: list[Line], header: str) -> Chat:
    chat = synced_as_sent(user, [SYSTEM, *turns[:-1]], header).chat
    answered(chat, turns[-1])
    return Chat.objects.get(pk=chat.pk)


@pytest.mark.parametrize("opening", [5, 6, 8])
@pytest.mark.parametrize("turn", [True, False], ids=["turn", "continue"])
def test_named_longer_opening_then_the_chats_end_is_not_stored(user, opening, turn):
    """The chat's first messages, more than a kept greeting's HEAD_KEPT, then its last 20 of 200: a front end that
    keeps more of the opening past its cut, or a block deleted far larger than what is kept. Answered, not stored:
    with five, the speakers parted at once and 196 messages were deleted, 21 written again."""
    turns = telling(200)
    chat = story(user, turns, "long")
    sent = [*turns[:opening], *turns[180:]]
    synced = synced_as_sent(user, [SYSTEM, *sent, *([GO] if turn else [])], "long")
    assert (synced.mode, synced.written) == (IMP, NOTHING)
    assert origins(chat) == list(range(201))


# 8. A property: a named history that is the chat less one block (then maybe a new turn) ----------------------------


def test_property_named_block_deletions_with_repeated_texts(user):
    """Random chats of 4-14 messages over a three-word vocabulary (repeats everywhere); the person deletes one block
    (anywhere) and sends, perhaps with a new turn. Whatever the rule or the comparison decides, the chat must end as
    the history (or, if the kept-greeting path read it as a cut, hold every message sent in order, the new turn
    last), or the request be answered and not stored with the chat untouched."""
    rng = random.Random(20261129)
    failures = []
    for case in range(120):
        size = rng.randint(4, 14)
        words = ["ok", "...", "*nods*"]
        turns = [GREETING, *[Line("user" if n % 2 else "assistant", rng.choice(words)) for n in range(1, size)]]
        if turns[-1].role == "user":
            turns.append(Line("assistant", rng.choice(words)))
        Chat.objects.all().delete()
        chat = story(user, turns, "long", tagged=False)
        start = rng.randint(1, len(turns) - 2)
        length = rng.randint(1, len(turns) - 1 - start)
        sent = [line for n, line in enumerate(turns) if not start <= n < start + length]
        new = rng.random() < 0.6
        lines = [SYSTEM, *sent, *([GO] if new else [])]
        synced = synced_as_sent(user, lines, "long")
        after = texts(Chat.objects.get(pk=chat.pk))
        want = [line.content for line in sent]
        if synced.mode == IMP:
            ok = after == [line.content for line in turns]
        elif synced.mode == SWIPE:  # the history (its new turn too) then the old reply, a swipe; or, read as a
            # kept greeting and a window (the deleted messages kept), every message sent in order
            full = [*want, *([GO.content] if new else [])]
            ok = after[:-1] == full or _holds_in_order(after[:-1], full)
        else:
            ok = after == want or _holds_in_order(after, want)
        if not ok:
            failures.append((case, [t.content for t in turns], (start, length), new, synced.mode, after))
    for failure in failures:
        print(failure)
    assert not failures, failures[:5]


def _holds_in_order(stored: list[str], sent: list[str]) -> bool:
    it = iter(stored)
    return all(any(s == x for x in it) for s in sent) and stored[:1] == sent[:1]


def _subsequence(stored: list[str], sent: list[str]) -> bool:
    it = iter(stored)
    return all(any(s == x for x in it) for s in sent)


def test_property_guessed_block_deletions_with_repeated_texts(user):
    """As above without the header: the story is left as it was and a branch holds the history, or (within the last
    exchange, or read as a kept greeting) the story holds every message sent, in order."""
    rng = random.Random(11291)
    failures = []
    for case in range(100):
        size = rng.randint(4, 12)
        turns = [
            GREETING,
            Line("user", "I am Rowan."),
            *[Line("user" if n % 2 else "assistant", rng.choice(["ok", "...", "*nods*"])) for n in range(2, size)],
        ]
        if turns[-1].role == "user":
            turns.append(Line("assistant", rng.choice(["ok", "..."])))
        Chat.objects.all().delete()
        chat = story(user, turns, tagged=False)
        start = rng.randint(2, len(turns) - 2)
        length = rng.randint(1, len(turns) - 1 - start)
        sent = [line for n, line in enumerate(turns) if not start <= n < start + length]
        new = rng.random() < 0.6
        synced = synced_as_sent(user, [SYSTEM, *sent, *([GO] if new else [])])
        full = [line.content for line in sent] + ([GO.content] if new else [])
        story_after = texts(Chat.objects.get(pk=chat.pk))
        if synced.chat.pk != chat.pk:
            ok = story_after == [line.content for line in turns] and _subsequence(texts(synced.chat), full[:-1])
        else:
            ok = _subsequence(story_after, full if not (new and synced.message) else full[:-1])
        if not ok:
            failures.append((case, [t.content for t in turns], (start, length), new, synced.mode, story_after))
    for failure in failures:
        print(failure)
    assert not failures, failures[:5]


def test_property_odd_histories_with_hidden_messages_never_raise_or_lose_what_was_sent(user):
    """Random chats of 2-12 messages (repeated words, random hidden ones) and random histories: a subsequence of
    the chat's shown messages (perhaps the greeting kept ahead), perhaps a new turn, perhaps Impersonate, a quiet
    prompt or the continue nudge; with the header and without. Nothing raises; a request that is stored leaves
    every message it sent in the chat it went to, in order."""
    rng = random.Random(7)
    failures = []
    for case in range(150):
        header = rng.choice(["", "long"])
        size = rng.randint(2, 12)
        turns = [GREETING, *[Line("user" if n % 2 else "assistant", rng.choice(["ok", "...", f"T{n}"]))
                             for n in range(1, size)]]  # fmt: skip
        if turns[-1].role == "user":
            turns.append(Line("assistant", rng.choice(["ok", "The end."])))
        hidden = tuple(n for n in range(len(turns)) if rng.random() < 0.15)
        Chat.objects.all().delete()
        story(user, turns, header, hidden=hidden, tagged=False)
        shown = [line for n, line in enumerate(turns) if n not in hidden]
        keep = sorted(rng.sample(range(len(shown)), rng.randint(1, len(shown))))
        sent = [shown[n] for n in keep]
        if rng.random() < 0.3 and sent[0] != GREETING:
            sent = [GREETING, *sent]
        tail = rng.choice([[], [GO], [GO], [IMPERSONATE], [QUIET], [NUDGE]])
        lines = [SYSTEM, *sent, *tail]
        try:
            synced = synced_as_sent(user, lines, header)
        except Exception as exc:  # noqa: BLE001
            failures.append((case, "raised", repr(exc), [t.content for t in turns], hidden, lines))
            continue
        if synced.mode == IMP:
            continue
        after = list(synced.chat.messages.filter(is_system=False).order_by("index").values_list("mes", flat=True))
        want = [line.content for line in lines if line.role != "system"]
        if synced.message is not None:
            want = want[:-1]
        if not _subsequence(after, want):
            failures.append((case, header, [t.content for t in turns], hidden, [line.content for line in lines],
                             synced.mode, after))  # fmt: skip
    for failure in failures:
        print(failure)
    assert not failures, failures[:3]


# 9. Performance on a 2,000-message chat ---------------------------------------------------------------------------


@pytest.fixture
def long_story(user):
    turns = telling(2000)  # 2,001 messages
    chat = story(user, turns, "long", tagged=False)
    return turns, chat


QUERY_BOUND = 40


def test_queries_deleting_one_message_amid_2000(user, long_story):
    turns, chat = long_story
    sent = without(turns, 1000)
    with CaptureQueriesContext(db_connection) as queries:
        synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.written == {**NOTHING, "deleted": 1}
    assert len(queries) <= QUERY_BOUND, len(queries)


def test_queries_deleting_a_block_of_100_amid_2000(user, long_story):
    turns, chat = long_story
    sent = [line for n, line in enumerate(turns) if not 1000 <= n < 1100]
    with CaptureQueriesContext(db_connection) as queries:
        synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.written == {**NOTHING, "deleted": 100}
    assert texts(chat) == [line.content for line in sent]
    assert len(queries) <= QUERY_BOUND, len(queries)


def test_queries_deleting_the_last_501_of_2001(user, long_story):
    turns, chat = long_story
    with CaptureQueriesContext(db_connection) as queries:
        synced = synced_as_sent(user, [SYSTEM, *turns[:1500], GO], "long")
    assert synced.written == {**NOTHING, "deleted": 501}
    assert texts(chat) == [line.content for line in turns[:1500]] and synced.message == GO.content
    assert len(queries) <= QUERY_BOUND, len(queries)


@pytest.mark.parametrize("shape", ["last_reply", "edited_window_start", "straddle"])
def test_queries_at_end_on_2000(user, long_story, shape):
    turns, chat = long_story
    if shape == "last_reply":
        sent = [GREETING, turns[-1], GO]
    elif shape == "edited_window_start":
        sent = [GREETING, Line("assistant", "Edited."), *turns[1981:], GO]
    else:
        sent = [GREETING, turns[1979], *turns[1982:], GO]
    with CaptureQueriesContext(db_connection) as queries:
        synced_as_sent(user, [SYSTEM, *sent], "long")
    assert len(queries) <= QUERY_BOUND, len(queries)


def test_queries_deletion_inside_a_kept_greeting_window_on_2000(user, long_story):
    turns, chat = long_story
    sent = [GREETING, *without(turns, 1990)[1970:], GO]
    with CaptureQueriesContext(db_connection) as queries:
        synced = synced_as_sent(user, [SYSTEM, *sent], "long")
    assert synced.written == {**NOTHING, "deleted": 1}
    assert len(queries) <= QUERY_BOUND, len(queries)
