"""Which chat a conversation is when the person edited its opening: the same story (recognised by a message after
their first one, word for word) stays in its chat; another story of the same card does not merge into it."""

from __future__ import annotations

import hashlib

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.chats.models import Chat, Message
from apps.chats.services.writes import chat_append
from apps.gateway.services.match import chat_for_request, fingerprint
from apps.gateway.services.placing import agreement
from apps.gateway.services.request import Line
from apps.gateway.services.sync import history_sync
from tests.gateway.stories import GREETING, SYSTEM, answered, synced_as_sent, telling

pytestmark = pytest.mark.django_db


def story(first: str, reply: str, *more: Line) -> list[Line]:
    return [SYSTEM, GREETING, Line("user", first), Line("assistant", reply), *more]


def stored(user, lines: list[Line]) -> Chat:
    found = chat_for_request(user=user, lines=lines)
    return history_sync(chat=found.chat, lines=lines, start=found.start).chat


def test_an_edited_first_message_stays_in_its_story_and_becomes_its_key(user):
    reply, then = "One came in at dawn, sails torn.", Line("user", "Which?")
    chat = stored(user, story("Any ships?", reply, then))
    edited = story("Any ships tonight, Mira?", reply, then, Line("user", "And then?"))
    found = chat_for_request(user=user, lines=edited)
    assert (found.chat.pk, found.how) == (chat.pk, "edited")
    assert Chat.objects.get(pk=chat.pk).client_key == fingerprint(edited)
    assert chat_for_request(user=user, lines=edited).how == "fingerprint"  # found directly from now on
    assert Chat.objects.count() == 1


def test_another_story_of_the_same_card_is_not_merged(user):
    chat = stored(user, story("Any ships?", "One, at dawn."))
    other = chat_for_request(user=user, lines=story("A room for the night, please.", "Up the stairs, second door."))
    assert other.how == "new" and other.chat.pk != chat.pk


def test_an_edited_opening_with_nothing_after_it_starts_a_new_chat(user):
    chat = stored(user, story("Any ships?", "One, at dawn."))
    found = chat_for_request(user=user, lines=[SYSTEM, GREETING, Line("user", "Any ships tonight?")])
    assert found.how == "new" and found.chat.pk != chat.pk


def test_a_short_message_both_stories_share_does_not_merge_them(user):
    ok, dots = Line("user", "ok"), Line("assistant", "...")
    chat = stored(user, story("Any ships?", "One, at dawn, her sails torn.", ok, dots))
    other = story("A room, please.", "Up the stairs, second door.", ok, dots)
    found = chat_for_request(user=user, lines=[*other, Line("user", "Thanks.")])
    assert found.how == "new" and found.chat.pk != chat.pk


def test_a_chat_named_by_its_id_is_found_in_two_reads(user):
    """The chat and its first message (whether the history was trimmed); not its characters, which the sync that
    locks the chat next would drop unread."""
    lines = story("A room for the night, please.", "Up the stairs, second door.")
    chat = chat_for_request(user=user, lines=lines).chat
    history_sync(chat=chat, lines=lines, start=0)
    with CaptureQueriesContext(connection) as queries:
        found = chat_for_request(user=user, lines=lines, header=str(chat.pk))
    assert (found.chat.pk, found.how, found.start) == (chat.pk, "header", 0)
    reads = [query["sql"] for query in queries.captured_queries if query["sql"].startswith("SELECT")]
    assert [sql.split(" FROM ")[1].split()[0] for sql in reads] == ['"chats_chat"', '"chats_message"']


def test_a_header_of_a_superscript_digit_is_a_client_key_not_an_id(user):
    """A superscript "²" is a digit to str.isdigit but not to int(): the header raised ValueError (a server error)."""
    lines = story("A room for the night, please.", "Up the stairs, second door.")
    found = chat_for_request(user=user, lines=lines, header="²")
    assert found.chat.client_key == "²" and found.chat.user_id == user.pk


def test_a_conversation_sharing_a_storys_opening_goes_on_in_a_branch_and_both_keep_their_messages(user):
    """Two conversations of a front end that begin alike (no system prompt, the same first words): the second does
    not cut the first down; each request goes on in the one its history agrees with longest."""
    first = [Line("user", "hi"), Line("assistant", "Hello, traveller."), Line("user", "Any ships?")]
    a = stored(user, [*first, Line("assistant", "One came in at dawn, sails torn.")])
    b = chat_for_request(user=user, lines=[Line("user", "hi")])
    assert (b.chat.pk, b.how) == (a.pk, "fingerprint")
    branch = history_sync(chat=b.chat, lines=[Line("user", "hi")], branch_key=b.branch_key).chat
    assert branch.pk != a.pk and branch.client_key == b.branch_key
    assert [m.mes for m in a.messages.order_by("index")] == [line.content for line in first] + [
        "One came in at dawn, sails torn."
    ]
    assert [m.mes for m in branch.messages.order_by("index")] == ["hi"]
    branch.messages.create(index=1, name="Mira", mes="Welcome to the inn.")  # its reply, as the generation stores it
    Chat.objects.filter(pk=branch.pk).update(message_count=2)
    b_next = [Line("user", "hi"), Line("assistant", "Welcome to the inn."), Line("user", "A room, please.")]
    assert chat_for_request(user=user, lines=b_next).chat.pk == branch.pk
    a_next = [*first, Line("assistant", "One came in at dawn, sails torn."), Line("user", "Which one?")]
    found = chat_for_request(user=user, lines=a_next)
    assert found.chat.pk == a.pk
    assert history_sync(chat=found.chat, lines=a_next, branch_key=found.branch_key).chat.pk == a.pk
    assert Chat.objects.count() == 2


def test_a_story_found_by_its_fingerprint_still_takes_an_edit_of_its_last_exchange(user):
    reply = "One came in at dawn, sails torn."
    chat = stored(user, story("Any ships?", reply, Line("user", "Which?"), Line("assistant", "The Heron.")))
    edited = story("Any ships?", reply, Line("user", "Which one, Mira?"))  # the person's last words edited
    found = chat_for_request(user=user, lines=edited)
    synced = history_sync(chat=found.chat, lines=edited, branch_key=found.branch_key)
    assert (synced.chat.pk, synced.mode) == (chat.pk, "swipe")  # the reply after them asked for again
    assert synced.written == {"appended": 0, "edited": 1, "deleted": 0}
    assert Chat.objects.count() == 1


def test_a_side_request_sent_with_a_storys_header_is_answered_and_changes_nothing(user):
    """A front end's title or summary request, sent to the chat its header names: answered, the story untouched."""
    lines = story("Any ships?", "One came in at dawn.", Line("user", "Which?"), Line("assistant", "The Heron."))
    found = chat_for_request(user=user, lines=lines, header="my-story")
    chat = history_sync(chat=found.chat, lines=lines, start=found.start, named=False).chat
    before = list(chat.messages.order_by("index").values_list("mes", flat=True))
    title = [Line("user", "Write a short title for this conversation: Any ships? One came in at dawn.")]
    found = chat_for_request(user=user, lines=title, header="my-story")
    synced = history_sync(chat=found.chat, lines=title, start=found.start, named=True)
    assert synced.mode == "impersonate" and synced.written == {"appended": 0, "edited": 0, "deleted": 0}
    assert list(chat.messages.order_by("index").values_list("mes", flat=True)) == before


def test_a_trimmed_history_not_found_in_the_chat_its_header_names_is_not_written_over_it(user):
    turns = [Line("user" if n % 2 else "assistant", f"Message {n} of the long story.") for n in range(400)]
    found = chat_for_request(user=user, lines=turns, header="long")
    chat = history_sync(chat=found.chat, lines=turns, named=True).chat
    assert chat.message_count == 399  # the last, the person's turn, is stored with the reply's generation
    trimmed = [*turns[240:340], Line("user", "And the next day?")]  # its end deleted in the front end, then trimmed
    found = chat_for_request(user=user, lines=trimmed, header="long")
    synced = history_sync(chat=found.chat, lines=trimmed, start=found.start, named=True)
    assert synced.mode == "impersonate"
    assert list(chat.messages.order_by("index").values_list("mes", flat=True)) == [t.content for t in turns[:399]]


def sent(user, lines: list[Line], header: str = "") -> Chat:
    """One request's history written as the gateway writes it; the chat it went to (the reply not stored)."""
    found = chat_for_request(user=user, lines=lines, header=header)
    return history_sync(
        chat=found.chat,
        lines=lines,
        start=found.start,
        head=found.head,
        branch_key=found.branch_key,
        named=found.how == "header",
    ).chat


def texts(chat: Chat) -> list[str]:
    return list(chat.messages.order_by("index").values_list("mes", flat=True))


def test_a_story_another_conversation_wrote_into_is_branched_not_edited_over(user):
    """A second conversation's 'hi' reads as a regenerate of the story's first reply (a swipe: nothing lost) and goes
    on in it; when the first conversation comes back, its history would edit two earlier messages over: a branch."""
    hi, hello = Line("user", "hi"), Line("assistant", "Hello, traveller.")
    story_chat = sent(user, [hi, hello])
    assert chat_for_request(user=user, lines=[hi]).chat.pk == story_chat.pk  # the other conversation's first request
    Message.objects.filter(chat=story_chat, index=1).update(mes="Welcome to the inn.")  # its reply, shown as a swipe
    room = [hi, Line("assistant", "Welcome to the inn."), Line("user", "A room, please.")]
    assert sent(user, room).pk == story_chat.pk
    story_chat = Chat.objects.get(pk=story_chat.pk)
    more = [{"name": "Rowan", "is_user": True, "mes": "A room, please."}, {"name": "Mira", "mes": "Up the stairs."}]
    chat_append(
        chat=story_chat, messages=more, integrity=story_chat.integrity
    )  # as the reply's generation stores them
    before = texts(story_chat)
    back = sent(user, [hi, hello, Line("user", "Any ships?")])  # the first conversation, its next turn
    assert back.pk != story_chat.pk and texts(back) == ["hi", "Hello, traveller."]
    assert texts(story_chat) == before == ["hi", "Welcome to the inn.", "A room, please.", "Up the stairs."]


def test_a_person_editing_one_earlier_message_edits_it_in_place(user):
    reply = "One came in at dawn, sails torn."
    lines = story("Any ships?", reply, Line("user", "Which?"), Line("assistant", "The Heron."), Line("user", "Oh."))
    chat = sent(user, lines)
    edited = story("Any ships?", "One came in at dawn, her sails torn.", *lines[4:], Line("assistant", "Yes."))
    assert sent(user, [*edited, Line("user", "And?")]).pk == chat.pk
    assert texts(chat)[2] == "One came in at dawn, her sails torn." and Chat.objects.count() == 1


def test_the_first_message_edited_and_its_reply_asked_again_in_a_named_chat_is_written(user):
    chat = sent(user, [Line("user", "Any ships?"), Line("assistant", "One came in.")], header="harbour")
    found = chat_for_request(user=user, lines=[Line("user", "Any ships today?")], header="harbour")
    synced = history_sync(chat=found.chat, lines=[Line("user", "Any ships today?")], named=True)
    assert (synced.chat.pk, synced.mode, synced.written["edited"]) == (chat.pk, "swipe", 1)
    assert texts(chat)[0] == "Any ships today?"


def test_a_regenerate_of_the_first_reply_goes_on_in_the_branch_of_that_length(user):
    hi = Line("user", "hi")
    long_story = sent(user, [hi, Line("assistant", "Hello, traveller."), Line("user", "Any ships?")])
    for n, text in enumerate(["One, at dawn.", "Which?", "The Heron."], start=3):
        long_story.messages.create(index=n, name="x", mes=text, is_user=text == "Which?")
    Chat.objects.filter(pk=long_story.pk).update(message_count=6)
    branch = sent(user, [hi])  # another conversation: the story would be cut down
    assert branch.pk != long_story.pk
    branch.messages.create(index=1, name="Assistant", mes="Welcome to the inn.")
    Chat.objects.filter(pk=branch.pk).update(message_count=2)
    Chat.objects.filter(pk=long_story.pk).update(updated_at=timezone.now())  # the story written last
    found = chat_for_request(user=user, lines=[hi])
    assert found.chat.pk == branch.pk  # the branch of two, not the story of six
    assert history_sync(chat=found.chat, lines=[hi], branch_key=found.branch_key).mode == "swipe"
    assert Chat.objects.count() == 2


def test_a_reply_stored_with_other_spacing_still_agrees_with_the_history(user):
    chat = sent(user, [Line("user", "hi"), Line("assistant", "Hello,  traveller.\n"), Line("user", "Any ships?")])
    assert agreement(chat=chat, lines=[Line("user", "hi"), Line("assistant", "Hello, traveller."), Line("user", "x")])
    assert agreement(chat=chat, lines=[Line("user", "hi"), Line("assistant", "Hello, traveller.")]) == 2


def long_story(user, header: str = "") -> tuple[Chat, list[Line]]:
    """A story of a greeting and 40 turns, the last a reply, stored as the gateway stores it."""
    turns = telling(40)
    return sent(user, [SYSTEM, *turns], header), turns


@pytest.mark.parametrize("header", ["", "long"])
@pytest.mark.parametrize("kept", [1, 2])
def test_a_front_end_that_keeps_the_greeting_past_its_cut_stays_in_the_story(user, header, kept):
    """A front end that trims the oldest messages to fit its context but keeps the greeting (and, one that keeps
    the first two messages, the person's first words): the request's history is those, then the newest messages.
    It goes on in the story, not in a new chat each turn (guessed) nor cut down to it (named); what it no longer
    sends is kept."""
    chat, turns = long_story(user, header)
    assert texts(chat) == [line.content for line in turns]
    for cut in (30, 32):  # two turns, the cut moving on
        person = Line("user", f"Go on from {cut}.")
        lines = [SYSTEM, *turns[:kept], *turns[cut:], person]
        found = chat_for_request(user=user, lines=lines, header=header)
        synced = history_sync(
            chat=found.chat, lines=lines, start=found.start, head=found.head, branch_key=found.branch_key,
            named=found.how == "header",
        )  # fmt: skip
        assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, "new", person.content)
        assert synced.written == {"appended": 0, "edited": 0, "deleted": 0}
        assert synced.indices == [*range(kept), *range(cut, len(turns)), None]  # the greeting, the newest turns
        turns += [person, Line("assistant", f"Reply {cut}.")]
        answered(chat, *turns[-2:])
        assert texts(chat) == [line.content for line in turns]
    assert Chat.objects.filter(user=user).count() == 1


def test_a_message_deleted_after_the_greeting_in_a_named_chat_is_kept_not_rewritten_over(user):
    """The same history as a greeting kept past a cut: the messages it leaves out are kept, nothing after them
    rewritten (before, the whole tail was deleted and written again)."""
    chat, turns = long_story(user, "long")
    lines = [SYSTEM, GREETING, *turns[2:], Line("user", "Go on.")]
    found = chat_for_request(user=user, lines=lines, header="long")
    synced = history_sync(chat=found.chat, lines=lines, start=found.start, head=found.head, named=True)
    assert synced.written == {"appended": 0, "edited": 0, "deleted": 0}
    assert texts(synced.chat) == [line.content for line in turns]


def test_a_greeting_kept_past_a_cut_is_not_found_in_another_story_of_the_same_card(user):
    chat, turns = long_story(user)
    other = [SYSTEM, Line("assistant", "Another greeting, another story."), *turns[30:], Line("user", "Go on.")]
    found = chat_for_request(user=user, lines=other)
    assert found.how == "new" and found.chat.pk != chat.pk


@pytest.mark.parametrize("header", ["", "long"])
def test_a_regenerate_with_the_greeting_kept_past_the_cut_is_a_swipe(user, header):
    chat, turns = long_story(user, header)
    lines = [SYSTEM, GREETING, *turns[30:-1]]  # the last reply left out: asked for again
    found = chat_for_request(user=user, lines=lines, header=header)
    synced = history_sync(
        chat=found.chat, lines=lines, start=found.start, head=found.head, branch_key=found.branch_key,
        named=found.how == "header",
    )  # fmt: skip
    assert (synced.chat.pk, synced.mode, synced.written["deleted"]) == (chat.pk, "swipe", 0)
    assert texts(chat) == [line.content for line in turns] and Chat.objects.filter(user=user).count() == 1


def test_a_kept_greeting_goes_back_to_its_story_not_into_a_branch_written_since(user):
    """A branch of the story made through the same front end, then the story again: both hold the run after the
    greeting; the history agrees longest with the story, and the branch's own exchange is not written over."""
    story_chat, turns = long_story(user)
    branch = synced_as_sent(user, [SYSTEM, GREETING, *turns[26:37], Line("user", "Branch words.")]).chat
    assert branch.pk != story_chat.pk
    answered(branch, Line("user", "Branch words."), Line("assistant", "Branch reply."))
    synced = synced_as_sent(user, [SYSTEM, GREETING, *turns[30:], Line("user", "Back in the story.")])
    assert synced.chat.pk == story_chat.pk and synced.written == {"appended": 0, "edited": 0, "deleted": 0}
    assert texts(branch)[-2:] == ["Branch words.", "Branch reply."] and Chat.objects.count() == 2


@pytest.mark.parametrize(("header", "kept"), [("long", 1), ("", 2)])
def test_a_kept_greeting_stored_with_other_spacing_is_still_the_chats(user, header, kept):
    """The head is found by its words, as a message is compared: a greeting stored with other spacing deleted
    nothing after it (named), or began a branch (guessed: the first two kept)."""
    chat, turns = long_story(user, header)
    spaced = "The  lantern is lit.\n"
    Message.objects.filter(chat=chat, index=0).update(mes=spaced, mes_md5=hashlib.md5(spaced.encode()).hexdigest())
    before = texts(chat)
    synced = synced_as_sent(user, [SYSTEM, *turns[:kept], *turns[30:], Line("user", "Go on.")], header)
    assert synced.chat.pk == chat.pk and synced.written == {"appended": 0, "edited": 0, "deleted": 0}
    assert synced.indices[:kept] == [None, 1][:kept]  # the greeting not held word for word: kept as sent
    assert texts(chat) == before and Chat.objects.count() == 1


def test_a_named_chat_with_a_kept_greeting_is_compared_in_a_few_queries_each_turn(user):
    """The head is looked for before the differing messages are read one by one: a run of 100 messages after the
    greeting was read a query each, every turn."""
    turns = telling(400)
    chat = sent(user, [SYSTEM, *turns], "long")
    lines = [SYSTEM, GREETING, *turns[301:], Line("user", "Go on.")]
    found = chat_for_request(user=user, lines=lines, header="long")
    with CaptureQueriesContext(connection) as queries:
        synced = history_sync(chat=found.chat, lines=lines, start=found.start, head=found.head, named=True)
    assert synced.chat.pk == chat.pk and synced.written == {"appended": 0, "edited": 0, "deleted": 0}
    assert len(queries.captured_queries) < 20


def repeated_story(user, header: str = "", at: tuple[int, int] = (3, 33)) -> tuple[Chat, list[Line]]:
    """long_story with one exchange said twice (a person's "Continue." and the same reply), at `at`."""
    turns = telling(40)
    for n in at:
        turns[n], turns[n + 1] = Line("user", "Continue."), Line("assistant", "*She nods.*")
    return sent(user, [SYSTEM, *turns], header), turns


@pytest.mark.parametrize("header", ["", "long"])
def test_an_exchange_said_twice_does_not_misplace_a_history_after_its_head(user, header):
    """A message deleted after the first two (kept, as a greeting kept past a cut), the next exchange said again
    later in the chat: the history is compared from the place it agrees with longest, not the latest (named: it
    went unstored each turn; guessed: a branch held the story's messages twice)."""
    chat, turns = repeated_story(user, header)
    synced = synced_as_sent(user, [SYSTEM, *turns[:2], *turns[3:], Line("user", "Go on.")], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, "new", "Go on.")
    assert synced.written == {"appended": 0, "edited": 0, "deleted": 0}
    assert texts(chat) == [line.content for line in turns] and Chat.objects.count() == 1


@pytest.mark.parametrize("kept", [0, 1])
def test_a_trimmed_history_whose_first_exchange_is_said_again_in_it_is_placed_at_its_start(user, kept):
    """The run's first exchange said again near its end: the place it agrees with longest is its start (the latest
    place wrote the run's end over the story's last messages)."""
    chat, turns = repeated_story(user, at=(31, 37))
    synced = synced_as_sent(user, [SYSTEM, *turns[:kept], *turns[31:], Line("user", "Go on.")])
    assert synced.chat.pk == chat.pk and synced.written == {"appended": 0, "edited": 0, "deleted": 0}
    assert texts(chat) == [line.content for line in turns]


@pytest.mark.parametrize("header", ["", "long"])
def test_a_run_beginning_with_the_words_said_after_the_greeting_is_placed_where_it_was_cut(user, header):
    """The person's first words after the greeting ("...") said again where the front end's run begins: the history
    is the greeting, then the run, not the greeting and the chat's first words, then the run a message later (the
    recall then searched the run's first message, which the prompt holds)."""
    turns = telling(40)
    turns[1] = turns[31] = Line("user", "...")
    chat = sent(user, [SYSTEM, *turns], header)
    synced = synced_as_sent(user, [SYSTEM, GREETING, *turns[31:], Line("user", "Go on.")], header)
    assert synced.chat.pk == chat.pk and synced.written == {"appended": 0, "edited": 0, "deleted": 0}
    assert synced.indices == [0, *range(31, 41), None]
    assert texts(chat) == [line.content for line in turns]


def test_a_kept_greeting_whose_run_ends_before_the_story_goes_on_in_a_branch(user):
    chat, turns = long_story(user)
    synced = synced_as_sent(user, [SYSTEM, GREETING, *turns[30:36], Line("user", "Another way.")])
    assert synced.chat.pk != chat.pk and texts(synced.chat) == [line.content for line in turns[:36]]
    assert synced.indices == [0, *range(30, 36), None]
    assert texts(chat) == [line.content for line in turns]


def sayings(turns: int, every: int = 4) -> list[Line]:
    """telling's story with the exchange "Continue." / "*She nods.*" said every `every` messages."""
    told = telling(turns)
    for n in range(1, turns - 1, every):
        told[n], told[n + 1] = Line("user", "Continue."), Line("assistant", "*She nods.*")
    return told


@pytest.mark.parametrize("header", ["", "long"])
@pytest.mark.parametrize("kept", [0, 1, 2])
def test_a_run_whose_first_exchange_is_said_a_hundred_times_is_placed_in_a_few_queries(user, header, kept):
    """More places than the 50 read hold the run's first exchange: those nearest where the run would start are
    read first (the latest first wrote 100 messages over and 100 again, named), a few of them compared, and their
    next messages read in one query (a query each, and a comparison each, cost over 120 queries a turn)."""
    turns = sayings(600)
    chat = sent(user, [SYSTEM, *turns], header)
    lines = [SYSTEM, *turns[:kept], *turns[301:], Line("user", "Go on.")]  # a run of 300 messages
    with CaptureQueriesContext(connection) as queries:
        synced = synced_as_sent(user, lines, header)
    assert synced.chat.pk == chat.pk and synced.written == {"appended": 0, "edited": 0, "deleted": 0}
    assert texts(chat) == [line.content for line in turns] and Chat.objects.count() == 1
    assert len(queries.captured_queries) < 30


@pytest.mark.parametrize("header", ["", "long"])
def test_a_run_beginning_with_a_common_message_is_found_past_its_other_sayings(user, header):
    """The person's "..." stands in more than 50 places (and in more as part of other messages) after where the
    run begins: it went unstored each turn (named) or began a new chat (guessed)."""
    turns = telling(400)
    for n in range(1, 400, 2):
        turns[n] = Line("user", "..." if n % 3 else f"Well... {n}")
    start = 251 if turns[251].content == "..." else 253
    chat = sent(user, [SYSTEM, *turns], header)
    synced = synced_as_sent(user, [SYSTEM, *turns[start:], Line("user", "Go on.")], header)
    assert (synced.chat.pk, synced.mode, synced.message) == (chat.pk, "new", "Go on.")
    assert synced.written == {"appended": 0, "edited": 0, "deleted": 0} and Chat.objects.count() == 1


def test_a_story_with_its_first_two_messages_kept_goes_back_to_it_not_into_its_branch(user):
    """The front end keeps the greeting and the person's first words: the story and its branch both agree that far
    (the fingerprint's); the rest is placed in each, and agrees longest with the story."""
    story_chat, turns = long_story(user)
    branch = synced_as_sent(user, [SYSTEM, *turns[:2], *turns[26:37], Line("user", "Branch words.")]).chat
    assert branch.pk != story_chat.pk
    answered(branch, Line("user", "Branch words."), Line("assistant", "Branch reply."))
    synced = synced_as_sent(user, [SYSTEM, *turns[:2], *turns[30:], Line("user", "Back in the story.")])
    assert synced.chat.pk == story_chat.pk and synced.written == {"appended": 0, "edited": 0, "deleted": 0}
    assert synced.indices == [0, 1, *range(30, 41), None]
    assert texts(branch)[-2:] == ["Branch words.", "Branch reply."] and texts(story_chat) == [t.content for t in turns]
