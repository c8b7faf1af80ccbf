"""Red team of messages added amid a chat, or hidden ones shown again, along with other changes (services/aligning.py
`Reading.added`, `Reading.shown`, `_read`, `_paired`; services/writing.py `aligned_written`, `_runs`): blocks hidden
in a front end (deleted here when the chat is named, hidden when it is guessed), then shown again in the same request
as another change.

Each stored message carries a swipe naming it (`alt of #n`, tests/gateway/test_sync_rules.py `story`), so a test
tells a message kept from one written over. Passing tests record behaviour that holds; xfail (strict) a fault, its
cause in the reason."""

from __future__ import annotations

import random
import time

import pytest
from django.db import connection as db_connection
from django.test.utils import CaptureQueriesContext

from apps.chats.models import Chat, Message
from apps.gateway.services.request import Line
from apps.gateway.services.window import HEAD_KEPT
from tests.gateway.stories import (
    SYSTEM,
    VOCABULARY,
    answered,
    assert_as_sent,
    assert_indices_hold,
    edited,
    hidden_flags,
    prose,
    synced_as_sent,
    telling,
    visible,
)
from tests.gateway.test_sync_rules import (
    CONTINUE,
    GO,
    IMP,
    NEW,
    NOTHING,
    QUIET,
    SWIPE,
    origins,
    story,
    texts,
    without,
)

pytestmark = pytest.mark.django_db

NAMED_TRACE = (
    "a named chat deletes the messages hidden in the front end (it cannot tell them from messages deleted there), so "
    "it holds no trace of them: shown again where others are left out, services/aligning.py reads the others "
    "edited into their texts (a pair weighs at least 0, a message of either side left unpaired -1: an edit is "
    "read before a deletion and an addition). The texts end right; the swipes stand under the wrong ones"
)

# 1. Named: blocks deleted when hidden, shown again with another change ------------------------------------------


@pytest.mark.parametrize("make", [telling, prose])
def test_two_blocks_shown_again_and_a_block_deleted_between_them(user, make):
    turns = make(40)
    chat = story(user, without(turns, 10, 11, 30, 31), "long")
    sent = [SYSTEM, *without(turns, 20, 21), GO]
    synced = synced_as_sent(user, sent, "long")
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, NEW, GO.content)
    assert synced.written == {**NOTHING, "appended": 4, "deleted": 2}
    assert_as_sent(chat, sent, synced)
    kept = [n for n in range(37) if n not in (18, 19)]  # (turns 20, 21 stood at 18, 19)
    assert origins(chat) == [*kept[:10], None, None, *kept[10:26], None, None, *kept[26:]]


PLACES = {
    # (the block shown again, the message edited, the chat's messages after: the index each was stored at)
    "right_after_the_greeting_with_a_later_edit": ((1, 2), 30, [0, None, None, *range(1, 39)]),
    "before_the_last_reply_with_an_earlier_edit": ((38, 39), 10, [*range(38), None, None, 38]),
    "next_to_an_edited_message": ((20, 21), 22, [*range(20), None, None, *range(20, 39)]),
}


@pytest.mark.parametrize("make", [telling, prose])
@pytest.mark.parametrize(("block", "edit", "stood"), PLACES.values(), ids=PLACES.keys())
def test_a_block_shown_again_with_an_edit(user, make, block, edit, stood):
    """(Next to the edited message: an edit that adds words scored below a neighbour saying nearly the same, when
    the words shared were weighed against all either says.)"""
    turns = make(40)
    chat = story(user, without(turns, *block), "long")
    sent = list(turns)
    sent[edit] = edited(turns[edit])
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert (synced.mode, synced.message, synced.written) == (NEW, GO.content, {**NOTHING, "appended": 2, "edited": 1})
    assert_as_sent(chat, [SYSTEM, *sent, GO], synced)
    assert origins(chat) == stood


@pytest.mark.parametrize("make", [telling, prose])
def test_a_block_shown_again_with_the_chats_end_cut(user, make):
    turns = make(40)
    chat = story(user, without(turns, 20, 21), "long")
    sent = turns[:37]  # ends with #36, the character's: a continue
    synced = synced_as_sent(user, [SYSTEM, *sent], "long")
    assert (synced.mode, synced.written) == (CONTINUE, {**NOTHING, "appended": 2, "deleted": 4})
    assert_as_sent(chat, [SYSTEM, *sent], synced)
    assert origins(chat) == [*range(20), None, None, *range(20, 35)]


@pytest.mark.parametrize("make", [telling, prose])
def test_a_block_shown_again_with_the_last_reply_regenerated_and_an_edit(user, make):
    turns = make(40)
    chat = story(user, without(turns, 20, 21), "long")
    sent = turns[:40]  # ends with #39, the person's: #40 regenerated
    sent[30] = edited(turns[30])
    synced = synced_as_sent(user, [SYSTEM, *sent], "long")
    assert (synced.mode, synced.message) == (SWIPE, None)
    assert synced.written == {**NOTHING, "appended": 2, "edited": 1}
    assert texts(chat) == [*(line.content for line in sent), turns[40].content]
    assert origins(chat) == [*range(20), None, None, *range(20, 39)]
    assert_indices_hold(chat, [SYSTEM, *sent], synced.indices)


# 2. Guessed: blocks hidden here, shown again with another change ------------------------------------------------


@pytest.mark.parametrize("make", [telling, prose])
def test_guessed_two_blocks_shown_again_and_another_hidden_between(user, make):
    turns = make(40)
    chat = story(user, turns, "", hidden=(10, 11, 30, 31))
    sent = [SYSTEM, *without(turns, 20, 21), GO]
    synced = synced_as_sent(user, sent, "")
    assert (synced.chat.pk, synced.message) == (chat.pk, GO.content)
    assert synced.written == {**NOTHING, "shown": 4, "hidden": 2}
    assert origins(chat) == list(range(41))
    assert hidden_flags(chat) == [n in (20, 21) for n in range(41)]
    assert_as_sent(chat, sent, synced)
    assert Chat.objects.filter(user=user).count() == 1


@pytest.mark.parametrize("make", [telling, prose])
def test_guessed_shown_again_and_a_block_hidden_right_after_it(user, make):
    """SillyTavern: /unhide 20-21 and /hide 22-23 at once (a block swapped for its neighbour). The gap between the
    anchors holds as many of the history's messages as of the chat's."""
    turns = make(40)
    chat = story(user, turns, "", hidden=(20, 21))
    sent = [SYSTEM, *without(turns, 22, 23), GO]
    synced = synced_as_sent(user, sent, "")
    assert (synced.chat.pk, synced.message) == (chat.pk, GO.content)
    assert synced.written == {**NOTHING, "shown": 2, "hidden": 2}
    assert origins(chat) == list(range(41))
    assert hidden_flags(chat) == [n in (22, 23) for n in range(41)]


@pytest.mark.xfail(strict=True, reason="#22, #23 edited into #20's and #21's texts: " + NAMED_TRACE)
@pytest.mark.parametrize("make", [telling, prose])
def test_named_shown_again_and_a_block_deleted_right_after_it(user, make):
    turns = make(40)
    chat = story(user, without(turns, 20, 21), "long")
    sent = [SYSTEM, *without(turns, 22, 23), GO]
    synced = synced_as_sent(user, sent, "long")
    assert synced.written == {**NOTHING, "appended": 2, "deleted": 2}
    assert_as_sent(chat, sent, synced)
    assert origins(chat) == [*range(20), None, None, *range(22, 39)]  # (turns 22, 23 stood at 20, 21)


def test_named_one_shown_again_and_the_next_of_the_other_speaker_hidden(user):
    turns = prose(40)
    chat = story(user, without(turns, 20), "long")
    sent = [SYSTEM, *without(turns, 21), GO]
    synced = synced_as_sent(user, sent, "long")
    assert (synced.mode, synced.message) == (NEW, GO.content)
    assert synced.written == {**NOTHING, "appended": 1, "deleted": 1}
    assert_as_sent(chat, sent, synced)


@pytest.mark.parametrize(
    "header",
    [
        pytest.param(
            "long", marks=pytest.mark.xfail(strict=True, reason="#22 edited into #20's text: " + NAMED_TRACE)
        ),
        "",
    ],
)
def test_two_shown_again_and_the_next_one_hidden(user, header):
    turns = prose(40)
    chat = story(user, without(turns, 20, 21), header) if header else story(user, turns, header, hidden=(20, 21))
    sent = [SYSTEM, *without(turns, 22), GO]
    synced = synced_as_sent(user, sent, header)
    assert synced.chat.pk == chat.pk
    assert synced.written == {**NOTHING, **({"appended": 2, "deleted": 1} if header else {"shown": 2, "hidden": 1})}
    assert_as_sent(chat, sent, synced)
    assert 22 not in [tag for tag, hidden in zip(origins(chat), hidden_flags(chat), strict=True) if not hidden]


def test_guessed_repeated_texts_hidden_here_shown_again_with_an_edit(user):
    """ "..."/"ok" said at #20-#21 (hidden here) and #22-#23; shown again along with an edit of #35."""
    turns = telling(40)
    turns[20] = turns[22] = Line("assistant", "...")
    turns[21] = turns[23] = Line("user", "ok")
    chat = story(user, turns, "", hidden=(20, 21))
    sent = list(turns)
    sent[35] = edited(turns[35])
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "")
    assert (synced.chat.pk, synced.message) == (chat.pk, GO.content)
    assert synced.written == {**NOTHING, "shown": 2, "edited": 1}
    assert chat.messages.count() == 41 and hidden_flags(chat) == [False] * 41
    assert origins(chat) == list(range(41))


def test_guessed_shown_again_with_an_edit_of_the_message_after_them(user):
    """Hidden here #20-#21 shown again, #22 after them edited (its words kept, more said)."""
    turns = telling(40)
    chat = story(user, turns, "", hidden=(20, 21))
    sent = list(turns)
    sent[22] = edited(turns[22])
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "")
    assert synced.chat.pk == chat.pk
    assert synced.written == {**NOTHING, "shown": 2, "edited": 1}
    assert origins(chat) == list(range(41)) and hidden_flags(chat) == [False] * 41
    assert_as_sent(chat, [SYSTEM, *sent, GO], synced)


@pytest.mark.parametrize("make", [telling, prose])
def test_guessed_hidden_rows_spaced_otherwise_are_shown_with_an_edit(user, make):
    turns = make(40)
    chat = story(user, turns, "", hidden=(20, 21))
    sent = list(turns)
    sent[20] = Line(turns[20].role, "  " + turns[20].content.replace(" ", "\n ", 2))
    sent[30] = edited(turns[30])
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "")
    assert synced.chat.pk == chat.pk
    assert synced.written == {**NOTHING, "shown": 2, "edited": 1}
    assert origins(chat) == list(range(41)) and hidden_flags(chat) == [False] * 41
    assert synced.indices[19:23] == [19, None, 21, 22]
    assert_indices_hold(chat, [SYSTEM, *sent, GO], synced.indices)


@pytest.mark.parametrize("make", [telling, prose])
def test_guessed_hidden_rows_partly_said_the_run_visible_as_sent(user, make):
    """Hidden here #20-#21; the history says #20, a new message, #21 (and an edit of #30): not all of the run is
    hidden there, so it is added; the chat's visible messages are the history."""
    turns = make(40)
    chat = story(user, turns, "", hidden=(20, 21))
    sent = [*turns[:21], Line("assistant", "Something said between."), *turns[21:]]
    sent[31] = edited(sent[31])
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "")
    assert synced.chat.pk == chat.pk
    assert_as_sent(chat, [SYSTEM, *sent, GO], synced)
    assert [n for n in origins(chat) if n is not None] == list(range(41))


@pytest.mark.parametrize("make", [telling, prose])
def test_guessed_shown_again_with_an_edit_and_a_block_hidden_goes_on_in_a_branch(user, make):
    """Shown again, a block left out and an earlier message edited: a guessed chat's reading with an edit besides a
    block left out goes on in a branch (docs/GATEWAY.md); the story stays as it was."""
    turns = make(40)
    chat = story(user, turns, "", hidden=(10, 11))
    sent = without(turns, 30, 31)
    sent[20] = edited(sent[20])
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "")
    assert synced.chat.pk != chat.pk
    assert origins(chat) == list(range(41)) and texts(chat) == [line.content for line in turns]
    assert hidden_flags(chat) == [n in (10, 11) for n in range(41)]
    assert visible(synced.chat) == [line.content for line in sent]


@pytest.mark.parametrize("make", [telling, prose])
def test_guessed_shown_again_with_two_earlier_edits_branches_and_keeps_the_story(user, make):
    turns = make(40)
    chat = story(user, turns, "", hidden=(10, 11))
    sent = list(turns)
    sent[20], sent[26] = edited(turns[20]), edited(turns[26])
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "")
    assert synced.chat.pk != chat.pk
    assert origins(chat) == list(range(41)) and texts(chat) == [line.content for line in turns]
    assert hidden_flags(chat) == [n in (10, 11) for n in range(41)]
    assert visible(synced.chat) == [line.content for line in sent]


# 3. The chat's end --------------------------------------------------------------------------------------------------


@pytest.mark.xfail(
    strict=True,
    reason="#40 edited into #38's text and #39 taken as the person's new turn (mode new, not swipe; #40's text kept "
    "as a swipe): the chat holds no trace of #38-#39 (" + NAMED_TRACE + "), and a history adding messages "
    "where the last reply was may as well be that reply edited and a new turn, which services/aligning.py reads "
    "(a regenerate is read there only where the messages before the reply are hidden ones shown again)",
)
@pytest.mark.parametrize("make", [telling, prose])
def test_shown_again_before_the_last_reply_then_it_regenerated(user, make):
    """Named: #38-#39 hidden in the front end (deleted here) while #40 was continued; then shown again and #40
    swiped: the history ends with #39, the person's. (/unhide, then a swipe: the reply is regenerated as well.)"""
    turns = make(40)
    chat = story(user, without(turns, 38, 39), "long")
    sent = turns[:40]
    sent[10] = edited(turns[10])
    synced = synced_as_sent(user, [SYSTEM, *sent], "long")
    assert (synced.mode, synced.message) == (SWIPE, None)
    assert synced.written == {**NOTHING, "appended": 2, "edited": 1}
    assert texts(chat) == [*(line.content for line in sent), turns[40].content]
    assert origins(chat) == [*range(38), None, None, 38]


@pytest.mark.parametrize("make", [telling, prose])
def test_shown_again_and_the_last_exchange_replaced_by_messages_sharing_no_words(user, make):
    """Named: #20-#21 shown again; the last exchange deleted and one written by hand in its place (its words none of
    the chat's), then the person's turn."""
    turns = make(40)
    chat = story(user, without(turns, 20, 21), "long")
    sent = [*turns[:39], Line("user", "Hm?"), Line("assistant", "Indeed."), GO]
    synced = synced_as_sent(user, [SYSTEM, *sent], "long")
    assert (synced.mode, synced.message) == (NEW, GO.content)
    assert_as_sent(chat, [SYSTEM, *sent], synced)
    assert origins(chat)[:39] == [*range(20), None, None, *range(20, 37)]


# 4. What must not be written: another story, side requests ----------------------------------------------------


@pytest.mark.parametrize("make", [telling, prose])
def test_guessed_another_story_sharing_the_opening_and_a_few_lines_is_not_merged(user, make):
    """Another chat with the same character: the same greeting and first exchange, then its own story, which says a
    few of this one's shorter lines ("ok", an OOC note) in the same order. Never written into this chat."""
    turns = make(40)
    turns[15] = Line("user", "(OOC: let us skip ahead.)")
    turns[25] = Line("user", "(OOC: describe the room.)")
    chat = story(user, turns, "")
    other = [*turns[:3], *[Line("user" if n % 2 else "assistant", f"Other tale line {n}.") for n in range(3, 12)]]
    other[7] = turns[15]
    other[11] = turns[25]
    other += [Line("assistant", "Other tale reply."), GO]
    synced = synced_as_sent(user, [SYSTEM, *other], "")
    assert origins(chat) == list(range(41)) and texts(chat) == [line.content for line in turns]
    assert hidden_flags(chat) == [False] * 41
    assert synced.chat.pk != chat.pk or synced.mode == IMP


def test_named_side_requests_with_blocks_shown_do_not_rewrite_the_chat(user):
    """Open WebUI's title and tags requests: one user message quoting the chat; a summary as the last system message
    after the history that shows a block again and cuts the chat's end: only the history is written, not the
    summary (answered, not stored)."""
    turns = prose(40)
    chat = story(user, without(turns, 20, 21), "long")
    quoted = "\n".join(line.content for line in turns)
    for ask in ("Generate a concise title for this chat:", "Generate tags for this chat:"):
        synced = synced_as_sent(user, [Line("user", f"{ask}\n{quoted}")], "long")
        assert synced.written == NOTHING and synced.mode == IMP
    assert origins(chat) == list(range(39))
    sent = turns[:39]
    synced = synced_as_sent(user, [SYSTEM, *sent, QUIET], "long")
    assert synced.mode == IMP and synced.message is None
    assert visible(chat) == [line.content for line in sent]
    assert origins(chat) == [*range(20), None, None, *range(20, 37)]


# 5. Where the history starts: a front end's cut with the greeting kept -----------------------------------------


def test_shown_again_with_an_edit_within_a_cut_keeping_the_greeting(user):
    turns = telling(200)
    chat = story(user, without(turns, 170, 171), "long")
    sent = [turns[0], *turns[150:]]
    sent[-5] = edited(sent[-5])  # #196
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert (synced.message, synced.written) == (GO.content, {**NOTHING, "appended": 2, "edited": 1})
    assert texts(chat) == [line.content for line in [*turns[:196], sent[-5], *turns[197:]]]
    assert origins(chat)[165:176] == [*range(165, 170), None, None, *range(170, 174)]
    assert_indices_hold(chat, [SYSTEM, *sent, GO], synced.indices)


# 6. Many operations ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("header", ["long", ""])
def test_runs_deletions_and_edits_across_many_patches_are_written_in_order(user, monkeypatch, header):
    monkeypatch.setattr("apps.gateway.services.writing.MAX_PATCH_OPERATIONS", 3)
    turns = prose(120)
    shown = {*range(10, 18), *range(40, 44), *range(90, 100)}
    if header:
        chat = story(user, without(turns, *shown), header)
    else:
        chat = story(user, turns, header, hidden=tuple(shown))
    sent = without(turns, *range(60, 70), 104, 105)
    edits = (30, 75, 101) if header else ()  # (guessed: an edit along with a block hidden branches)
    for n in edits:
        sent[n] = edited(sent[n])
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], header)
    assert synced.chat.pk == chat.pk
    assert synced.written["edited"] == len(edits)
    assert synced.written["appended" if header else "shown"] == 22
    assert synced.written["deleted" if header else "hidden"] == 12
    assert_as_sent(chat, [SYSTEM, *sent, GO], synced)
    indices = list(Message.objects.filter(chat=chat).order_by("index").values_list("index", flat=True))
    assert indices == list(range(len(indices)))
    if not header:
        assert origins(chat) == list(range(121))


# 7. Cost on a long chat -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("header", ["long", ""])
def test_a_block_shown_again_with_a_block_left_out_and_an_edit_amid_5000(user, header):
    turns = telling(5000)
    if header:
        chat = story(user, without(turns, *range(1000, 1100)), header, tagged=False)
    else:
        chat = story(user, turns, header, hidden=tuple(range(1000, 1100)), tagged=False)
    sent = without(turns, *range(3000, 3010))
    if header:
        sent[4500] = edited(sent[4500])
    begun = time.perf_counter()
    with CaptureQueriesContext(db_connection) as queries:
        synced = synced_as_sent(user, [SYSTEM, *sent, GO], header)
    print(f"\n5,000 messages, {header or 'guessed'}: {time.perf_counter() - begun:.2f}s, {len(queries)} queries")
    assert synced.chat.pk == chat.pk
    assert synced.written == (
        {**NOTHING, "appended": 100, "deleted": 10, "edited": 1} if header else {**NOTHING, "shown": 100, "hidden": 10}
    )
    assert visible(chat) == [line.content for line in sent]
    assert len(queries) <= 40 + (0 if header else 110), len(queries)  # (guessed: one UPDATE a message shown)


def test_many_single_messages_shown_again_with_an_edit_amid_5000_are_refused_at_a_bounded_cost(user):
    """Each run of messages added is written apart, moving the chat's later messages: 100 runs amid 5,000 took 318
    statements and 12.8 s (200 runs, 41.6 s). Past ADDED_MOVES the reading is refused, and the comparison reads the
    history: a named chat it would rewrite is answered, not stored, at a few statements."""
    turns = telling(5000)
    gone = tuple(range(100, 4100, 40))  # 100 single messages, hidden one by one
    chat = story(user, without(turns, *gone), "long", tagged=False)
    stored = texts(chat)
    sent = list(turns)
    sent[4500] = edited(sent[4500])
    begun = time.perf_counter()
    with CaptureQueriesContext(db_connection) as queries:
        synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    print(f"\n100 runs amid 5,000: {time.perf_counter() - begun:.2f}s, {len(queries)} queries")
    assert (synced.mode, synced.written) == (IMP, NOTHING) and texts(chat) == stored
    assert len(queries) <= 20, len(queries)


def test_a_few_single_messages_shown_again_with_an_edit_amid_5000_are_written(user):
    turns = telling(5000)
    gone = (4600, 4700, 4800)
    chat = story(user, without(turns, *gone), "long", tagged=False)
    sent = list(turns)
    sent[4500] = edited(sent[4500])
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.written == {**NOTHING, "appended": 3, "edited": 1}
    assert visible(chat) == [line.content for line in sent]


# 8. A front end hiding, showing and editing at random ------------------------------------------------------------


def _front_end_session(user, header: str, seed: int, *, edits: bool) -> list[str]:
    """A SillyTavern-like session: each turn hides a block, shows one of its hidden blocks again, edits a message
    (each change at random, often several at once), then sends the visible history and its new turn, whose reply
    is stored. Returns what went wrong (the chat's visible messages, the indices, a message written over)."""
    rng = random.Random(seed)
    turns = prose(60, seed)
    chat = story(user, turns, header)
    # The front end's messages: [text, role, hidden, tag] (tag: the story's index it was stored at, or None)
    front = [[line.content, line.role, False, n] for n, line in enumerate(turns)]
    originals = {n: line.content for n, line in enumerate(turns)}
    faults = []
    for step in range(12):
        changes = rng.sample(["hide", "show", "edit", "hide", "show"], rng.randint(2, 3))
        for change in changes:
            shown = [n for n in range(HEAD_KEPT + 2, len(front) - 2) if not front[n][2]]
            if change == "hide" and shown:
                at = rng.choice(shown)
                for n in range(at, min(at + rng.randint(1, 3), len(front) - 2)):
                    front[n][2] = True
            elif change == "show":
                hidden = [n for n in range(len(front)) if front[n][2]]
                if hidden:
                    at = rng.choice(hidden)
                    n = at
                    while n < len(front) and front[n][2]:
                        front[n][2] = False
                        n += 1
            elif change == "edit" and edits and shown:
                at = rng.choice(shown)
                front[at][0] += f" Said again at step {step}."
        sent = [Line(role, text) for text, role, hidden, _ in front if not hidden]
        turn = Line("user", f"Step {step}: " + " ".join(rng.sample(VOCABULARY, 6)))
        synced = synced_as_sent(user, [SYSTEM, *sent, turn], header)
        if synced.mode != NEW or synced.message != turn.content:
            faults.append((step, changes, "asked", synced.mode, synced.message))
            break
        chat = synced.chat
        if visible(chat) != [line.content for line in sent]:
            faults.append((step, changes, "visible", synced.written))
            break
        try:
            assert_indices_hold(chat, [*sent, turn], synced.indices)
        except AssertionError as exc:
            faults.append((step, changes, "indices", str(exc)[:200]))
            break
        for tag, mes in zip(origins(chat), texts(chat), strict=True):
            if tag is not None and not mes.startswith(originals[tag]):
                faults.append((step, changes, "written over", tag, mes[:40]))
                break
        if faults:
            break
        reply = Line("assistant", f"Reply {step}: " + " ".join(rng.sample(VOCABULARY, 8)))
        answered(chat, turn, reply)
        front += [[turn.content, "user", False, None], [reply.content, "assistant", False, None]]
    return faults


@pytest.mark.parametrize(
    "seed",
    [
        *range(6),
        pytest.param(
            21, marks=pytest.mark.xfail(strict=True, reason="a reply written over at step 6: " + NAMED_TRACE)
        ),
    ],
)
def test_a_front_end_hiding_showing_and_editing_at_random_named(user, seed):
    assert _front_end_session(user, "long", seed, edits=True) == []


@pytest.mark.parametrize(
    "seed",
    [
        *range(6),
        21,
    ],
)
def test_a_front_end_hiding_and_showing_at_random_guessed(user, seed):
    assert _front_end_session(user, "", seed, edits=False) == []
