"""The gateway's rules on their own: which chat a conversation is (its fingerprint, the character it names) and
what a request's history writes into the stored chat."""

from __future__ import annotations

import pytest

from apps.chats.models import Message
from apps.chats.selectors import history_digests
from apps.chats.services.chats import chat_create
from apps.chats.services.writes import chat_append
from apps.common.exceptions import ApplicationError
from apps.gateway.services.match import character_named, fingerprint, person_named
from apps.gateway.services.placing import Digests, agreeing
from apps.gateway.services.request import Line, messages_parse
from apps.gateway.services.sync import history_sync

pytestmark = pytest.mark.django_db

SYSTEM = Line("system", "Write Mira's next reply in a fictional chat between Mira and Rowan.")
GREETING = Line("assistant", "The lantern is lit.")


def test_a_storys_fingerprint_stays_as_it_grows_and_parts_at_the_first_message():
    first = [SYSTEM, GREETING, Line("user", "Any ships?")]
    grown = [*first, Line("assistant", "One."), Line("user", "Which?"), Line("system", "[a note at depth]")]
    assert fingerprint(first) == fingerprint(grown)
    assert fingerprint([SYSTEM, GREETING, Line("user", "  Any   ships? ")]) == fingerprint(first)  # whitespace
    assert fingerprint([SYSTEM, GREETING, Line("user", "A room, please.")]) != fingerprint(first)
    assert fingerprint([Line("system", "Another card."), GREETING, Line("user", "Any ships?")]) != fingerprint(first)


@pytest.mark.parametrize(
    ("system", "name"),
    [
        ("Write Mira's next reply in a fictional chat.", "Mira"),
        ("You are Captain Hale, master of the Gull.", "Captain Hale"),
        ("[Character: Old Tom]\nA fisherman.", "Old Tom"),
        ("You are a helpful assistant.", ""),
    ],
)
def test_the_character_is_named_by_the_system_prompt(system, name):
    assert character_named([Line("system", system), Line("user", "Hi")]) == name


@pytest.mark.parametrize(
    ("lines", "name"),
    [
        ([Line("system", "Write Mira's next reply in a fictional chat between Mira and Rowan."), Line("user", "Hi")],
         "Rowan"),
        ([Line("system", "A fictional chat between Mira and Rowan the Bold.\nMira keeps a lantern.")],
         "Rowan the Bold"),
        ([Line("system", "Write Mira's next reply."), Line("user", "Hi", name="Ash")], "Ash"),
        ([Line("system", "You are a helpful assistant."), Line("user", "Hi")], ""),
    ],
)  # fmt: skip
def test_who_the_person_plays_is_named_by_their_messages_or_sillytaverns_main_prompt(lines, name):
    assert person_named(lines) == name


@pytest.mark.parametrize("role", ["tool", None, ["user"], {"user": 1}, 3])
def test_a_role_that_is_unknown_is_refused_naming_the_field(role):
    with pytest.raises(ApplicationError) as caught:
        messages_parse([{"role": "user", "content": "Hi"}, {"role": role, "content": "{}"}])
    assert caught.value.extra["field"] == "messages[1].role"


PARTS = [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]


@pytest.mark.parametrize(
    ("message", "line"),
    [
        ({"role": "user", "content": "Hi"}, Line("user", "Hi")),
        ({"role": "developer", "content": "Be brief."}, Line("system", "Be brief.")),
        ({"role": "user", "content": "Hi", "name": "  Rowan "}, Line("user", "Hi", "Rowan")),
        ({"role": "user", "content": "a\x00b"}, Line("user", "ab")),
        ({"role": "assistant", "content": None}, Line("assistant", "")),
        ({"role": "user", "content": PARTS}, Line("user", "a\nb")),
        ({"role": "system", "content": "x" * 150_000}, Line("system", "x" * 150_000)),  # not stored
    ],
)  # fmt: skip
def test_each_message_is_read_the_same_beside_plain_ones(message, line):
    plain = {"role": "assistant", "content": "The lantern is lit."}
    assert messages_parse([plain, message, plain]) == [Line(*plain.values()), line, Line(*plain.values())]


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ("Hi", "messages[1]"),
        ({"role": "user", "content": "x" * 100_001}, "messages[1].content"),
        ({"role": "user", "content": 7}, "messages[1].content"),
        ({"role": "user", "content": "Hi", "name": 3}, "messages[1].name"),
        ({"role": "user", "content": [{"type": "text", "text": "a"}, "b"]}, "messages[1].content[1]"),
        ({"role": "system", "content": "x" * 1_000_001}, "messages[1].content"),
    ],
)
def test_a_message_that_is_not_plain_and_wrong_is_refused_naming_its_field(message, field):
    with pytest.raises(ApplicationError) as caught:
        messages_parse([{"role": "user", "content": "Hi"}, message])
    assert caught.value.extra["field"] == field


def test_message_digests_are_kept_by_text_and_forgotten_at_once_past_their_bound():
    import hashlib

    digests = Digests(10)
    assert digests.of("abc") == hashlib.md5(b"abc").hexdigest()
    assert digests.of("défgh") == hashlib.md5("défgh".encode()).hexdigest()
    assert set(digests.held) == {"abc", "défgh"}  # 8 characters kept
    assert digests.of("ijk") == hashlib.md5(b"ijk").hexdigest()
    assert set(digests.held) == {"ijk"}  # 11 would pass the bound: the others forgotten
    assert digests.of("abc") == hashlib.md5(b"abc").hexdigest()


@pytest.fixture
def stored(user):
    chat = chat_create(user=user, title="Harbour", character_name="Mira", user_name="Rowan")
    lines = [
        {"name": "Mira", "is_user": False, "mes": "The lantern is lit."},
        {"name": "Rowan", "is_user": True, "mes": "Any ships?"},
        {"name": "Mira", "is_user": False, "mes": "One.", "swipes": ["One."], "swipe_id": 0},
    ]
    return chat_append(chat=chat, messages=lines, integrity=chat.integrity).chat


def texts(chat):
    return [m.mes for m in Message.objects.filter(chat=chat).order_by("index")]


HISTORY = [SYSTEM, GREETING, Line("user", "Any ships?"), Line("assistant", "One.")]


def test_new_messages_are_appended_and_the_last_is_the_persons_turn(stored):
    synced = history_sync(chat=stored, lines=[*HISTORY, Line("user", "Which?")])
    assert (synced.mode, synced.message) == ("new", "Which?")
    assert texts(stored) == ["The lantern is lit.", "Any ships?", "One."]  # the turn goes in with the reply
    assert synced.written == {"appended": 0, "edited": 0, "deleted": 0}


def test_the_history_without_its_last_reply_is_a_regenerate(stored):
    synced = history_sync(chat=stored, lines=HISTORY[:-1])
    assert (synced.mode, synced.message) == ("swipe", None) and texts(stored)[-1] == "One."


def test_a_changed_earlier_message_is_an_edit_of_it_and_its_shown_swipe(stored):
    lines = [SYSTEM, GREETING, Line("user", "Any ships?"), Line("assistant", "Two."), Line("user", "Two?")]
    synced = history_sync(chat=stored, lines=lines)
    assert synced.written["edited"] == 1
    edited = Message.objects.get(chat=stored, index=2)
    assert edited.mes == "Two." and edited.swipes == ["Two."]


def test_messages_gone_from_the_end_are_deleted(stored):
    synced = history_sync(chat=stored, lines=[SYSTEM, GREETING])
    assert synced.written["deleted"] == 2 and texts(stored) == ["The lantern is lit."]


def test_a_history_ending_with_a_reply_continues_it(stored):
    assert history_sync(chat=stored, lines=HISTORY).mode == "continue"


def test_a_request_of_system_messages_only_changes_nothing(stored):
    integrity = stored.integrity
    synced = history_sync(chat=stored, lines=[SYSTEM])
    assert synced.chat.integrity == integrity and len(texts(stored)) == 3


def test_a_message_differing_only_in_whitespace_is_not_an_edit(stored):
    lines = [SYSTEM, GREETING, Line("user", "Any  ships?\n"), Line("assistant", " One."), Line("user", "Which?")]
    assert history_sync(chat=stored, lines=lines).written["edited"] == 0
    assert texts(stored)[1] == "Any ships?"


def test_sillytaverns_impersonate_is_a_draft_that_is_not_stored(stored):
    nudge = Line("system", "[Write your next reply from the point of view of Rowan, using the chat history so far.]")
    synced = history_sync(chat=stored, lines=[*HISTORY, nudge])
    assert (synced.mode, synced.message) == ("impersonate", None) and len(texts(stored)) == 3


def test_sillytaverns_continue_nudge_continues_and_a_quiet_prompt_after_a_reply_is_not_stored(stored):
    nudge = Line("system", "[Continue your last message without repeating its original content.]")
    assert history_sync(chat=stored, lines=[*HISTORY, nudge]).mode == "continue"
    quiet = Line("system", "[Pause your roleplay. Summarize the most important facts and events in the story so far.]")
    synced = history_sync(chat=stored, lines=[*HISTORY, quiet])
    assert (synced.mode, synced.message) == ("impersonate", None) and texts(stored)[-1] == "One."


def test_a_hidden_message_is_not_compared_and_the_others_keep_their_indices(stored):
    Message.objects.filter(chat=stored, index=1).update(is_system=True)  # hidden from the model in SillyTavern
    lines = [SYSTEM, GREETING, Line("assistant", "One."), Line("user", "Which?")]
    synced = history_sync(chat=stored, lines=lines)
    assert synced.written == {"appended": 0, "edited": 0, "deleted": 0}
    assert synced.indices == [0, 2, None] and (synced.mode, synced.message) == ("new", "Which?")


def test_edits_far_apart_are_each_found_and_the_messages_between_kept(user):
    chat = chat_create(user=user, title="Long", character_name="Mira", user_name="Rowan")
    said = [{"name": "Rowan" if n % 2 else "Mira", "is_user": bool(n % 2), "mes": f"Line {n}."} for n in range(300)]
    chat = chat_append(chat=chat, messages=said, integrity=chat.integrity).chat
    history = [Line("user" if n % 2 else "assistant", f"Line {n}.") for n in range(300)]
    history[7], history[250] = Line("user", "Line seven, edited."), Line("assistant", "Line 250, edited.")
    synced = history_sync(chat=chat, lines=[SYSTEM, *history, Line("user", "And now?")])
    assert synced.written == {"appended": 0, "edited": 2, "deleted": 0}
    assert synced.indices == [*range(300), None]
    assert texts(chat)[7] == "Line seven, edited." and texts(chat)[250] == "Line 250, edited."
    assert texts(chat)[8:250] == [f"Line {n}." for n in range(8, 250)]


def test_history_digests_read_the_indices_where_a_gap_is_left(user):
    import hashlib

    chat = chat_create(user=user, title="Gap", character_name="Mira", user_name="Rowan")
    said = [{"name": "Mira", "is_user": False, "mes": f"Line {n}."} for n in range(4)]
    chat = chat_append(chat=chat, messages=said, integrity=chat.integrity).chat
    Message.objects.filter(chat=chat, index=3).update(index=7)  # no write leaves a gap: made by hand
    digests = history_digests(chat=chat, start=1)
    assert digests.indices == [1, 2, 7] and digests.speakers == "aaa"
    assert digests.md5 == "".join(hashlib.md5(f"Line {n}.".encode()).hexdigest() for n in (1, 2, 3))


@pytest.mark.parametrize("width", [1, 32])
def test_agreeing_counts_the_items_two_strings_share_from_the_start(width):
    import random

    rng = random.Random(width)
    for _ in range(300):
        count = rng.randint(0, 40)
        ours = [rng.choice("ab") * width for _ in range(count)]
        theirs = [item if rng.random() < 0.9 else ("c" * width) for item in ours] + ["a" * width] * rng.randint(0, 3)
        expected = next((n for n in range(count) if ours[n] != theirs[n]), count)
        assert agreeing("".join(ours), "".join(theirs), count, width=width) == expected
