"""Red team of the aligned reading (services/aligning.py `aligned`, services/writing.py `aligned_written`): a history
leaving out messages amid the chat along with other changes, read message by message against the chat.

Each stored story is tagged (tests/gateway/test_sync_rules.py `story`: every message carries a swipe naming it), so
`origins` tells whether a message kept its identity or was deleted and written again (or written over with another
message's words). Expectations that fail today are xfail(strict=True) with what happens and why."""

from __future__ import annotations

import time

import pytest
from django.db import connection as db_connection
from django.test.utils import CaptureQueriesContext

from apps.chats.models import Chat
from apps.chats.selectors import HistoryDigests
from apps.gateway.services.aligning import aligned
from apps.gateway.services.placing import DIGESTS
from apps.gateway.services.request import Line
from apps.generation.models import Generation
from tests.gateway.stories import GREETING, SYSTEM, answered, synced_as_sent, telling
from tests.gateway.test_sync_aligned import edited
from tests.gateway.test_sync_rules import GO, IMPERSONATE, NOTHING, NUDGE, QUIET, origins, story, texts, without

pytestmark = pytest.mark.django_db

NEW, SWIPE, CONTINUE, IMP = (Generation.Mode.NEW, Generation.Mode.SWIPE, Generation.Mode.CONTINUE,
                             Generation.Mode.IMPERSONATE)  # fmt: skip


def contents(lines: list[Line]) -> list[str]:
    return [line.content for line in lines]


def kept_but(count: int, *gone: int) -> list[int]:
    return [n for n in range(count) if n not in gone]


def respaced(line: Line) -> Line:
    return Line(line.role, f"  {line.content.replace(' ', '  ')}\n")


# 1. Control: the rule as meant, and its repeat writes nothing ---------------------------------------------------


def test_control_two_blocks_an_edit_and_a_turn_keep_every_other_message(user):
    turns = telling(60)
    chat = story(user, turns, "long")
    sent = without(edited(turns, 45), 10, 11, 30)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert (synced.mode, synced.message) == (NEW, GO.content)
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 3}
    assert texts(chat) == contents(sent)
    assert origins(chat) == kept_but(61, 10, 11, 30)
    assert synced.indices == [*range(len(sent)), None]


@pytest.mark.parametrize("last", ["turn", "regenerate", "continue", "impersonate", "quiet"])
def test_the_same_request_again_writes_nothing(user, last):
    """After the deletion and edit are written, the identical request (a retry, or the next one before the reply is
    stored) finds the chat as it sends it: nothing written, the same mode."""
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(edited(turns, 12), 20)
    tail = {"turn": [GO], "regenerate": [], "continue": [], "impersonate": [IMPERSONATE], "quiet": [QUIET]}[last]
    if last == "regenerate":
        sent = sent[:-1]
    lines = [SYSTEM, *sent, *tail]
    first = synced_as_sent(user, lines, "long")
    assert first.written["deleted"] == 1 and first.written["edited"] == 1
    after = origins(chat)
    second = synced_as_sent(user, lines, "long")
    assert second.written == NOTHING
    assert (second.mode, second.message) == (first.mode, first.message)
    assert origins(chat) == after


# 2. Data loss: a deletion next to an edit, or next to a message spaced otherwise --------------------------------
# The pairs between anchors are chosen by speaker and by the words each message keeps (services/aligning.py): a
# message deleted next to one edited (or spaced otherwise) is told from it.


@pytest.mark.parametrize("gone", [(20,), (30,), (20, 21), (30, 31)])
def test_a_deletion_right_before_an_edited_message_named(user, gone):
    """The person deletes #n (or the exchange) and edits the message right after it, then writes a turn."""
    turns = telling(40)
    chat = story(user, turns, "long")
    after = gone[-1] + 1
    sent = without(edited(turns, after), *gone)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert (synced.mode, synced.message) == (NEW, GO.content)
    assert synced.written == {**NOTHING, "edited": 1, "deleted": len(gone)}
    assert texts(chat) == contents(sent)
    kept = origins(chat)  # (an exchange deleted before a reply edited: which reply went cannot be told)
    assert kept[: gone[0]] == list(range(gone[0])) and kept[gone[0] + 1 :] == list(range(after + 1, 41))


@pytest.mark.parametrize("gone", [(20,), (20, 21), (30, 31)])
def test_a_deletion_right_after_an_edited_message_named(user, gone):
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(edited(turns, gone[0] - 1, 35), *gone)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert (synced.mode, synced.message) == (NEW, GO.content)
    assert synced.written == {**NOTHING, "edited": 2, "deleted": len(gone)}
    assert texts(chat) == contents(sent)
    assert origins(chat) == kept_but(41, *gone)


@pytest.mark.parametrize("gone", [20, 30])
def test_a_deletion_next_to_a_message_spaced_otherwise_and_an_edit_named(user, gone):
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(edited(turns, 38), gone)
    sent[gone] = respaced(sent[gone])  # the chat's next message, right after the deletion
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert (synced.mode, synced.message) == (NEW, GO.content)
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 1}
    assert texts(chat) == contents(without(edited(turns, 38), gone))
    assert origins(chat) == kept_but(41, gone)


def test_a_story_after_a_deletion_next_to_an_edit_goes_on_being_stored(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(edited(turns, 21), 20)
    synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    second = [*sent, GO, Line("assistant", "The reply the front end shows."), Line("user", "Next.")]
    synced = synced_as_sent(user, [SYSTEM, *second], "long")
    assert (synced.mode, synced.message) == (NEW, "Next.")
    assert texts(chat) == contents(second[:-1])


def test_a_greeting_spaced_otherwise_with_a_deletion_and_an_edit_named(user):
    """The front end builds the greeting itself and sends it spaced otherwise than the chat holds it."""
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(edited(turns, 35), 20)
    sent[0] = respaced(sent[0])
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 1}
    assert origins(chat) == kept_but(41, 20)


def test_many_messages_spaced_otherwise_with_deletions_and_an_edit_named(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(edited(turns, 35), 10, 20)
    sent = [sent[0], *[respaced(line) if n % 3 == 0 else line for n, line in enumerate(sent[1:], 1)]]
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 2}
    assert origins(chat) == kept_but(41, 10, 20)


def test_a_deletion_and_an_edit_one_message_apart_named(user):
    """Control for the above: one message kept between the deletion and the edit, the reading holds."""
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = without(edited(turns, 22), 20)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 1}
    assert origins(chat) == kept_but(41, 20)


# 3. Guessed chats: never rewritten before the last exchange ----------------------------------------------------


@pytest.mark.parametrize("gone", [(20,), (20, 21), (37, 38)])
def test_guessed_deletion_and_a_turn_edited_goes_on_in_a_branch(user, gone):
    turns = telling(40)
    chat = story(user, turns)
    sent = without(edited(turns, 39), *gone)
    synced = synced_as_sent(user, [SYSTEM, *sent])
    assert synced.chat.pk != chat.pk
    assert origins(chat) == list(range(41)) and texts(chat) == contents(turns)


def test_guessed_an_earlier_edit_and_the_last_turn_deleted_keeps_the_last_reply(user):
    """Guessed: #10 edited (one earlier edit alone is written in place) and the person's last message (#39, in the
    last exchange) deleted, then a new turn. Nothing before the last exchange is deleted; the last reply keeps its
    swipes."""
    turns = telling(40)
    chat = story(user, turns)
    sent = without(edited(turns, 10), 39)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO])
    assert synced.chat.pk == chat.pk  # in place, as the comparison writes an earlier edit alone
    assert texts(chat) == contents(sent)
    assert origins(chat) == kept_but(41, 39)


def test_guessed_kept_greeting_window_with_a_deletion_and_an_edit(user):
    turns = telling(60)
    chat = story(user, turns)
    sent = [turns[0], *without(edited(turns, 50), 40)[30:]]
    synced = synced_as_sent(user, [SYSTEM, *sent, GO])
    assert origins(chat) == list(range(61)) and texts(chat) == contents(turns)
    assert synced.chat.pk != chat.pk or synced.written["deleted"] == 0


# 4. Modes and turns -------------------------------------------------------------------------------------------------


OK = Line("user", "ok")
ENDINGS = {
    # (the last reply repeated too, what follows the history, the mode, the person's turn)
    "new_turn_equal_to_the_persons_last_message": (False, [OK], NEW, "ok"),
    "new_turn_equal_to_the_last_exchange_repeated": (True, [OK], NEW, "ok"),
    "regenerate_with_the_last_exchange_repeated": (True, None, SWIPE, None),  # ends with #39, "ok": #40 again
    "continue_with_the_last_exchange_repeated": (True, [NUDGE], CONTINUE, None),
}


@pytest.mark.parametrize("ending", ENDINGS.values(), ids=ENDINGS.keys())
def test_a_turn_repeated_at_the_end(user, ending):
    """The person's last two turns are the same "ok" (and perhaps the replies to them the same "..."); #20 deleted
    and #12 edited, then a new "ok", a regenerate or a continue."""
    replies, after, mode, message = ending
    turns = telling(40)
    turns[37] = turns[39] = OK
    if replies:
        turns[38] = turns[40] = Line("assistant", "...")
    chat = story(user, turns, "long")
    sent = without(edited(turns, 12), 20)
    sent = [*sent, *after] if after is not None else sent[:-1]
    synced = synced_as_sent(user, [SYSTEM, *sent], "long")
    assert (synced.mode, synced.message) == (mode, message)
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 1}
    assert origins(chat) == kept_but(41, 20)


def test_impersonate_with_the_turn_already_stored(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    answered(chat, Line("user", "Unanswered."))
    sent = [*without(edited(turns, 12), 20), Line("user", "Unanswered.")]
    synced = synced_as_sent(user, [SYSTEM, *sent, IMPERSONATE], "long")
    assert (synced.mode, synced.message) == (IMP, None)
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 1}
    assert texts(chat) == contents(sent)


def test_the_persons_turn_already_stored_deletion_and_edit(user):
    """The last generation failed: the chat ends with the person's message, which the history ends with too."""
    turns = telling(40)
    chat = story(user, turns, "long")
    answered(chat, Line("user", "Unanswered."))
    sent = [*without(edited(turns, 12), 20), Line("user", "Unanswered.")]
    synced = synced_as_sent(user, [SYSTEM, *sent], "long")
    assert (synced.mode, synced.message) == (NEW, None)
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 1}
    assert texts(chat) == contents(sent)
    assert synced.indices == list(range(len(sent)))


def test_the_persons_stored_turn_replaced_by_a_new_one(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    answered(chat, Line("user", "Unanswered."))
    sent = [*without(edited(turns, 12), 20), GO]
    synced = synced_as_sent(user, [SYSTEM, *sent], "long")
    # The new turn shares no words with the unanswered one: that one deleted, the new one the person's turn.
    assert (synced.message, synced.written) == (GO.content, {"appended": 0, "edited": 1, "deleted": 2})
    assert texts(chat) == contents(sent[:-1])
    assert origins(chat) == kept_but(41, 20)


# 5. Repeated texts and hidden messages -------------------------------------------------------------------------


def test_a_run_of_ok_with_an_exchange_deleted_and_an_edit_elsewhere(user):
    turns = telling(40)
    for n in range(20, 33):
        turns[n] = Line(turns[n].role, "ok" if n % 2 else "...")
    chat = story(user, turns, "long")
    sent = without(edited(turns, 36), 25, 26)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 2}
    assert texts(chat) == contents(sent)
    kept = origins(chat)
    assert kept[:20] == list(range(20)) and kept[31:] == list(range(33, 41))


@pytest.mark.parametrize("hidden", [(19,), (21,), (20, 22), (35,)])
def test_hidden_messages_next_to_a_deletion_and_an_edit(user, hidden):
    turns = telling(40)
    chat = story(user, turns, "long", hidden=hidden)
    sent = without(edited(turns, 30), 20, *hidden)
    if 20 in hidden:
        sent = without(edited(turns, 30), 21, *hidden)
        gone = 21
    else:
        gone = 20
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 1}
    assert origins(chat) == kept_but(41, gone)
    flags = list(chat.messages.order_by("index").values_list("is_system", flat=True))
    assert [n for n, flag in zip(kept_but(41, gone), flags, strict=True) if flag] == list(hidden)


# 6. Misfits that are no deletions -------------------------------------------------------------------------------


def test_a_side_request_sharing_opening_and_end(user):
    """A named side request: the chat's first ten messages, its own exchange, then the chat's last two."""
    turns = telling(40)
    chat = story(user, turns, "long")
    side = [*turns[:10], *[Line("user" if n % 2 else "assistant", f"Side {n}.") for n in range(1, 9)]]
    synced = synced_as_sent(user, [SYSTEM, *side, *turns[39:], GO], "long")
    assert origins(chat) == list(range(41))
    assert synced.written["deleted"] == 0


def test_more_left_out_than_kept_with_an_edit_is_not_written_named(user):
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = [*turns[:10], *edited(turns, 35)[30:]]
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert origins(chat) == list(range(41)), synced.written


def test_every_other_exchange_kept_is_not_read_as_deletions(user):
    """A trimmed summary of the story: every other exchange, with the last reply reworded."""
    turns = telling(40)
    chat = story(user, turns, "long")
    sent = [turns[0], *[line for n, line in enumerate(turns) if n and (n - 1) % 4 < 2]]
    sent[-1] = Line(sent[-1].role, "A reworded reply.")
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert origins(chat) == list(range(41)), synced.written


def test_a_trimmed_window_named_with_a_deletion_and_an_edit(user):
    """A front end that sends only the newest 20 messages (no greeting): the window placed, the deletion and the
    edit inside it written, nothing before it touched."""
    turns = telling(60)
    chat = story(user, turns, "long")
    sent = without(edited(turns, 55), 50)[41:]
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 1}
    assert origins(chat) == kept_but(61, 50)


def test_a_kept_greeting_window_with_two_blocks_and_an_edit(user):
    turns = telling(60)
    chat = story(user, turns, "long")
    sent = [turns[0], *without(edited(turns, 58), 40, 41, 50)[30:]]
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 3}
    assert origins(chat) == kept_but(61, 40, 41, 50)


def test_a_kept_greeting_window_whose_first_message_is_deleted(user):
    """The front end kept the greeting and #31 on; the person deleted #31-32 (the window's first exchange) and
    edited #55: the cut (#1-30) is kept, not read as deleted."""
    turns = telling(60)
    chat = story(user, turns, "long")
    sent = [turns[0], *without(edited(turns, 55), 31, 32)[31:]]
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    kept = origins(chat)
    assert kept[:31] == list(range(31)), synced.written


# 7. Cost ---------------------------------------------------------------------------------------------------------


def hostile(pairs: int, repeats: int) -> tuple[list[Line], list[Line]]:
    """A chat and a history that shares only its greeting, each exchange's first message and `repeats` of the
    person's "ok": every match one message long (the replies differ), the repeats at the end."""
    ours, theirs = [GREETING], [GREETING]
    for n in range(pairs):
        said = Line("user", "ok") if n >= pairs - repeats else Line("user", f"Word {n}.")
        ours += [said, Line("assistant", f"Stored reply {n}.")]
        theirs += [said, Line("assistant", f"Sent reply {n}.")]
    return ours, theirs


def digests_of(turns: list[Line]) -> HistoryDigests:
    return HistoryDigests(
        list(range(len(turns))),
        "".join("u" if line.role == "user" else "a" for line in turns),
        "".join(DIGESTS.of(line.content) for line in turns),
    )


def timed_reading(turns: list[Line], sent: list[Line], same: int):
    """The reading of `sent` against `turns` (no database: the chat's texts are the turns), and its time in ms,
    printed (never asserted)."""
    began = time.perf_counter()
    reading = aligned(sent, digests_of(turns), same, answered=False, read=lambda at: {p: turns[p].content for p in at})
    took = (time.perf_counter() - began) * 1000
    print(f"\n{len(sent)} messages: aligned in {took:.1f} ms")
    return reading


def test_cost_hostile_history_through_the_sync(user):
    """Every match one message long and 440 of the person's "ok" at the end: what difflib weighed blocks x pairs
    (seconds, the chat's row locked) now costs anchors (n log n) and at most ALIGNED_CELLS pairs."""
    turns, sent = hostile(500, 440)
    story(user, turns, "long", tagged=False)
    began = time.perf_counter()
    with CaptureQueriesContext(db_connection) as queries:
        synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    print(f"\nhostile history of {len(sent)} messages: sync {time.perf_counter() - began:.3f} s")
    # Its 500 replies differ, each read as an edit: one UPDATE each, and no read of its own (there were four
    # statements a reply: 2,016 in all).
    assert len(queries) <= 500 + 40, len(queries)
    assert timed_reading(turns, [*sent, GO], 2) is None


def test_cost_no_repeats_at_the_length_cap():
    turns, sent = hostile(2_499, 0)
    assert timed_reading(turns, [*sent, GO], 2) is None


def test_cost_a_real_reading_amid_5000():
    """Control: a person's edits and deletions amid 5,000 messages."""
    turns = telling(5_000)
    reading = timed_reading(turns, [*without(edited(turns, 3000, 4000), 10, 11, 2000), GO], 10)
    assert reading is not None and reading.gone == [10, 11, 2000]


def test_queries_two_blocks_and_an_edit_amid_2000(user):
    turns = telling(2000)
    chat = story(user, turns, "long", tagged=False)
    sent = without(edited(turns, 1500), 100, 101, 1200)
    with CaptureQueriesContext(db_connection) as queries:
        began = time.perf_counter()
        synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
        took = time.perf_counter() - began
    print(f"\n2,000 messages, two blocks and an edit: {took * 1000:.0f} ms, {len(queries)} queries")
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 3}
    assert texts(Chat.objects.get(pk=chat.pk)) == contents(sent)
    assert len(queries) <= 40, len(queries)
