"""Red team of the chat's hidden messages read in their places by the aligned reading (94fcaaf: services/sync.py
`_hidden_after`, services/aligning.py `aligned`, `_read`, `_paired`, `_valid`, services/writing.py
`aligned_written`): ordinary use with hidden rows present, hidden rows saying what visible ones say, many hidden
rows, the word weight (the share of the shorter message's words, then of all), and the cost on a long chat.

Each stored message carries a swipe naming it (`alt of #n`), so a test tells a message kept from one written over.
Passing tests record behaviour that holds; xfail (strict) a fault, its cause in the reason."""

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
from tests.gateway.test_sync_rules import CONTINUE, GO, IMP, NEW, NOTHING, QUIET, SWIPE, origins, story, texts, without

pytestmark = pytest.mark.django_db

MAKES = [telling, prose]


def shown_only(chat: Chat) -> list[int | None]:
    """The origins of the chat's visible messages."""
    return [tag for tag, hidden in zip(origins(chat), hidden_flags(chat), strict=True) if not hidden]


def hidden_story(user, turns: list[Line], header: str, hidden: tuple[int, ...]) -> Chat:
    """A chat whose `hidden` messages are hidden from the model (by the gateway when guessed, on the chat page or
    by SillyTavern's extension when named): the front end hides them too, so never sends them."""
    return story(user, turns, header, hidden=hidden)


# 1. Ordinary use with hidden rows in the chat -------------------------------------------------------------------

HIDDEN_PLACES = {
    "early": (10, 11),
    "near_the_end": (35, 36),
    "right_before_the_last_exchange": (37, 38),
    "many_early": tuple(range(5, 25)),
}


@pytest.mark.parametrize("header", ["long", ""])
@pytest.mark.parametrize("hidden", HIDDEN_PLACES.values(), ids=HIDDEN_PLACES.keys())
@pytest.mark.parametrize("make", MAKES)
def test_last_message_edited_and_regenerated_with_hidden_rows(user, make, hidden, header):
    turns = make(40)
    chat = hidden_story(user, turns, header, hidden)
    sent = without(turns, *hidden)[:-1]
    sent[-1] = edited(sent[-1])  # #39, the person's
    synced = synced_as_sent(user, [SYSTEM, *sent], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, SWIPE, None)
    assert synced.written == {**NOTHING, "edited": 1}
    assert visible(chat) == [*(line.content for line in sent), turns[40].content]
    assert origins(chat) == list(range(41))
    assert hidden_flags(chat) == [n in hidden for n in range(41)]
    assert_indices_hold(chat, [SYSTEM, *sent], synced.indices)


@pytest.mark.parametrize("header", ["long", ""])
@pytest.mark.parametrize("hidden", HIDDEN_PLACES.values(), ids=HIDDEN_PLACES.keys())
@pytest.mark.parametrize("make", MAKES)
def test_last_reply_deleted_and_a_new_message_sent_with_hidden_rows(user, make, hidden, header):
    turns = make(40)
    chat = hidden_story(user, turns, header, hidden)
    sent = [*without(turns, *hidden)[:-1], GO]
    synced = synced_as_sent(user, [SYSTEM, *sent], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, NEW, GO.content)
    assert_as_sent(chat, [SYSTEM, *sent], synced)
    assert shown_only(chat) == [n for n in range(40) if n not in hidden]
    assert hidden_flags(chat)[:40] == [n in hidden for n in range(40)]


@pytest.mark.parametrize("header", ["long", ""])
@pytest.mark.parametrize("hidden", HIDDEN_PLACES.values(), ids=HIDDEN_PLACES.keys())
@pytest.mark.parametrize("make", MAKES)
def test_continue_and_new_turn_with_hidden_rows(user, make, hidden, header):
    turns = make(40)
    chat = hidden_story(user, turns, header, hidden)
    sent = without(turns, *hidden)
    synced = synced_as_sent(user, [SYSTEM, *sent], header)
    assert (synced.chat.pk, synced.mode, synced.written) == (chat.pk, CONTINUE, NOTHING)
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], header)
    assert (synced.chat.pk, synced.mode, synced.message, synced.written) == (chat.pk, NEW, GO.content, NOTHING)
    assert origins(chat) == list(range(41))
    assert hidden_flags(chat) == [n in hidden for n in range(41)]


@pytest.mark.parametrize("header", ["long", ""])
@pytest.mark.parametrize("hidden", HIDDEN_PLACES.values(), ids=HIDDEN_PLACES.keys())
@pytest.mark.parametrize("make", MAKES)
def test_an_earlier_message_edited_with_hidden_rows(user, make, hidden, header):
    """One message edited before the last exchange: written in place (a guessed chat too: one edit alone)."""
    turns = make(40)
    chat = hidden_story(user, turns, header, hidden)
    sent = without(turns, *hidden)
    at = sent.index(turns[30])
    sent[at] = edited(sent[at])
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, NEW, GO.content)
    assert synced.written == {**NOTHING, "edited": 1}
    assert_as_sent(chat, [SYSTEM, *sent, GO], synced)
    assert origins(chat) == list(range(41))
    assert hidden_flags(chat) == [n in hidden for n in range(41)]


@pytest.mark.parametrize("header", ["long", ""])
@pytest.mark.parametrize("make", MAKES)
def test_hidden_rows_after_the_last_visible_message_shown_again_with_an_edit(user, make, header):
    """The last exchange hidden (on the chat page, or by the extension), then shown again in the front end along
    with an earlier edit and a new turn."""
    turns = make(40)
    chat = hidden_story(user, turns, header, (39, 40))
    sent = list(turns)
    sent[30] = edited(turns[30])
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, NEW, GO.content)
    assert synced.written == {**NOTHING, "edited": 1, "shown": 2}
    assert_as_sent(chat, [SYSTEM, *sent, GO], synced)
    assert origins(chat) == list(range(41)) and hidden_flags(chat) == [False] * 41


@pytest.mark.parametrize("header", ["long", ""])
@pytest.mark.parametrize("make", MAKES)
def test_hidden_rows_after_the_last_visible_message_stay_hidden_with_an_edit(user, make, header):
    turns = make(40)
    chat = hidden_story(user, turns, header, (39, 40))
    sent = turns[:39]
    sent[30] = edited(turns[30])
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, NEW, GO.content)
    assert synced.written == {**NOTHING, "edited": 1}
    assert_as_sent(chat, [SYSTEM, *sent, GO], synced)
    assert origins(chat) == list(range(41)) and hidden_flags(chat) == [n >= 39 for n in range(41)]


# 2. A front end's cut, with hidden rows -------------------------------------------------------------------------


@pytest.mark.parametrize("greeting", [True, False])
@pytest.mark.parametrize("header", ["long", ""])
def test_a_cut_with_hidden_rows_inside_it_last_message_edited_and_regenerated(user, header, greeting):
    turns = telling(200)
    hidden = (170, 171, 185)
    chat = hidden_story(user, turns, header, hidden)
    sent = [*([turns[0]] if greeting else []), *without(turns, *hidden)[150:-1]]
    sent[-1] = edited(sent[-1])  # #199
    synced = synced_as_sent(user, [SYSTEM, *sent], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, SWIPE, None)
    assert synced.written == {**NOTHING, "edited": 1}
    assert origins(chat) == list(range(201))
    assert hidden_flags(chat) == [n in hidden for n in range(201)]
    assert texts(chat)[199] == sent[-1].content
    assert_indices_hold(chat, [SYSTEM, *sent], synced.indices)


@pytest.mark.parametrize("greeting", [True, False])
@pytest.mark.parametrize("header", ["long", ""])
def test_a_cut_with_hidden_rows_inside_it_shown_again_and_an_edit(user, header, greeting):
    turns = telling(200)
    hidden = (170, 171)
    chat = hidden_story(user, turns, header, hidden)
    sent = [*([turns[0]] if greeting else []), *turns[150:]]
    sent[-5] = edited(sent[-5])  # #196
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], header)
    assert (synced.chat.pk, synced.message) == (chat.pk, GO.content)
    assert synced.written == {**NOTHING, "edited": 1, "shown": 2}
    assert origins(chat) == list(range(201)) and hidden_flags(chat) == [False] * 201
    assert_indices_hold(chat, [SYSTEM, *sent, GO], synced.indices)


# 3. Hidden rows saying what visible ones say --------------------------------------------------------------------


@pytest.mark.parametrize("header", ["long", ""])
def test_hidden_ok_and_dots_among_visible_ones_with_an_edit(user, header):
    """A run of "..."/"ok" at #20-#29, of which #22-#23 and #26-#27 are hidden; an edit of #35. Nothing shown, the
    visible run kept as it is."""
    turns = telling(40)
    for n in range(20, 30):
        turns[n] = Line(turns[n].role, "ok" if n % 2 else "...")
    hidden = (22, 23, 26, 27)
    chat = hidden_story(user, turns, header, hidden)
    sent = without(turns, *hidden)
    at = sent.index(turns[35])
    sent[at] = edited(sent[at])
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], header)
    assert (synced.chat.pk, synced.message) == (chat.pk, GO.content)
    assert synced.written == {**NOTHING, "edited": 1}
    assert origins(chat) == list(range(41))
    assert hidden_flags(chat) == [n in hidden for n in range(41)]
    assert_as_sent(chat, [SYSTEM, *sent, GO], synced)


@pytest.mark.parametrize("header", ["long", ""])
def test_hidden_ok_and_dots_a_visible_pair_deleted_with_an_edit(user, header):
    """The same run; the person deletes (named) or hides (guessed) the visible #24-#25 and edits #35 (named; a
    guessed chat's edit along with a block hidden branches, so there only the block)."""
    turns = telling(40)
    for n in range(20, 30):
        turns[n] = Line(turns[n].role, "ok" if n % 2 else "...")
    hidden = (22, 23, 26, 27)
    chat = hidden_story(user, turns, header, hidden)
    sent = without(turns, *hidden, 24, 25)
    if header:
        at = sent.index(turns[35])
        sent[at] = edited(sent[at])
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], header)
    assert (synced.chat.pk, synced.message) == (chat.pk, GO.content)
    assert_as_sent(chat, [SYSTEM, *sent, GO], synced)
    assert hidden_flags(chat).count(True) == (4 if header else 6)
    # (which of the run's identical pairs goes cannot be told from the texts: only the messages outside it)
    outside = [tag for tag in shown_only(chat) if tag is not None and not 20 <= tag < 30]
    assert outside == [n for n in range(41) if not 20 <= n < 30]
    assert set(hidden) <= {origins(chat)[n] for n, flag in enumerate(hidden_flags(chat)) if flag}


@pytest.mark.parametrize("header", ["long", ""])
def test_a_hidden_row_of_the_other_speaker_saying_the_same_is_not_shown_for_a_new_turn(user, header):
    """#38, the character's, hidden, says "ok"; the person's new turn "ok" after an edit of #30: a new turn, not
    #38 shown again (another speaker)."""
    turns = prose(40)
    turns[38] = Line("assistant", "ok")
    chat = hidden_story(user, turns, header, (38,))
    sent = without(turns, 38)
    sent[30] = edited(sent[30])
    ok = Line("user", "ok")
    synced = synced_as_sent(user, [SYSTEM, *sent, ok], header)
    assert (synced.chat.pk, synced.message) == (chat.pk, "ok")
    assert synced.written == {**NOTHING, "edited": 1}
    assert hidden_flags(chat) == [n == 38 for n in range(41)]


@pytest.mark.parametrize("header", ["long", ""])
def test_a_new_turn_saying_what_a_hidden_row_before_the_last_reply_says(user, header):
    """#39, the person's "ok", hidden; #38 is theirs too (the front end joined two). The person deletes the last reply
    #40 and says "ok": the history ends with the person's message where the chat's last reply was, and a hidden
    message before it says it. Either a regenerate with #39 shown again, or #40 deleted and "ok" the turn: the
    chat's visible messages are the history (the turn aside) either way."""
    turns = prose(40)
    turns[38] = Line("user", "I wait by the door.")
    turns[39] = Line("user", "ok")
    chat = hidden_story(user, turns, header, (39,))
    sent = [*turns[:38], edited(turns[38]) if header else turns[38], Line("user", "ok")]
    sent[20] = edited(sent[20])
    synced = synced_as_sent(user, [SYSTEM, *sent], header)
    if synced.chat.pk != chat.pk:  # (guessed, two edits before the last exchange: a branch)
        assert origins(chat) == list(range(41)) and texts(chat) == [line.content for line in turns]
        return
    if synced.mode == SWIPE:
        assert visible(chat) == [*(line.content for line in sent), turns[40].content]
    else:
        assert synced.message == "ok"
        assert visible(chat) == [line.content for line in sent[:-1]]
    assert_indices_hold(chat, [SYSTEM, *sent], synced.indices)


# 4. The word weight: the share of the shorter message's words, then of all -------------------------------------


ALIKE = "The wind turns cold over the ridge and the fire gutters"
WEIGHED = {
    # (what #20 says, what #22 says: None as told; what the edit of #22 says, from #22's text)
    # Both share all their words with the edit: weighed by the shorter's words alone they tied, and #20 was kept
    # and edited into #22's text (#22 deleted). The share of all their words tells them apart.
    "a_short_message_whose_words_an_edit_keeps": ("ok", "ok, go north.", lambda text: edited(Line("", text)).content),
    "an_edit_removing_words": (None, None, lambda text: " ".join(text.split()[:3])),
    "two_messages_one_word_apart": (ALIKE + " low.", ALIKE + " out.", lambda text: ALIKE + " out at last."),
}


@pytest.mark.parametrize("make", MAKES)
@pytest.mark.parametrize(("twentieth", "twenty_second", "edit"), WEIGHED.values(), ids=WEIGHED.keys())
def test_the_edited_message_is_told_from_its_neighbours(user, make, twentieth, twenty_second, edit):
    """The person deletes #20-#21 and edits #22: the words #22's edit keeps are its own, not #20's."""
    turns = make(40)
    if twentieth is not None:
        turns[20] = Line(turns[20].role, twentieth)
        turns[22] = Line(turns[22].role, twenty_second)
    chat = story(user, turns, "long")
    sent = without(turns, 20, 21)
    sent[20] = Line(turns[22].role, edit(turns[22].content))
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], "long")
    assert synced.written == {**NOTHING, "edited": 1, "deleted": 2}
    assert_as_sent(chat, [SYSTEM, *sent, GO], synced)
    assert origins(chat) == [*range(20), *range(22, 41)]


# 5. Ordinary changes at the end with hidden rows shown again ------------------------------------------------------


@pytest.mark.parametrize("header", ["long", ""])
@pytest.mark.parametrize("make", MAKES)
def test_hidden_rows_shown_again_the_last_reply_deleted_and_a_new_message(user, make, header):
    """/unhide 37-38, the last reply #40 deleted, then a new message: #40 goes (within the last exchange)."""
    turns = make(40)
    chat = hidden_story(user, turns, header, (37, 38))
    sent = [*turns[:40], GO]
    synced = synced_as_sent(user, [SYSTEM, *sent], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, NEW, GO.content)
    assert_as_sent(chat, [SYSTEM, *sent], synced)
    assert shown_only(chat) == list(range(40))


@pytest.mark.parametrize(("hidden", "edit"), [((37, 38), 20), ((30, 31), 39)], ids=["earlier-edit", "last-edited"])
@pytest.mark.parametrize("header", ["long", ""])
@pytest.mark.parametrize("make", MAKES)
def test_hidden_rows_shown_again_with_an_edit_then_the_last_reply_regenerated(user, make, header, hidden, edit):
    """/unhide, a message edited (an earlier one, or the person's last), then a swipe of #40."""
    turns = make(40)
    chat = hidden_story(user, turns, header, hidden)
    sent = turns[:40]
    sent[edit] = edited(turns[edit])
    synced = synced_as_sent(user, [SYSTEM, *sent], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, SWIPE, None)
    assert synced.written == {**NOTHING, "edited": 1, "shown": 2}
    assert texts(chat) == [*(line.content for line in sent), turns[40].content]
    assert origins(chat) == list(range(41)) and hidden_flags(chat) == [False] * 41
    assert_indices_hold(chat, [SYSTEM, *sent], synced.indices)


@pytest.mark.parametrize("header", ["long", ""])
@pytest.mark.parametrize("make", MAKES)
def test_hidden_rows_shown_again_and_a_reply_continued(user, make, header):
    turns = make(40)
    chat = hidden_story(user, turns, header, (30, 31))
    synced = synced_as_sent(user, [SYSTEM, *turns], header)
    assert (synced.chat.pk, synced.mode, synced.written) == (chat.pk, CONTINUE, {**NOTHING, "shown": 2})
    assert origins(chat) == list(range(41)) and hidden_flags(chat) == [False] * 41


# 6. What must not be written --------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", MAKES)
def test_guessed_another_story_saying_hidden_lines_is_not_merged(user, make):
    """Another story with the same greeting and first exchange, which says this chat's hidden lines (an OOC note,
    "ok") in the same order among its own: never written into this chat."""
    turns = make(40)
    turns[15] = Line("user", "(OOC: let us skip ahead.)")
    turns[25] = Line("user", "(OOC: describe the room.)")
    chat = hidden_story(user, turns, "", (15, 16, 25, 26))
    other = [*turns[:3], *[Line("user" if n % 2 else "assistant", f"Other tale line {n}.") for n in range(3, 12)]]
    other[7], other[8] = turns[15], turns[16]
    other[11] = turns[25]
    other += [turns[26], Line("user", "Other tale turn."), Line("assistant", "Other tale reply."), GO]
    synced = synced_as_sent(user, [SYSTEM, *other], "")
    assert origins(chat) == list(range(41)) and texts(chat) == [line.content for line in turns]
    assert hidden_flags(chat) == [n in (15, 16, 25, 26) for n in range(41)]
    assert synced.chat.pk != chat.pk or synced.mode == IMP


@pytest.mark.parametrize("make", MAKES)
def test_guessed_hidden_rows_shown_again_with_an_early_block_hidden_never_deletes(user, make):
    """Shown again, another block left out before the last exchange and the last reply regenerated: the guessed
    chat only shows and hides, deleting nothing."""
    turns = make(40)
    chat = hidden_story(user, turns, "", (10, 11))
    sent = without(turns, 20, 21)[:-1]
    synced = synced_as_sent(user, [SYSTEM, *sent], "")
    assert synced.chat.pk == chat.pk and synced.mode == SWIPE
    assert origins(chat) == list(range(41)) and texts(chat) == [line.content for line in turns]
    assert hidden_flags(chat) == [n in (20, 21) for n in range(41)]


@pytest.mark.parametrize("make", MAKES)
def test_named_summary_request_with_hidden_rows_shown_writes_only_the_history(user, make):
    """A summary (a quiet prompt) after a history that shows the hidden #10-#11 again and edits #30: the history is
    written as a turn's would be, the summary not stored."""
    turns = make(40)
    chat = hidden_story(user, turns, "long", (10, 11))
    sent = list(turns)
    sent[30] = edited(turns[30])
    synced = synced_as_sent(user, [SYSTEM, *sent, QUIET], "long")
    assert synced.mode == IMP and synced.message is None
    assert visible(chat) == [line.content for line in sent]
    assert origins(chat) == list(range(41))


@pytest.mark.parametrize("make", MAKES)
def test_named_side_request_of_the_opening_only_does_not_rewrite_a_chat_with_hidden_rows(user, make):
    """A side request carrying the chat's opening and a few of its lines that a hidden row says (another story's
    summary sent with the header by mistake): the chat is not rewritten."""
    turns = make(40)
    chat = hidden_story(user, turns, "long", (30, 31))
    sent = [*turns[:5], turns[30], turns[31], Line("user", "Something else."), Line("assistant", "Else again.")]
    synced_as_sent(user, [SYSTEM, *sent, QUIET], "long")
    assert origins(chat) == list(range(41)) and texts(chat) == [line.content for line in turns]


# 7. Many hidden rows ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("header", ["long", ""])
def test_more_hidden_rows_than_shown_most_a_block_shown_again_with_another_hidden(user, header):
    """1,100 hidden rows (past SHOWN_MOST none is read): a block of them shown again along with another block left
    out. The chat's visible messages are the history; the block is added again beside its hidden rows, which stay."""
    turns = telling(2400)
    hidden = tuple(range(100, 1200))
    chat = hidden_story(user, turns, header, hidden)
    sent = without(turns, *range(110, 1200), 2000, 2001)  # #100-#109 shown again, #2000-#2001 left out
    sent[2100 - 1092] = edited(sent[2100 - 1092]) if header else sent[2100 - 1092]
    synced = synced_as_sent(user, [SYSTEM, *sent, GO], header)
    assert (synced.chat.pk, synced.message) == (chat.pk, GO.content)
    assert visible(chat) == [line.content for line in sent]
    assert synced.written["appended"] == 10 and chat.messages.filter(is_system=True).count() >= 1090


@pytest.mark.parametrize("header", ["long", ""])
def test_many_hidden_rows_amid_5000_a_block_shown_again_a_block_left_out_and_an_edit(user, header):
    turns = telling(5000)
    hidden = tuple(n for n in range(50, 4950, 5))  # 980 hidden rows, one in five
    chat = hidden_story(user, turns, header, hidden)
    gone = set(hidden) - {2000, 2005, 2010}  # three shown again
    sent = without(turns, *gone, 3001, 3002)
    at = sent.index(turns[4901])
    if header:
        sent[at] = edited(sent[at])
    begun = time.perf_counter()
    with CaptureQueriesContext(db_connection) as queries:
        synced = synced_as_sent(user, [SYSTEM, *sent, GO], header)
    print(
        f"\n980 hidden amid 5,000, {header or 'guessed'}: {time.perf_counter() - begun:.2f}s, {len(queries)} queries"
    )
    assert (synced.chat.pk, synced.message) == (chat.pk, GO.content)
    assert synced.written.get("shown") == 3
    assert visible(chat) == [line.content for line in sent]
    assert len(queries) <= 40, len(queries)


# 8. A session: hidden rows hidden on both sides, shown again in the front end, edits, regenerates ---------------


def _session(user, header: str, seed: int) -> list:
    """Each step: the extension hides a block on both sides (the chat's rows set hidden), or the front end shows a
    hidden block again, or an earlier message is edited (named only); then the person sends a new turn, edits
    their last message and regenerates, or deletes the last reply and sends a new one. Returns what went wrong."""
    rng = random.Random(seed)
    turns = prose(40, seed)
    chat = story(user, turns, header)
    front = [[line.content, line.role, False] for line in turns]  # text, role, hidden
    for step in range(10):
        chat = Chat.objects.get(pk=chat.pk)
        for change in rng.sample(["hide", "show", "edit", "none"], 2):
            # (past HEAD_KEPT + 2: a block left out right after the greeting reads as a front end's cut keeping it)
            shown = [n for n in range(HEAD_KEPT + 2, len(front) - 3) if not front[n][2]]
            if change == "hide" and shown and header:  # (guessed: the gateway hides what the front end leaves out)
                at = rng.choice(shown)
                block = [n for n in range(at, at + rng.randint(1, 2)) if not front[n][2]]
                rows = chat.messages.filter(is_system=False).order_by("index").values_list("index", flat=True)
                indices = list(rows)
                visible_at = [n for n in range(len(front)) if not front[n][2]]
                Message.objects.filter(chat=chat, index__in=[indices[visible_at.index(n)] for n in block]).update(
                    is_system=True
                )
                for n in block:
                    front[n][2] = True
            elif change == "hide" and shown:
                for n in range(*(lambda a: (a, a + rng.randint(1, 2)))(rng.choice(shown))):
                    front[n][2] = True
            elif change == "show":
                hidden = [n for n in range(len(front)) if front[n][2]]
                if hidden:
                    n = rng.choice(hidden)
                    while n < len(front) and front[n][2]:
                        front[n][2] = False
                        n += 1
            elif change == "edit" and shown and header:
                front[rng.choice(shown)][0] += f" Said again at step {step}."
        sent = [Line(role, text) for text, role, hidden in front if not hidden]
        act = rng.choice(["turn", "regenerate", "delete"])
        if act == "regenerate" and sent[-1].role == "assistant" and sent[-2].role == "user":
            sent = [*sent[:-2], edited(sent[-2]) if header else sent[-2]]  # (guessed: an edit besides branches)
            front = [*front[:-2], [sent[-1].content, "user", False], front[-1]]
            synced = synced_as_sent(user, [SYSTEM, *sent], header)
            if synced.mode != SWIPE or synced.chat.pk != chat.pk:
                return [(step, act, "asked", synced.mode, synced.written)]
            chat = synced.chat
            if visible(chat)[:-1] != [line.content for line in sent]:
                return [(step, act, "visible", synced.written)]
            continue
        if act == "delete" and sent[-1].role == "assistant":
            front, sent = front[:-1], sent[:-1]
        turn = Line("user", f"Step {step} turn.")
        synced = synced_as_sent(user, [SYSTEM, *sent, turn], header)
        if synced.message != turn.content or synced.chat.pk != chat.pk:
            return [(step, act, "asked", synced.mode, synced.written, synced.chat.pk != chat.pk)]
        chat = synced.chat
        if visible(chat) != [line.content for line in sent]:
            return [(step, act, "visible", synced.written)]
        try:
            assert_indices_hold(chat, [*sent, turn], synced.indices)
        except AssertionError as exc:
            return [(step, act, "indices", str(exc)[:200])]
        reply = Line("assistant", f"Reply {step}: the tale goes on.")
        answered(chat, turn, reply)
        front += [[turn.content, "user", False], [reply.content, "assistant", False]]
    return []


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("header", ["long", ""])
def test_a_session_hiding_showing_editing_regenerating(user, header, seed):
    assert _session(user, header, seed) == []


LEFT_OUT = {"apart": (20, 21), "next_to_the_hidden": (12, 13), "one": (20,)}


@pytest.mark.parametrize("block", LEFT_OUT.values(), ids=LEFT_OUT.keys())
@pytest.mark.parametrize("hidden", [(), (10, 11)], ids=["none_hidden", "hidden"])
@pytest.mark.parametrize("make", MAKES)
def test_guessed_a_block_left_out_and_the_last_reply_deleted_then_a_new_message(user, make, hidden, block):
    turns = make(40)
    chat = hidden_story(user, turns, "", hidden)
    sent = [*without(turns, *hidden, *block)[:-1], GO]
    synced = synced_as_sent(user, [SYSTEM, *sent], "")
    assert (synced.chat.pk, synced.message) == (chat.pk, GO.content)
    assert_as_sent(chat, [SYSTEM, *sent], synced)


@pytest.mark.parametrize("block", LEFT_OUT.values(), ids=LEFT_OUT.keys())
@pytest.mark.parametrize("hidden", [(), (10, 11)], ids=["none_hidden", "hidden"])
@pytest.mark.parametrize("make", MAKES)
def test_guessed_a_block_left_out_and_the_last_reply_regenerated(user, make, hidden, block):
    turns = make(40)
    chat = hidden_story(user, turns, "", hidden)
    sent = without(turns, *hidden, *block)[:-1]
    synced = synced_as_sent(user, [SYSTEM, *sent], "")
    assert (synced.chat.pk, synced.mode) == (chat.pk, SWIPE)
    assert visible(chat) == [*(line.content for line in sent), turns[40].content]
